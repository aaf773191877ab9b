#!/usr/bin/env python3
"""Constrained decoding over HTTP on the real engine: `dserve serve` on the bundled demo model (its byte-level BPE
tokenizer spells every byte). /generate with `regex` and `json_schema`, chat completions with response_format
json_schema / json_object, tool_choice "required" and a named function (the tool-call format with the tools'
parameter schemas): greedy and sampled outputs match the constraint whole (the demo model, trained on
arithmetic and the King James Bible, writes no JSON of its own); bad constraints get a 400 that names them; the
demo's arithmetic answer survives a regex of its own answer's shape.
Usage: constrained_test.py [path/to/dserve]."""
import json
import os
import re
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

BINARY = H.dserve_binary(sys.argv)
DEMO = os.path.join(H.SOURCE_DIR, "models", "dserve-demo")


class DemoServerTest(unittest.TestCase):
    """A `dserve serve` on the demo model for the class's tests: EXTRA_ARGS after the common flags, ENV added to its
    environment; it must exit cleanly."""
    EXTRA_ARGS = []
    ENV = None
    server = None

    @classmethod
    def setUpClass(cls):
        cls.server = H.Server(BINARY, ["--model-path", DEMO, "--page-size", "16", "--max-total-tokens", "16384"] +
                              cls.EXTRA_ARGS, env=cls.ENV).start()

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop(timeout=30)
        assert code == 0, "server exit code %r; stderr: %s" % (code, cls.server.stderr_lines[-10:])


class ConstrainedTest(DemoServerTest):
    EXTRA_ARGS = ["--tool-call-parser", "deepseekv3"]

    def generate(self, text, **sampling):
        params = {"max_new_tokens": 48, "temperature": 0}
        params.update(sampling)
        r = H.post(self.server, "/generate", {"text": text, "sampling_params": params})
        self.assertEqual(r.status, 200, r)
        return r.json()

    def test_regex(self):
        pattern = r"(yes|no), [0-9]{2,3}( items)?"
        for seed, temperature in ((None, 0), (3, 1.0), (4, 1.0)):
            extra = {"sampling_seed": seed} if seed is not None else {}
            out = self.generate("Answer:", regex=pattern, temperature=temperature, **extra)
            self.assertIsNotNone(re.fullmatch(pattern, out["text"]), out["text"])
            self.assertEqual(out["meta_info"]["finish_reason"]["type"], "stop", out["meta_info"])

    def test_the_demo_answer_fits_a_regex_of_its_shape(self):
        body = {"messages": [{"role": "user", "content": "What is 17 plus 25?"}], "max_tokens": 16, "temperature": 0,
                "regex": r"[0-9]+ (plus|minus) [0-9]+ is -?[0-9]{1,4}\."}
        r = H.post(self.server, "/v1/chat/completions", body)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["choices"][0]["message"]["content"], "17 plus 25 is 42.")

    def test_json_schema(self):
        schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 6},
                                                   "n": {"type": "integer"}, "ok": {"type": "boolean"}},
                  "required": ["name", "ok"]}
        whole = 0
        for temperature, seed in ((0, 5), (0.8, 5), (0.8, 6), (0.8, 7)):
            out = self.generate("JSON:", json_schema=json.dumps(schema), temperature=temperature, max_new_tokens=64,
                                sampling_seed=seed)
            if out["meta_info"]["finish_reason"]["type"] == "length":
                continue  # a sampled string may run past the budget
            whole += 1
            value = json.loads(out["text"])
            self.assertEqual(list(value)[0], "name")  # the schema's property order
            self.assertIsInstance(value["ok"], bool)
            self.assertLessEqual(len(value["name"]), 6)
        self.assertGreaterEqual(whole, 2)

    def test_chat_response_format(self):
        schema = {"type": "object", "properties": {"zeta": {"type": "integer"}, "alpha": {"enum": ["x", "y"]}},
                  "required": ["zeta", "alpha"]}
        body = {"messages": [{"role": "user", "content": "Give JSON"}], "max_tokens": 64, "temperature": 0,
                "response_format": {"type": "json_schema", "json_schema": {"name": "t", "schema": schema}}}
        r = H.post(self.server, "/v1/chat/completions", body)
        self.assertEqual(r.status, 200, r)
        content = r.json()["choices"][0]["message"]["content"]
        value = json.loads(content)
        self.assertEqual(list(value), ["zeta", "alpha"])  # the body's order, not sorted
        self.assertIn(value["alpha"], ("x", "y"))
        body["response_format"] = {"type": "json_object"}
        r = H.post(self.server, "/v1/chat/completions", body)
        self.assertEqual(r.status, 200, r)
        choice = r.json()["choices"][0]
        self.assertEqual(choice["finish_reason"], "stop", choice)
        self.assertIsInstance(json.loads(choice["message"]["content"]), dict)

    def test_completions_response_format(self):
        schema = {"type": "object", "properties": {"b": {"type": "boolean"}, "a": {"type": "null"}},
                  "required": ["b", "a"]}
        r = H.post(self.server, "/v1/completions", {"prompt": "x", "max_tokens": 32, "temperature": 0,
                                                   "response_format": {"type": "json_schema",
                                                                       "json_schema": {"name": "t", "schema": schema}}})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(list(json.loads(r.json()["choices"][0]["text"])), ["b", "a"])

    TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
                 "type": "object", "properties": {"city": {"type": "string", "maxLength": 12}}, "required": ["city"]}}},
             {"type": "function", "function": {"name": "add", "parameters": {
                 "type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "integer"}},
                 "required": ["b", "a"]}}}]

    def test_tool_choice_required_and_named(self):
        base = {"messages": [{"role": "user", "content": "What is 17 plus 25?"}], "max_tokens": 400, "temperature": 0,
                "tools": self.TOOLS}
        r = H.post(self.server, "/v1/chat/completions", dict(base, tool_choice="required"))
        self.assertEqual(r.status, 200, r)
        choice = r.json()["choices"][0]
        # (The demo model, never trained on tools, may go on calling until the budget ends: a call or more.)
        self.assertIn(choice["finish_reason"], ("tool_calls", "length"), choice)
        calls = choice["message"]["tool_calls"] or []
        self.assertGreaterEqual(len(calls), 1)
        for call in calls:
            self.assertIn(call["function"]["name"], ("get_weather", "add"))
            self.assertIsInstance(json.loads(call["function"]["arguments"]), dict)
        r = H.post(self.server, "/v1/chat/completions",
                   dict(base, tool_choice={"type": "function", "function": {"name": "add"}}))
        self.assertEqual(r.status, 200, r)
        choice = r.json()["choices"][0]
        self.assertEqual(choice["finish_reason"], "tool_calls", choice)
        calls = choice["message"]["tool_calls"]
        self.assertEqual(len(calls), 1)
        self.assertEqual(calls[0]["function"]["name"], "add")
        args = json.loads(calls[0]["function"]["arguments"])
        self.assertEqual(list(args), ["b", "a"])  # the parameters' order in the body
        self.assertIsInstance(args["a"], int)
        r = H.post(self.server, "/v1/chat/completions",
                   dict(base, tool_choice={"type": "function", "function": {"name": "nope"}}))
        self.assertEqual(r.status, 400, r)
        self.assertIn("'nope'", r.body.decode())

    def test_ebnf(self):
        """SGLang's `ebnf` (GBNF, from rule root): greedy and sampled outputs are whole sentences of the grammar, a
        recursive one within its unrolled depth; also as an extra field of a chat completion."""
        grammar = 'root ::= answer ", " number\nanswer ::= "yes" | "no"\nnumber ::= [1-9] [0-9]{0,2}\n'
        for seed, temperature in ((None, 0), (5, 1.0), (6, 1.0)):
            extra = {"sampling_seed": seed} if seed is not None else {}
            out = self.generate("Answer:", ebnf=grammar, temperature=temperature, **extra)
            self.assertIsNotNone(re.fullmatch(r"(yes|no), [1-9][0-9]{0,2}", out["text"]), out["text"])
            self.assertEqual(out["meta_info"]["finish_reason"]["type"], "stop", out["meta_info"])
        nested = 'root ::= "(" root ")" | "x"'
        for seed in (1, 2, 3):
            out = self.generate("Nest:", ebnf=nested, temperature=1.0, sampling_seed=seed, max_new_tokens=32)
            t = out["text"]
            d = len(t) - len(t.lstrip("("))
            self.assertEqual(t, "(" * d + "x" + ")" * d)
            self.assertLessEqual(d, 4)  # root inside itself at most 4 times
        r = H.post(self.server, "/v1/chat/completions", {"messages": [{"role": "user", "content": "2+2?"}],
                                                         "max_tokens": 16, "temperature": 0, "ebnf": grammar})
        self.assertEqual(r.status, 200, r)
        self.assertIsNotNone(re.fullmatch(r"(yes|no), [1-9][0-9]{0,2}",
                                          r.json()["choices"][0]["message"]["content"]), r.json())

    def test_structural_tag(self):
        """SGLang's structural_tag (sampling_params in /generate, response_format in chat): free text in which each
        trigger opens a structure - its begin, a JSON value of its schema, its end. Here the trigger is a comma, which
        the demo model (trained on the King James Bible) writes all the time: each one must go on with a digit and a
        space."""
        tag = {"structures": [{"begin": ",", "schema": {"type": "integer", "minimum": 1, "maximum": 9}, "end": " "}],
               "triggers": [","]}
        shape = re.compile(r"(?:[^,]|,[1-9] )*")
        for seed, temperature in ((None, 0), (7, 1.0)):
            extra = {"sampling_seed": seed} if seed is not None else {}
            out = self.generate("In the beginning God created the heaven and the earth.", max_new_tokens=40,
                                structural_tag=json.dumps(tag), temperature=temperature, ignore_eos=True, **extra)
            self.assertIsNotNone(shape.fullmatch(out["text"]), out["text"])
            self.assertRegex(out["text"], ",[1-9] ")
        r = H.post(self.server, "/v1/chat/completions", {
            "messages": [{"role": "user", "content": "Tell me about the earth."}], "max_tokens": 40, "temperature": 0,
            "response_format": dict(type="structural_tag", **tag)})
        self.assertEqual(r.status, 200, r)
        self.assertIsNotNone(shape.fullmatch(r.json()["choices"][0]["message"]["content"]), r.json())
        bad = dict(tag, triggers=[",", "#"])
        r = H.post(self.server, "/generate", {"text": "x", "sampling_params": {"structural_tag": bad}})
        self.assertEqual(r.status, 400, r)
        self.assertIn("triggers[1] '#' opens no structure", r.body.decode())

    def test_bad_constraints_are_named(self):
        cases = [({"regex": "(ab"}, "missing )"), ({"json_schema": "{not json"}, "not valid JSON"),
                 ({"json_schema": json.dumps({"type": "tuple"})}, "unknown type"),
                 ({"regex": "a", "json_schema": "{}"}, "only one of"), ({"ebnf": "root ::= item"}, "'item' is not defined"),
                 ({"ebnf": "start ::= \"a\""}, "no 'root' rule"), ({"ebnf": "root ::= \"a\" root"}, "admits no text"),
                 ({"ebnf": "root ::= \"a\"", "regex": "a"}, "only one of")]
        for sampling, needle in cases:
            params = {"max_new_tokens": 4}
            params.update(sampling)
            r = H.post(self.server, "/generate", {"text": "x", "sampling_params": params})
            self.assertEqual(r.status, 400, (sampling, r))
            self.assertIn(needle, r.body.decode(), sampling)
        out = self.generate("still serving", max_new_tokens=3, ignore_eos=True)
        self.assertEqual(out["meta_info"]["completion_tokens"], 3)


class DsmlToolChoiceTest(DemoServerTest):
    """tool_choice with --tool-call-parser deepseekv32: the output constrained to DSML (V3.2's invoke / parameter
    markup, plain strings raw, integers as JSON) and parsed back into tool calls."""
    EXTRA_ARGS = ["--tool-call-parser", "deepseekv32"]

    def test_named_functions(self):
        # Integers from an enum: the demo model, never trained on tools, would write digits until the budget ends.
        tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
                     "type": "object", "properties": {"city": {"type": "string", "maxLength": 12}},
                     "required": ["city"]}}},
                 {"type": "function", "function": {"name": "add", "parameters": {
                     "type": "object", "properties": {"b": {"type": "integer", "enum": [17, 25]},
                                                      "a": {"type": "integer", "enum": [17, 25]}},
                     "required": ["b", "a"]}}}]
        base = {"messages": [{"role": "user", "content": "What is 17 plus 25?"}], "max_tokens": 400, "temperature": 0,
                "tools": tools}
        for name in ("add", "get_weather"):
            r = H.post(self.server, "/v1/chat/completions",
                       dict(base, tool_choice={"type": "function", "function": {"name": name}}))
            self.assertEqual(r.status, 200, r)
            choice = r.json()["choices"][0]
            self.assertEqual(choice["finish_reason"], "tool_calls", choice)
            calls = choice["message"]["tool_calls"]
            self.assertEqual(len(calls), 1, choice)
            self.assertEqual(calls[0]["function"]["name"], name)
            args = json.loads(calls[0]["function"]["arguments"])
            if name == "add":
                self.assertEqual(list(args), ["b", "a"])
                self.assertIn(args["a"], (17, 25))
                self.assertIn(args["b"], (17, 25))
            else:
                self.assertEqual(list(args), ["city"])
                self.assertIsInstance(args["city"], str)
                self.assertLessEqual(len(args["city"]), 12)
                self.assertNotIn("<", args["city"])


class CompilesOffTheIoThreadTest(DemoServerTest):
    """One I/O thread and every constraint compile made 3 s slower (DSERVE_TEST_COMPILE_DELAY_MS): while a
    constrained request compiles, the same thread still answers others; the constrained request then completes, and
    the same constraint again is served from the cache without the delay."""
    EXTRA_ARGS = ["--io-threads", "1"]
    ENV = {"DSERVE_TEST_COMPILE_DELAY_MS": "3000"}

    def test_other_requests_answered_while_a_constraint_compiles(self):
        pattern = r"(yes|no)!"
        body = {"text": "Answer:", "sampling_params": {"max_new_tokens": 8, "temperature": 0, "regex": pattern}}
        result = {}

        def constrained():
            t = time.time()
            result["reply"] = H.post(self.server, "/generate", body)
            result["seconds"] = time.time() - t

        th = threading.Thread(target=constrained)
        th.start()
        time.sleep(0.3)  # the constrained request is in its compile
        t = time.time()
        health = H.request(self.server, "GET", "/health", None)
        plain = H.post(self.server, "/generate", {"text": "x", "sampling_params": {"max_new_tokens": 2,
                                                                                  "ignore_eos": True}})
        others = time.time() - t
        th.join(30)
        self.assertEqual(health.status, 200, health)
        self.assertEqual(plain.status, 200, plain)
        self.assertLess(others, 2.0, "requests waited for the compile")
        self.assertEqual(result["reply"].status, 200, result["reply"])
        self.assertGreater(result["seconds"], 2.9)
        self.assertIsNotNone(re.fullmatch(pattern, result["reply"].json()["text"]), result["reply"].json())
        t = time.time()
        again = H.post(self.server, "/generate", body)  # compiled and kept: no compile, no delay
        self.assertEqual(again.status, 200, again)
        self.assertLess(time.time() - t, 2.0)
        self.assertEqual(again.json()["text"], result["reply"].json()["text"])


class ConstrainedSpeculativeTest(DemoServerTest):
    """Constraints with NGRAM speculative decoding (each verification row constrained by the grammar's state after
    the drafts before it): outputs match; the demo model's greedy answer is the same as without drafts; drafts ran."""
    EXTRA_ARGS = ["--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "4"]

    def test_constraints_with_drafts(self):
        body = {"messages": [{"role": "user", "content": "What is 17 plus 25?"}], "max_tokens": 16, "temperature": 0,
                "regex": r"[0-9]+ (plus|minus) [0-9]+ is -?[0-9]{1,4}\."}
        r = H.post(self.server, "/v1/chat/completions", body)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["choices"][0]["message"]["content"], "17 plus 25 is 42.")
        pattern = r"(yes|no), [0-9]{2,3}( items)?"
        for seed, temperature in ((None, 0), (3, 1.0)):
            params = {"max_new_tokens": 48, "temperature": temperature, "regex": pattern}
            if seed is not None:
                params["sampling_seed"] = seed
            r = H.post(self.server, "/generate", {"text": "Answer:", "sampling_params": params})
            self.assertEqual(r.status, 200, r)
            self.assertIsNotNone(re.fullmatch(pattern, r.json()["text"]), r.json())
            self.assertGreater(r.json()["meta_info"]["spec_verify_ct"], 0, r.json()["meta_info"])  # drafts verified
        schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 6}, "ok": {"type": "boolean"}},
                  "required": ["name", "ok"]}
        r = H.post(self.server, "/generate", {"text": "JSON:", "sampling_params": {
            "max_new_tokens": 64, "temperature": 0, "json_schema": json.dumps(schema)}})
        self.assertEqual(r.status, 200, r)
        value = json.loads(r.json()["text"])
        self.assertEqual(sorted(value), ["name", "ok"])
        info = H.request(self.server, "GET", "/get_server_info", None).json()
        self.assertEqual(info["speculative_algorithm"], "NGRAM")


class CompileTimeoutTest(DemoServerTest):
    """--request-timeout counts the constraint's compile too: with every compile 3 s long and a 1 s timeout, a
    constrained request is answered 500 "request timed out ... while its constraints compiled" after ~1 s (the compile
    finishes later and submits nothing); plain requests are untouched."""
    EXTRA_ARGS = ["--request-timeout", "1"]
    ENV = {"DSERVE_TEST_COMPILE_DELAY_MS": "3000"}

    def test_the_timeout_includes_the_compile(self):
        t = time.time()
        r = H.post(self.server, "/generate", {"text": "Answer:", "sampling_params": {
            "max_new_tokens": 8, "temperature": 0, "regex": "(yes|no)!"}})
        took = time.time() - t
        self.assertEqual(r.status, 500, r)
        self.assertIn("request timed out after 1 s (--request-timeout) while its constraints compiled",
                      r.body.decode())
        self.assertLess(took, 2.5)
        time.sleep(2.5)  # the compile ends: nothing is submitted for the answered request
        plain = H.post(self.server, "/generate", {"text": "x", "sampling_params": {"max_new_tokens": 2,
                                                                                  "ignore_eos": True}})
        self.assertEqual(plain.status, 200, plain)
        info = H.request(self.server, "GET", "/get_server_info", None).json()
        stats = info["internal_states"][0]
        self.assertEqual((stats["num_running_reqs"], stats["num_waiting_reqs"]), (0, 0), stats)


class CompileQueueFullTest(DemoServerTest):
    """Two compile workers, one waiting place (DSERVE_TEST_COMPILE_QUEUE) and every compile 2 s long: of five
    requests with distinct constraints sent together, those that find the queue full get 503 with Retry-After and
    nothing else happens to them or to the others; the accepted ones complete, and the server keeps serving."""
    ENV = {"DSERVE_TEST_COMPILE_DELAY_MS": "2000", "DSERVE_TEST_COMPILE_QUEUE": "1"}

    def test_a_full_compile_queue_answers_503(self):
        words = ["alpha", "beta", "gamma", "delta", "omega"]
        replies = {}

        def send(word):
            body = {"text": "Say:", "sampling_params": {"max_new_tokens": 8, "temperature": 0, "regex": word + "!"}}
            replies[word] = H.post(self.server, "/generate", body)

        threads = [threading.Thread(target=send, args=(w,)) for w in words]
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
        statuses = sorted(r.status for r in replies.values())
        self.assertEqual(len(replies), len(words))
        rejected = [w for w, r in replies.items() if r.status == 503]
        accepted = [w for w, r in replies.items() if r.status == 200]
        self.assertEqual(len(rejected) + len(accepted), len(words), statuses)
        self.assertGreaterEqual(len(rejected), 2, statuses)  # at most two compiling and one waiting
        self.assertGreaterEqual(len(accepted), 1, statuses)
        for w in rejected:
            self.assertIn("waiting to compile", replies[w].body.decode())
            self.assertEqual(replies[w].headers.get("retry-after"), "1", replies[w].headers)
        for w in accepted:
            self.assertEqual(replies[w].json()["text"], w + "!", replies[w].json())
        # A rejected constraint is accepted once the queue has room; plain requests never queued behind it.
        again = H.post(self.server, "/generate", {"text": "Say:", "sampling_params": {
            "max_new_tokens": 8, "temperature": 0, "regex": rejected[0] + "!"}})
        self.assertEqual(again.status, 200, again)
        self.assertEqual(again.json()["text"], rejected[0] + "!")


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
