#!/usr/bin/env python3
"""End-to-end tests of `dserve serve` with the fake engine and a tiny byte tokenizer: every endpoint, every bad
input (status asserted, then the server must still serve), streaming, client disconnects, concurrency, API keys,
--skip-tokenizer-init and shutdown. Usage: server_api_test.py [path/to/dserve] [unittest args]."""
import concurrent.futures
import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

BINARY = H.dserve_binary(sys.argv)
TMP = tempfile.mkdtemp(prefix="dserve_server_test_")
TOKENIZER = H.write_tiny_tokenizer(os.path.join(TMP, "tok"))


class FakeServerTest(unittest.TestCase):
    server = None

    @classmethod
    def setUpClass(cls):
        cls.server = H.Server(BINARY, H.fake_server_args(TOKENIZER, [
            "--enable-metrics", "--context-length", "1000000", "--max-request-bytes", "1048576"])).start()

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        assert code == 0, "server exit code %r; stderr: %s" % (code, cls.server.stderr_lines[-10:])

    def post(self, path, body, **kw):
        return H.post(self.server, path, body, **kw)

    def assert_serving(self):
        r = self.post("/generate", {"input_ids": [5], "sampling_params": {"max_new_tokens": 3}})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["output_ids"], H.continuation(5, 3))

    def assert_error(self, reply, status):
        self.assertEqual(reply.status, status, reply)
        err = reply.json()["error"]
        self.assertIsInstance(err["message"], str)
        self.assertTrue(err["message"])
        for k in ("type", "param", "code"):
            self.assertIn(k, err)
        self.assert_serving()

    def test_ready_line_has_a_curl_command(self):
        out = "\n".join(self.server.stdout_lines)
        self.assertIn("ready on http://127.0.0.1:%d" % self.server.port, out)
        self.assertIn("curl http://127.0.0.1:%d/v1/chat/completions" % self.server.port, out)

    def test_generate_text(self):
        r = self.post("/generate", {"text": "Hello", "sampling_params": {"max_new_tokens": 10, "temperature": 0}})
        self.assertEqual(r.status, 200)
        j = r.json()
        want = H.continuation(ord("o"), 10)
        self.assertEqual(j["output_ids"], want)
        self.assertEqual(j["text"], H.text_of(want))
        m = j["meta_info"]
        self.assertEqual(m["prompt_tokens"], 6)  # BOS + 5 bytes
        self.assertEqual(m["completion_tokens"], 10)
        self.assertEqual(m["finish_reason"], {"type": "length", "length": 10})
        for k in ("id", "cached_tokens", "e2e_latency"):
            self.assertIn(k, m)

    def test_generate_batch_and_n(self):
        r = self.post("/generate", {"text": ["ab", "xyz"], "sampling_params": {"max_new_tokens": 4}})
        j = r.json()
        self.assertEqual([x["text"] for x in j], [H.text_of(H.continuation(ord("b"), 4)),
                                                  H.text_of(H.continuation(ord("z"), 4))])
        r = self.post("/generate", {"input_ids": [[1, 2], [3]], "sampling_params": [{"max_new_tokens": 1},
                                                                                   {"max_new_tokens": 2}]})
        self.assertEqual([len(x["output_ids"]) for x in r.json()], [1, 2])
        r = self.post("/generate", {"input_ids": [9], "sampling_params": {"max_new_tokens": 2, "n": 3}})
        self.assertEqual(len(r.json()), 3)

    def test_stop_strings_and_stop_ids(self):
        full = H.text_of(H.continuation(ord("o"), 80))
        stop = full[25:28]
        at = full.find(stop)
        j = self.post("/generate", {"text": "Hello", "sampling_params": {"max_new_tokens": 80, "stop": [stop]}}).json()
        self.assertEqual(j["text"], full[:at])
        self.assertEqual(j["meta_info"]["finish_reason"], {"type": "stop", "matched": stop})
        self.assertEqual(len(j["output_ids"]), at + len(stop))
        j = self.post("/generate", {"text": "Hello", "sampling_params": {"max_new_tokens": 80, "stop": stop,
                                                                          "no_stop_trim": True}}).json()
        self.assertEqual(j["text"], full[:at + len(stop)])
        ids = H.continuation(5, 30)
        sid = ids[6]
        first = ids.index(sid)
        j = self.post("/generate", {"input_ids": [5], "sampling_params": {"max_new_tokens": 30,
                                                                           "stop_token_ids": [sid]}}).json()
        self.assertEqual(j["output_ids"], ids[:first + 1])
        self.assertEqual(j["text"], H.text_of(ids[:first]))
        self.assertEqual(j["meta_info"]["finish_reason"], {"type": "stop", "matched": sid})
        # min_new_tokens: the stop id is ignored before that many tokens.
        j = self.post("/generate", {"input_ids": [5], "sampling_params": {
            "max_new_tokens": 30, "stop_token_ids": [ids[0]], "min_new_tokens": 5}}).json()
        self.assertGreater(len(j["output_ids"]), 1)

    def test_generate_stream(self):
        status, events, done = H.stream(self.server, "/generate",
                                        {"text": "Hello", "stream": True, "sampling_params": {"max_new_tokens": 16}})
        self.assertEqual(status, 200)
        self.assertTrue(done)
        full = H.text_of(H.continuation(ord("o"), 16))
        prev = ""
        for e in events:
            self.assertTrue(full.startswith(e["text"]))
            self.assertGreaterEqual(len(e["text"]), len(prev))
            prev = e["text"]
        self.assertEqual(prev, full)
        self.assertEqual(events[-1]["output_ids"], H.continuation(ord("o"), 16))
        self.assertEqual(events[-1]["meta_info"]["finish_reason"]["type"], "length")
        self.assertTrue(all(e["meta_info"]["finish_reason"] is None for e in events[:-1]))

    def test_generate_logprobs(self):
        j = self.post("/generate", {"input_ids": [3, 4, 5], "return_logprob": True, "logprob_start_len": 0,
                                    "top_logprobs_num": 3, "sampling_params": {"max_new_tokens": 4}}).json()
        m = j["meta_info"]
        self.assertEqual(len(m["input_token_logprobs"]), 3)
        self.assertIsNone(m["input_token_logprobs"][0][0])
        self.assertEqual([t[1] for t in m["input_token_logprobs"]], [3, 4, 5])
        self.assertEqual([t[1] for t in m["output_token_logprobs"]], j["output_ids"])
        self.assertEqual(len(m["output_top_logprobs"]), 4)
        self.assertEqual(len(m["output_top_logprobs"][0]), 3)
        for t in m["output_token_logprobs"]:
            self.assertLess(t[0], 0)
            self.assertIsNone(t[2])  # no return_text_in_logprobs

    def test_score_on_text(self):
        """/v1/score with text: each item's prompt is query + item (item + query with item_first) as /generate
        tokenizes that text, and its scores are exp of that prompt's first-output token_ids_logprob; the usage counts
        every item's prompt and its one token."""
        labels = [5, 40, 5]

        def generate_probs(text):
            r = self.post("/generate", {"text": text, "return_logprob": True, "token_ids_logprob": labels,
                                        "sampling_params": {"max_new_tokens": 1, "temperature": 0}})
            self.assertEqual(r.status, 200, r)
            return [math.exp(e[0]) for e in r.json()["meta_info"]["output_token_ids_logprobs"][0]]

        for item_first in (False, True):
            r = self.post("/v1/score", {"query": "ab", "items": ["c", "xyz"], "label_token_ids": labels,
                                        "item_first": item_first, "model": "tiny"})
            self.assertEqual(r.status, 200, r)
            j = r.json()
            self.assertEqual((j["object"], j["model"]), ("scoring", "tiny"))
            texts = ["cab", "xyzab"] if item_first else ["abc", "abxyz"]
            for got, text in zip(j["scores"], texts):
                want = generate_probs(text)
                self.assertEqual(len(got), len(labels))
                for a, b in zip(got, want):
                    self.assertAlmostEqual(a, b, delta=1e-6)
            if not item_first:  # (the fake engine's values follow the prompt's last token)
                self.assertNotEqual(j["scores"][0], j["scores"][1])
            prompt = sum(len(self.post("/v1/tokenize", {"prompt": t}).json()["tokens"]) for t in texts)
            self.assertEqual((j["usage"]["prompt_tokens"], j["usage"]["completion_tokens"]), (prompt, 2))
        for body in ({"query": "ab", "items": ["c"], "label_token_ids": [32000]},
                     {"query": "ab", "items": ["c"], "label_token_ids": []},
                     {"query": "ab", "items": [[1]], "label_token_ids": [3]}):
            self.assert_error(self.post("/v1/score", body), 400)
        self.assert_error(self.post("/v1/score", {"query": "ab", "items": ["c"], "label_token_ids": [3],
                                                  "model": "other"}), 404)

    def test_pause_and_continue(self):
        """/pause_generation: in_place and retract hold a live request (it completes after /continue_generation with
        its whole output), abort (the default) ends it with finish_reason abort; a request sent while paused waits
        for the continue; /health_generate answers 200 while paused; abort_request's abort_all ends every live
        request; a bad mode is refused by name."""
        pool = concurrent.futures.ThreadPoolExecutor(4)

        def gen(first, n):
            return pool.submit(self.post, "/generate", {"input_ids": [first], "sampling_params": {"max_new_tokens": n}})

        def paused():
            return H.engine_state(self.server)["paused"]

        for mode in ("in_place", "retract", None):
            body = {"mode": mode} if mode else {}
            live = gen(5, 150)  # 150 steps of 1 ms
            self.assertTrue(H.wait_until(lambda: H.engine_state(self.server)["num_running_reqs"] == 1, 10))
            r = self.post("/pause_generation", body)
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.json(), {"message": "Generation paused successfully.", "status": "ok"})
            self.assertTrue(paused())
            self.assertEqual(H.request(self.server, "GET", "/health_generate").status, 200)
            late = gen(9, 3)
            time.sleep(0.3)
            self.assertFalse(late.done())
            if mode:
                self.assertFalse(live.done())
            else:
                j = live.result(10).json()
                self.assertEqual(j["meta_info"]["finish_reason"]["type"], "abort")
                self.assertLess(len(j["output_ids"]), 150)
                self.assertEqual(j["output_ids"], H.continuation(5, len(j["output_ids"])))
            r = self.post("/continue_generation", {})
            self.assertEqual((r.status, r.json()["message"]), (200, "Generation continued successfully."))
            self.assertFalse(paused())
            self.assertEqual(late.result(10).json()["output_ids"], H.continuation(9, 3))
            j = live.result(10).json()
            if mode:
                self.assertEqual(j["output_ids"], H.continuation(5, 150))
                self.assertEqual(j["meta_info"]["finish_reason"]["type"], "length")
        many = [gen(k, 2000) for k in (3, 4, 6)]
        self.assertTrue(H.wait_until(lambda: H.engine_state(self.server)["num_running_reqs"] == 3, 10))
        self.assertEqual(self.post("/abort_request", {"abort_all": True}).status, 200)
        for f in many:
            self.assertEqual(f.result(10).json()["meta_info"]["finish_reason"]["type"], "abort")
        self.assert_error(self.post("/pause_generation", {"mode": "later"}), 400)
        self.assert_error(self.post("/abort_request", {"abort_all": "yes"}), 400)
        self.assert_error(self.post("/abort_request", {}), 400)
        self.assertFalse(paused())
        pool.shutdown()

    def test_completions(self):
        r = self.post("/v1/completions", {"model": "tiny", "prompt": "Hi", "max_tokens": 6, "n": 2, "logprobs": 1,
                                          "stop": None, "user": "x"})
        self.assertEqual(r.status, 200, r)
        j = r.json()
        self.assertEqual(j["object"], "text_completion")
        self.assertTrue(j["id"].startswith("cmpl-"))
        self.assertEqual(len(j["choices"]), 2)
        want = H.text_of(H.continuation(ord("i"), 6))
        for i, c in enumerate(j["choices"]):
            self.assertEqual(c["index"], i)
            self.assertEqual(c["text"], want)
            self.assertEqual(c["finish_reason"], "length")
            self.assertEqual(c["logprobs"]["tokens"], list(want))
        self.assertEqual(j["usage"], {"prompt_tokens": 3, "completion_tokens": 12, "total_tokens": 15,
                                      "prompt_tokens_details": {"cached_tokens": 0}})

    def test_completions_stream_with_usage(self):
        status, events, done = H.stream(self.server, "/v1/completions", {
            "prompt": "Hi", "max_tokens": 6, "stream": True, "stream_options": {"include_usage": True}})
        self.assertTrue(done)
        text = "".join(e["choices"][0]["text"] for e in events if e["choices"])
        self.assertEqual(text, H.text_of(H.continuation(ord("i"), 6)))
        self.assertEqual(events[-1]["choices"], [])
        self.assertEqual(events[-1]["usage"]["completion_tokens"], 6)
        finishes = [e["choices"][0]["finish_reason"] for e in events if e["choices"]]
        self.assertEqual(finishes[-1], "length")

    def test_chat(self):
        r = self.post("/v1/chat/completions", {"model": "tiny", "messages": [
            {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}], "max_tokens": 9,
            "seed": 1, "temperature": 0.7})
        self.assertEqual(r.status, 200, r)
        j = r.json()
        self.assertEqual(j["object"], "chat.completion")
        msg = j["choices"][0]["message"]
        self.assertEqual(msg["role"], "assistant")
        self.assertEqual(len(msg["content"]), 9)
        self.assertEqual(j["usage"]["completion_tokens"], 9)
        # The prompt is the V3 chat format: BOS + system + <｜User｜>Hello<｜Assistant｜>, byte-encoded.
        prompt = H.TINY_BOS + "Be brief.<｜User｜>Hello<｜Assistant｜>"
        self.assertEqual(j["usage"]["prompt_tokens"], 1 + len(prompt.encode()) - len(H.TINY_BOS.encode()))
        self.assertEqual(msg["content"], H.text_of(H.continuation(ord(">"), 9)))

    def test_chat_continue_final_message(self):
        """continue_final_message: the prompt is the conversation before the assistant's last message with the
        generation prompt, then that message's text; the reply continues from its last byte (the fake engine's output
        follows the last prompt token)."""
        msgs = [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": [{"type": "text", "text": "Sure"},
                                                                                     {"type": "text", "text": ", b"}]}]
        r = self.post("/v1/chat/completions", {"model": "tiny", "messages": msgs, "max_tokens": 6,
                                               "continue_final_message": True})
        self.assertEqual(r.status, 200, r)
        j = r.json()
        prompt = "<｜User｜>Hello<｜Assistant｜>Sure, b"
        self.assertEqual(j["usage"]["prompt_tokens"], 1 + len(prompt.encode()))
        self.assertEqual(j["choices"][0]["message"]["content"], H.text_of(H.continuation(ord("b"), 6)))
        for bad in ({"messages": msgs[:1], "continue_final_message": True},
                    {"messages": msgs, "continue_final_message": "yes"}):
            self.assert_error(self.post("/v1/chat/completions", dict(bad, max_tokens=2)), 400)

    def test_responses_api(self):
        """OpenAI's /v1/responses over the chat path: instructions + input as the chat prompt, output_text items,
        status incomplete at max_output_tokens, a stored response continued by previous_response_id (its reply in
        the prompt), GET and DELETE by id, the streamed events in order with the same text, errors by field."""
        r = self.post("/v1/responses", {"model": "tiny", "input": "Hello", "instructions": "Be brief.",
                                        "max_output_tokens": 7, "metadata": {"k": "v"}})
        self.assertEqual(r.status, 200, r)
        j = r.json()
        self.assertEqual((j["object"], j["status"], j["model"]), ("response", "incomplete", "tiny"))
        self.assertEqual(j["incomplete_details"], {"reason": "max_output_tokens"})
        self.assertEqual((j["instructions"], j["max_output_tokens"], j["metadata"]), ("Be brief.", 7, {"k": "v"}))
        [item] = j["output"]
        self.assertEqual((item["type"], item["role"], item["status"]), ("message", "assistant", "completed"))
        first = H.text_of(H.continuation(ord(">"), 7))
        self.assertEqual(item["content"][0], {"type": "output_text", "text": first, "annotations": []})
        prompt1 = H.TINY_BOS + "Be brief.<｜User｜>Hello<｜Assistant｜>"
        self.assertEqual(j["usage"]["input_tokens"], 1 + len(prompt1.encode()) - len(H.TINY_BOS.encode()))
        self.assertEqual((j["usage"]["output_tokens"], j["usage"]["total_tokens"]), (7, j["usage"]["input_tokens"] + 7))
        # Continued: the earlier input and reply come first (the earlier instructions do not carry over).
        r2 = self.post("/v1/responses", {"input": [{"role": "user", "content": [{"type": "input_text", "text": "More"}]}],
                                         "previous_response_id": j["id"], "max_output_tokens": 3})
        self.assertEqual(r2.status, 200, r2)
        prompt2 = "<｜User｜>Hello<｜Assistant｜>" + first + "<｜User｜>More<｜Assistant｜>"
        self.assertEqual(r2.json()["usage"]["input_tokens"], 1 + len(prompt2.encode()) + 1)  # BOS, bytes, the EOS
        self.assertEqual(r2.json()["previous_response_id"], j["id"])
        got = H.request(self.server, "GET", "/v1/responses/" + j["id"])
        self.assertEqual((got.status, got.json()), (200, j))
        gone = H.request(self.server, "DELETE", "/v1/responses/" + j["id"])
        self.assertEqual(gone.json(), {"id": j["id"], "object": "response.deleted", "deleted": True})
        self.assertEqual(H.request(self.server, "GET", "/v1/responses/" + j["id"]).status, 404)
        r3 = self.post("/v1/responses", {"input": "x", "previous_response_id": j["id"]})
        self.assertEqual((r3.status, r3.json()["error"]["param"]), (404, "previous_response_id"))
        # store=false: answered, not kept.
        r4 = self.post("/v1/responses", {"input": "x", "store": False, "max_output_tokens": 2}).json()
        self.assertEqual(H.request(self.server, "GET", "/v1/responses/" + r4["id"]).status, 404)
        # Streamed: created, in_progress, the item's events, completed; deltas add up to the stored text.
        status, events, _ = H.stream(self.server, "/v1/responses", {"input": "Hello", "stream": True,
                                                                     "max_output_tokens": 6})
        self.assertEqual(status, 200, events)
        types = [e["type"] for e in events]
        self.assertEqual(types[:5], ["response.created", "response.in_progress", "response.output_item.added",
                                     "response.content_part.added", "response.output_text.delta"])
        self.assertEqual(types[-4:], ["response.output_text.done", "response.content_part.done",
                                      "response.output_item.done", "response.completed"])
        self.assertEqual([e["sequence_number"] for e in events], list(range(len(events))))
        text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
        self.assertEqual(text, H.text_of(H.continuation(ord(">"), 6)))
        done = events[-1]["response"]
        self.assertEqual(done["output"][0]["content"][0]["text"], text)
        self.assertEqual(done["output"][0]["id"], events[2]["item"]["id"])
        self.assertEqual(H.request(self.server, "GET", "/v1/responses/" + done["id"]).json(), done)
        for body, param in [({}, "input"), ({"input": 5}, "input"), ({"input": [{"role": "robot", "content": "x"}]}, "input"),
                            ({"input": [{"type": "input_image"}]}, "input"),
                            ({"input": "x", "tools": [{"type": "web_search"}]}, "tools[0]"),
                            ({"input": "x", "max_output_tokens": 0}, "max_output_tokens"),
                            ({"input": "x", "text": {"format": {"type": "xml"}}}, "text"),
                            ({"input": "x", "background": True}, "background"),
                            ({"input": "x", "frobnicate": 1}, "frobnicate")]:
            r = self.post("/v1/responses", body)
            self.assert_error(r, 400)
            self.assertEqual(r.json()["error"]["param"], param, body)

    def test_chat_stream(self):
        status, events, done = H.stream(self.server, "/v1/chat/completions", {
            "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 5, "stream": True,
            "stream_options": {"include_usage": True}, "logprobs": True, "top_logprobs": 2})
        self.assertEqual(status, 200)
        self.assertTrue(done)
        self.assertEqual(events[0]["choices"][0]["delta"]["role"], "assistant")
        content = "".join(e["choices"][0]["delta"].get("content", "") for e in events if e["choices"])
        self.assertEqual(content, H.text_of(H.continuation(ord(">"), 5)))
        lps = [lp for e in events if e["choices"] and e["choices"][0]["logprobs"]
               for lp in e["choices"][0]["logprobs"]["content"]]
        self.assertEqual(len(lps), 5)
        self.assertEqual(len(lps[0]["top_logprobs"]), 2)
        self.assertEqual(events[-1]["usage"]["completion_tokens"], 5)
        self.assertEqual([e["choices"][0]["finish_reason"] for e in events if e["choices"]][-1], "length")

    def test_info_endpoints(self):
        j = H.request(self.server, "GET", "/v1/models").json()
        self.assertEqual(j["data"][0]["id"], "tiny")
        self.assertEqual(j["data"][0]["max_model_len"], 1000000)
        self.assertEqual(H.request(self.server, "GET", "/v1/models/tiny").status, 200)
        self.assertEqual(H.request(self.server, "GET", "/health").status, 200)
        self.assertEqual(H.request(self.server, "GET", "/health_generate").status, 200)
        self.assertTrue(H.request(self.server, "GET", "/get_model_info").json()["is_generation"])
        info = H.request(self.server, "GET", "/get_server_info").json()
        self.assertEqual(info["served_model_name"], "tiny")
        self.assertIn("internal_states", info)
        self.assertEqual(H.request(self.server, "GET", "/flush_cache").status, 200)
        self.assertEqual(H.request(self.server, "POST", "/flush_cache").status, 200)
        t = self.post("/v1/tokenize", {"prompt": "ab"}).json()
        self.assertEqual(t["tokens"], [256, 97, 98])
        self.assertEqual(self.post("/v1/detokenize", {"tokens": [104, 105]}).json()["text"], "hi")

    def test_metrics(self):
        before = H.request(self.server, "GET", "/metrics").body.decode()
        self.post("/generate", {"input_ids": [1, 2, 3, 4], "sampling_params": {"max_new_tokens": 7}})
        after = H.request(self.server, "GET", "/metrics").body.decode()

        def value(text, name):
            for line in text.splitlines():
                if line.startswith(name + "{") or line.startswith(name + " "):
                    return float(line.rsplit(" ", 1)[1])
            self.fail("metric %s missing" % name)

        # Tests run one at a time: the deltas are exactly this request's.
        self.assertEqual(value(after, "sglang:prompt_tokens_total") - value(before, "sglang:prompt_tokens_total"), 4)
        self.assertEqual(value(after, "sglang:generation_tokens_total") -
                         value(before, "sglang:generation_tokens_total"), 7)
        for name in ("sglang:time_to_first_token_seconds_bucket", "sglang:inter_token_latency_seconds_sum",
                     "sglang:cache_hit_rate", "sglang:token_usage", "sglang:num_queue_reqs",
                     "sglang:num_running_reqs"):
            self.assertIn(name, after)

    def test_bad_inputs(self):
        long_prompt = list(range(1, 200)) * 10
        cases = [
            ("/generate", b"{not json", 400),
            ("/generate", b"", 400),
            ("/generate", b"[1]", 400),
            ("/generate", {"input_ids": [1], "sampling_params": {"temperature": -0.5}}, 400),
            # 40,000 positions x 1,001 logprobs each: past the 32M-entry bound (GBs of host memory)
            ("/generate", {"input_ids": [1], "return_logprob": True, "top_logprobs_num": 1000,
                           "sampling_params": {"max_new_tokens": 40000}}, 400),
            ("/generate", {"input_ids": [1], "sampling_params": {"top_p": 0}}, 400),
            ("/generate", {"input_ids": [1], "sampling_params": {"top_k": 0}}, 400),
            ("/generate", {"input_ids": [1], "sampling_params": {"min_p": -1}}, 400),
            ("/generate", {"input_ids": [1], "sampling_params": {"frequency_penalty": 9}}, 400),
            ("/generate", {"input_ids": [1], "sampling_params": {"presence_penalty": "x"}}, 400),
            ("/generate", {"input_ids": [1], "sampling_params": {"max_new_tokens": -1}}, 400),
            ("/generate", {"input_ids": [1], "sampling_params": {"n": 0}}, 400),
            ("/generate", {"input_ids": [1], "sampling_params": {"unknown": 1}}, 400),
            ("/generate", {"input_ids": [1], "sampling_params": {"stop_token_ids": [999999]}}, 400),
            ("/generate", {"input_ids": [9999]}, 400),
            ("/generate", {"input_ids": [-1]}, 400),
            ("/generate", {"input_ids": []}, 400),
            ("/generate", {"text": ""}, 200),  # BOS only: a valid one-token prompt
            ("/generate", {"text": 3}, 400),
            ("/generate", {"input_ids": [1], "rid": 5}, 400),
            ("/v1/completions", {"prompt": "x", "max_tokens": 0}, 400),
            ("/v1/completions", {"prompt": "x", "max_tokens": -1}, 400),
            ("/v1/completions", {"prompt": "x", "max_tokens": 2.5}, 400),
            ("/v1/completions", {"prompt": "x", "temperature": -1}, 400),
            ("/v1/completions", {"prompt": "x", "model": "gpt-4"}, 404),
            ("/v1/completions", {"prompt": "x", "frobnicate": True}, 400),
            ("/v1/completions", {"prompt": long_prompt, "max_tokens": 5}, 200),
            ("/v1/completions", {"prompt": long_prompt, "max_tokens": 999999}, 400),  # prompt + max > context
            ("/v1/completions", {}, 400),
            ("/v1/chat/completions", {"messages": "hi"}, 400),
            ("/v1/chat/completions", {"messages": [{"role": "user"}], "max_tokens": -2}, 400),
            ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "top_logprobs": 3}, 400),
            ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "model": "nope"}, 404),
            ("/v1/tokenize", {"prompt": 5}, 400),
            ("/v1/detokenize", {"tokens": ["a"]}, 400),
            ("/nowhere", {}, 404),
        ]
        for path, body, status in cases:
            with self.subTest(path=path, body=str(body)[:80]):
                r = self.post(path, body)
                if status == 200:
                    self.assertEqual(r.status, 200, r)
                    self.assert_serving()
                else:
                    self.assert_error(r, status)
        # NaN is not JSON.
        self.assert_error(self.post("/generate", b'{"input_ids": [1], "sampling_params": {"temperature": NaN}}'), 400)
        # Wrong methods and content types.
        self.assertEqual(H.request(self.server, "GET", "/generate").status, 405)
        self.assertIn("allow", H.request(self.server, "DELETE", "/v1/models").headers)
        self.assert_error(H.request(self.server, "POST", "/v1/completions", b'{"prompt": "x"}',
                                    headers={"Content-Type": "text/plain"}), 400)

    def test_context_limits(self):
        srv = H.Server(BINARY, H.fake_server_args(TOKENIZER, ["--context-length", "32"])).start()
        try:
            r = H.post(srv, "/generate", {"input_ids": list(range(1, 33))})
            self.assertEqual(r.status, 400)
            self.assertEqual(r.json()["error"]["code"], "context_length_exceeded")
            r = H.post(srv, "/v1/completions", {"prompt": [1, 2, 3], "max_tokens": 30})
            self.assertEqual(r.status, 400)
            r = H.post(srv, "/generate", {"input_ids": [1, 2, 3]})  # the default 128 is capped to fit
            self.assertEqual(r.status, 200)
            self.assertEqual(len(r.json()["output_ids"]), 29)
        finally:
            self.assertEqual(srv.stop(), 0)

    def test_raw_http_errors(self):
        self.assertEqual(H.status_of(H.raw_exchange(self.server, b"GARBAGE\r\n\r\n")), 400)
        self.assert_serving()
        big_header = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100000 + b"\r\n\r\n"
        self.assertEqual(H.status_of(H.raw_exchange(self.server, big_header)), 431)
        self.assert_serving()
        body = b'{"input_ids": [1], "pad": "' + b"x" * (2 << 20) + b'"}'
        head = b"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
        self.assertEqual(H.status_of(H.raw_exchange(self.server, head + body)), 413)
        self.assert_serving()
        # Chunked request bodies over the cap too.
        chunked = b"POST /generate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        piece = b"x" * 65536
        for _ in range(20):
            chunked += b"%x\r\n" % len(piece) + piece + b"\r\n"
        chunked += b"0\r\n\r\n"
        self.assertEqual(H.status_of(H.raw_exchange(self.server, chunked)), 413)
        self.assert_serving()
        # Truncated body then close: nothing to answer, the server carries on.
        s = socket.create_connection((self.server.host, self.server.port))
        s.sendall(b"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"input")
        s.close()
        self.assert_serving()

    def test_keep_alive(self):
        import http.client
        conn = http.client.HTTPConnection(self.server.host, self.server.port, timeout=30)
        for i in range(5):
            conn.request("POST", "/generate", body=json.dumps({"input_ids": [i + 1], "stream": i % 2 == 1,
                                                               "sampling_params": {"max_new_tokens": 3}}),
                         headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            self.assertEqual(r.status, 200)
            r.read()
        conn.close()

    def test_disconnect_mid_stream_aborts(self):
        for path, body in [("/generate", {"input_ids": [1], "stream": True,
                                          "sampling_params": {"max_new_tokens": 500000}}),
                           ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "stream": True,
                                                     "max_tokens": 500000}),
                           ("/generate", {"input_ids": [1], "sampling_params": {"max_new_tokens": 500000}})]:
            with self.subTest(path=path, stream=body.get("stream")):
                s = socket.create_connection((self.server.host, self.server.port), timeout=10)
                data = json.dumps(body).encode()
                s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                          % (path.encode(), len(data)) + data)
                self.assertTrue(H.wait_until(lambda: H.engine_state(self.server)["num_running_reqs"] == 1))
                if body.get("stream"):
                    self.assertTrue(s.recv(4096).startswith(b"HTTP/1.1 200"))
                s.close()
                self.assertTrue(H.wait_until(lambda: H.engine_state(self.server)["num_running_reqs"] == 0, 5),
                                H.engine_state(self.server))
                self.assertEqual(H.engine_state(self.server)["used_tokens"], 0)
        self.assert_serving()

    def test_concurrent_streams(self):
        n = int(os.environ.get("DSERVE_TEST_CLIENTS", "200"))

        def one(i):
            prompt = [1 + i % 100, 2 + i % 50]
            status, events, done = H.stream(self.server, "/generate", {
                "input_ids": prompt, "stream": True, "sampling_params": {"max_new_tokens": 20}})
            return status, done, events[-1]["output_ids"] if events else None, prompt

        with concurrent.futures.ThreadPoolExecutor(max_workers=n) as pool:
            results = list(pool.map(one, range(n)))
        for status, done, ids, prompt in results:
            self.assertEqual(status, 200)
            self.assertTrue(done)
            self.assertEqual(ids, H.continuation(prompt[-1], 20))
        self.assertEqual(H.engine_state(self.server)["num_running_reqs"], 0)


class ApiKeyTest(unittest.TestCase):
    def test_api_key(self):
        with H.Server(BINARY, H.fake_server_args(TOKENIZER, ["--api-key", "k3y"])) as srv:
            self.assertIn("Bearer <api-key>", "\n".join(srv.stdout_lines))
            self.assertEqual(H.request(srv, "GET", "/health").status, 200)
            for method, path, body in [("GET", "/v1/models", None), ("POST", "/generate", {"input_ids": [1]}),
                                       ("GET", "/get_server_info", None), ("GET", "/health_generate", None),
                                       ("POST", "/v1/chat/completions", {"messages": []})]:
                r = H.request(srv, method, path, body)
                self.assertEqual(r.status, 401, path)
                self.assertEqual(r.json()["error"]["code"], "invalid_api_key")
                self.assertEqual(H.request(srv, method, path, body, api_key="wrong").status, 401)
            r = H.post(srv, "/generate", {"input_ids": [1], "sampling_params": {"max_new_tokens": 2}}, api_key="k3y")
            self.assertEqual(r.status, 200)


class SkipTokenizerTest(unittest.TestCase):
    def test_ids_only(self):
        with H.Server(BINARY, ["--fake-engine", "--skip-tokenizer-init", "--fake-vocab-size", "1000"]) as srv:
            self.assertIn("/generate", "\n".join(srv.stdout_lines))
            j = H.post(srv, "/generate", {"input_ids": [7, 8], "sampling_params": {"max_new_tokens": 4}}).json()
            self.assertEqual(j["output_ids"], H.continuation(8, 4, vocab=1000))
            self.assertEqual(j["text"], "")
            self.assertEqual(H.post(srv, "/generate", {"text": "hello"}).status, 400)
            self.assertEqual(H.post(srv, "/v1/completions", {"prompt": [7, 8], "max_tokens": 2}).status, 200)
            self.assertEqual(H.post(srv, "/v1/chat/completions",
                                    {"messages": [{"role": "user", "content": "x"}]}).status, 400)
            self.assertEqual(H.post(srv, "/v1/tokenize", {"prompt": "x"}).status, 400)


class ParserTest(unittest.TestCase):
    def test_reasoning_and_tool_calls(self):
        out = ("I should call the tool.</think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>"
               "get_weather\n```json\n{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>")
        args = H.fake_server_args(TOKENIZER, ["--reasoning-parser", "deepseek-r1", "--tool-call-parser", "deepseekv3",
                                              "--fake-output", out])
        tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}}}}}]
        with H.Server(BINARY, args) as srv:
            j = H.post(srv, "/v1/chat/completions", {"messages": [{"role": "user", "content": "Weather?"}],
                                                     "tools": tools}).json()
            c = j["choices"][0]
            self.assertEqual(c["message"]["reasoning_content"], "I should call the tool.")
            self.assertEqual(c["finish_reason"], "tool_calls")
            call = c["message"]["tool_calls"][0]
            self.assertEqual(call["function"]["name"], "get_weather")
            self.assertEqual(json.loads(call["function"]["arguments"]), {"city": "Paris"})
            status, events, done = H.stream(srv, "/v1/chat/completions", {
                "messages": [{"role": "user", "content": "Weather?"}], "tools": tools, "stream": True})
            self.assertTrue(done)
            reasoning = "".join(e["choices"][0]["delta"].get("reasoning_content", "") for e in events)
            calls = [t for e in events for t in e["choices"][0]["delta"].get("tool_calls", [])]
            self.assertEqual(reasoning, "I should call the tool.")
            self.assertEqual([t["function"]["name"] for t in calls], ["get_weather"])
            self.assertEqual(events[-1]["choices"][0]["finish_reason"], "tool_calls")
            # The Responses API: a reasoning item, then a function_call item; streamed, the same items by events.
            rtools = [dict(type="function", **tools[0]["function"])]
            j = H.post(srv, "/v1/responses", {"input": "Weather?", "tools": rtools}).json()
            self.assertEqual([o["type"] for o in j["output"]], ["reasoning", "function_call"])
            self.assertEqual(j["output"][0]["content"][0]["text"], "I should call the tool.")
            fc = j["output"][1]
            self.assertEqual((fc["name"], json.loads(fc["arguments"])), ("get_weather", {"city": "Paris"}))
            self.assertTrue(fc["call_id"].startswith("call_"))
            status, events, _ = H.stream(srv, "/v1/responses", {"input": "Weather?", "tools": rtools, "stream": True})
            self.assertEqual(status, 200, events)
            final = events[-1]["response"]
            self.assertEqual([o["type"] for o in final["output"]], ["reasoning", "function_call"])
            args = "".join(e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta")
            self.assertEqual(json.loads(args), {"city": "Paris"})
            added = [e["item"]["type"] for e in events if e["type"] == "response.output_item.added"]
            self.assertEqual(added, ["reasoning", "function_call"])
            # The call's output goes back as a function_call_output item (a tool message after the call).
            j2 = H.post(srv, "/v1/responses", {"input": [fc, {"type": "function_call_output", "call_id": fc["call_id"],
                                                              "output": "sunny"}], "previous_response_id": j["id"],
                                               "tools": rtools})
            self.assertEqual(j2.status, 200, j2)
            # Without tools in the request, the parser leaves the text alone.
            j = H.post(srv, "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                                                     "separate_reasoning": False}).json()
            self.assertTrue(j["choices"][0]["message"]["content"].startswith("I should call the tool.</think>"))


class RealTokenizerTest(unittest.TestCase):
    """The DeepSeek-V3 tokenizer (scripts/fetch_test_tokenizer.sh) behind the API, checked against the CLI's
    one-shot tokenize / detokenize / chat-template commands."""
    TOK = os.path.join(H.SOURCE_DIR, "tests", "data", "downloads", "deepseek_v3_tokenizer")

    def cli(self, command, payload, *flags):
        r = subprocess.run([BINARY, command, "--tokenizer-path", self.TOK] + list(flags), input=json.dumps(payload),
                           capture_output=True, text=True, check=True)
        return r.stdout

    def test_against_cli(self):
        self.assertTrue(os.path.isfile(os.path.join(self.TOK, "tokenizer.json")),
                        "missing %s (run scripts/fetch_test_tokenizer.sh)" % self.TOK)
        args = ["--fake-engine", "--tokenizer-path", self.TOK, "--chat-template", "v3", "--fake-step-us", "200",
                "--served-model-name", "v3"]
        with H.Server(BINARY, args) as srv:
            messages = [{"role": "user", "content": "Hello, 世界!"}]
            prompt = self.cli("chat-template", messages, "--template", "v3", "--add-generation-prompt")
            ids = json.loads(self.cli("tokenize", [prompt]))[0]
            j = H.post(srv, "/v1/chat/completions", {"messages": messages, "max_tokens": 20}).json()
            self.assertEqual(j["usage"]["prompt_tokens"], len(ids))
            self.assertEqual(H.post(srv, "/v1/tokenize", {"prompt": "Hello, 世界!"}).json()["tokens"],
                             json.loads(self.cli("tokenize", ["Hello, 世界!"], "--add-special-tokens"))[0])

            body = {"text": "Hello, 世界!", "sampling_params": {"max_new_tokens": 60, "ignore_eos": True}}
            g = H.post(srv, "/generate", body).json()
            want = json.loads(self.cli("detokenize", [g["output_ids"]], "--skip-special-tokens"))[0]
            self.assertEqual(g["text"], want)
            status, events, done = H.stream(srv, "/generate", dict(body, stream=True))
            self.assertTrue(done)
            self.assertEqual(events[-1]["text"], want)
            for e in events:
                self.assertTrue(want.startswith(e["text"]))
            if len(want) > 12:
                stop = want[len(want) // 2:len(want) // 2 + 3]
                r = H.post(srv, "/generate", dict(body, sampling_params=dict(body["sampling_params"],
                                                                              stop=[stop]))).json()
                self.assertEqual(r["text"], want[:want.find(stop)])
                self.assertEqual(r["meta_info"]["finish_reason"]["matched"], stop)


class ShutdownTest(unittest.TestCase):
    def test_sigterm_with_live_streams(self):
        srv = H.Server(BINARY, H.fake_server_args(TOKENIZER, ["--context-length", "1000000"])).start()
        s = socket.create_connection((srv.host, srv.port), timeout=10)
        data = json.dumps({"input_ids": [1], "stream": True, "sampling_params": {"max_new_tokens": 500000}}).encode()
        s.sendall(b"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(data) + data)
        self.assertTrue(s.recv(100).startswith(b"HTTP/1.1 200"))
        t0 = time.time()
        self.assertEqual(srv.stop(), 0)
        self.assertLess(time.time() - t0, 10)
        s.close()


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]] + [a for a in sys.argv[1:] if a.startswith("-")], verbosity=2)
