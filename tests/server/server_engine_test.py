#!/usr/bin/env python3
"""`dserve serve` over the real batch engine on a tiny fixture checkpoint (tests/fixtures/v2_lite, token ids only):
greedy /generate must reproduce the transformers reference continuation (alone, streamed, in concurrent batches,
with n > 1), and a client that disconnects mid-stream must give its KV pages back.
Usage: server_engine_test.py [path/to/dserve] [fixture dir]."""
import base64
import concurrent.futures
import json
import math
import os
import socket
import struct
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

BINARY = H.dserve_binary(sys.argv)
FIXTURE = next((a for a in sys.argv[2:] if not a.startswith("-")),
               os.path.join(H.SOURCE_DIR, "tests", "fixtures", "v2_lite"))
with open(os.path.join(FIXTURE, "reference.json")) as f:
    REF = json.load(f)


trusted_prefix = H.trusted_prefix


class EngineServerTest(unittest.TestCase):
    server = None

    @classmethod
    def setUpClass(cls):
        cls.server = H.Server(BINARY, ["--model-path", FIXTURE, "--skip-tokenizer-init", "--page-size", "16",
                                       "--max-total-tokens", "16384", "--enable-metrics",
                                       "--expert-distribution-recorder-mode", "stat",
                                       "--enable-return-hidden-states", "--enable-return-routed-experts"]).start()

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop(timeout=30)
        assert code == 0, "server exit code %r; stderr: %s" % (code, cls.server.stderr_lines[-10:])

    def generate(self, g, **extra):
        body = {"input_ids": g["input_ids"], "sampling_params": {"max_new_tokens": g["max_new_tokens"],
                                                                  "temperature": 0, "ignore_eos": True}}
        body.update(extra)
        return H.post(self.server, "/generate", body)

    def assert_matches_reference(self, ids, g):
        want = trusted_prefix(g)
        self.assertEqual(ids[:len(want)], want)
        self.assertEqual(len(ids), g["max_new_tokens"])

    def test_greedy_matches_transformers(self):
        for g in REF["generate"]:
            r = self.generate(g, return_logprob=True)
            self.assertEqual(r.status, 200, r)
            j = r.json()
            self.assert_matches_reference(j["output_ids"], g)
            self.assertEqual(j["meta_info"]["finish_reason"]["type"], "length")
            self.assertEqual(j["meta_info"]["prompt_tokens"], len(g["input_ids"]))
            got = [t[0] for t in j["meta_info"]["output_token_logprobs"]]
            n = len(trusted_prefix(g))
            diffs = [abs(a - b) for a, b in zip(got[:n], g["output_logprobs"][:n])]
            print(f"greedy logprobs vs transformers: {n} positions, max |diff| {max(diffs, default=0):.4f}, "
                  f"mean {sum(diffs) / max(len(diffs), 1):.4f}", flush=True)
            for a, b in zip(got[:n], g["output_logprobs"][:n]):
                self.assertAlmostEqual(a, b, delta=H.GEN_LOGPROB_TOL)

    def test_stream_matches(self):
        g = REF["generate"][0]
        status, events, done = H.stream(self.server, "/generate", {
            "input_ids": g["input_ids"], "stream": True,
            "sampling_params": {"max_new_tokens": g["max_new_tokens"], "temperature": 0, "ignore_eos": True}})
        self.assertEqual(status, 200)
        self.assertTrue(done)
        self.assert_matches_reference(events[-1]["output_ids"], g)
        lengths = [len(e["output_ids"]) for e in events]
        self.assertEqual(lengths, sorted(lengths))

    def test_concurrent_requests_batch_correctly(self):
        gens = REF["generate"] * 8

        def one(g):
            return self.generate(g).json()["output_ids"]

        with concurrent.futures.ThreadPoolExecutor(max_workers=len(gens)) as pool:
            outs = list(pool.map(one, gens))
        for ids, g in zip(outs, gens):
            self.assert_matches_reference(ids, g)

    def test_parallel_samples_and_batch(self):
        g = REF["generate"][0]
        j = self.generate(g, sampling_params={"max_new_tokens": g["max_new_tokens"], "temperature": 0,
                                              "ignore_eos": True, "n": 2}).json()
        self.assertEqual(len(j), 2)
        for x in j:
            self.assert_matches_reference(x["output_ids"], g)
        j = H.post(self.server, "/generate", {"input_ids": [x["input_ids"] for x in REF["generate"]],
                                              "sampling_params": {"max_new_tokens": 24, "temperature": 0,
                                                                  "ignore_eos": True}}).json()
        for x, g in zip(j, REF["generate"]):
            self.assert_matches_reference(x["output_ids"], g)

    def test_stop_token_id(self):
        g = REF["generate"][0]
        want = trusted_prefix(g)
        sid = want[min(5, len(want) - 1)]
        first = want.index(sid)
        j = self.generate(g, sampling_params={"max_new_tokens": 24, "temperature": 0, "stop_token_ids": [sid]}).json()
        self.assertEqual(j["output_ids"], want[:first + 1])
        self.assertEqual(j["meta_info"]["finish_reason"], {"type": "stop", "matched": sid})

    def test_completions_with_token_prompt(self):
        g = REF["generate"][1]
        j = H.post(self.server, "/v1/completions", {"prompt": g["input_ids"], "max_tokens": 24, "temperature": 0,
                                                    "ignore_eos": True}).json()
        self.assertEqual(j["usage"]["completion_tokens"], 24)
        self.assertEqual(j["usage"]["prompt_tokens"], len(g["input_ids"]))

    def test_disconnect_returns_pages(self):
        s = socket.create_connection((self.server.host, self.server.port), timeout=30)
        body = json.dumps({"input_ids": REF["generate"][1]["input_ids"], "stream": True,
                           "sampling_params": {"max_new_tokens": 1900, "ignore_eos": True}}).encode()
        s.sendall(b"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                  % len(body) + body)
        self.assertTrue(s.recv(4096).startswith(b"HTTP/1.1 200"))
        # Running, not just holding pages: used_tokens also counts the prefix cache of earlier tests, so it could
        # pass before this request was admitted (then it was still waiting when the test looked).
        self.assertTrue(H.wait_until(lambda: H.engine_state(self.server)["num_running_reqs"] > 0, 30))
        s.close()
        # Both queues, in one snapshot: the abort must reach the request wherever it is.
        idle = lambda st: st["num_running_reqs"] == 0 and st["num_waiting_reqs"] == 0
        self.assertTrue(H.wait_until(lambda: idle(H.engine_state(self.server)), 30), H.engine_state(self.server))
        r = H.request(self.server, "POST", "/flush_cache")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(H.engine_state(self.server)["used_tokens"], 0)

    def test_token_ids_logprob(self):
        """SGLang's token_ids_logprob: every reported position (prompt and output, plain and streamed, greedy and
        sampled, a batch with a list per prompt) gives the asked ids' logprobs in their order, the same values as
        that position's top logprobs and own token's where those name the same id."""
        g = REF["generate"][0]
        ids = [0, 1023, 17, 0, 500] + g["input_ids"][:6]
        every = 1000  # top logprobs of nearly the whole 1024-token vocabulary: almost every id is checked by value

        def check(meta, want_ids):
            for part in ("input", "output"):
                tops, own = meta[part + "_top_logprobs"], meta[part + "_token_logprobs"]
                got = meta[part + "_token_ids_logprobs"]
                self.assertEqual(len(got), len(own), part)
                for k, entries in enumerate(got):
                    if part == "input" and k == 0:  # nothing predicts the first prompt token
                        continue
                    self.assertEqual([e[1] for e in entries], want_ids, (part, k))
                    known = {t[1]: t[0] for t in tops[k]}
                    known[own[k][1]] = own[k][0]
                    floor = min(t[0] for t in tops[k])
                    checked = 0
                    for lp, tid, _ in entries:
                        self.assertLessEqual(lp, 0.0)
                        if tid in known:
                            self.assertAlmostEqual(lp, known[tid], delta=1e-5)
                            checked += 1
                        else:
                            self.assertLessEqual(lp, floor + 1e-6)
                    self.assertGreaterEqual(checked, len(want_ids) - 2, (part, k))

        for extra in ({}, {"sampling_params": {"max_new_tokens": 6, "temperature": 0.8, "seed": 3}}):
            body = {"input_ids": g["input_ids"], "return_logprob": True, "logprob_start_len": 0,
                    "top_logprobs_num": every, "token_ids_logprob": ids,
                    "sampling_params": {"max_new_tokens": 6, "temperature": 0, "ignore_eos": True}}
            body.update(extra)
            r = H.post(self.server, "/generate", body)
            self.assertEqual(r.status, 200, r)
            check(r.json()["meta_info"], ids)
        # Streamed: the last chunk holds every position (cumulative lists).
        status, events, done = H.stream(self.server, "/generate", {
            "input_ids": g["input_ids"], "return_logprob": True, "logprob_start_len": 0, "top_logprobs_num": every,
            "token_ids_logprob": ids, "stream": True, "sampling_params": {"max_new_tokens": 5, "temperature": 0}})
        self.assertEqual((status, done), (200, True), events)
        check(events[-1]["meta_info"], ids)
        # A batch with one list per prompt.
        prompts = [g["input_ids"], g["input_ids"][:5]]
        r = H.post(self.server, "/generate", {"input_ids": prompts, "return_logprob": True, "top_logprobs_num": every,
                                              "logprob_start_len": 1, "token_ids_logprob": [[3], [9, 8]],
                                              "sampling_params": {"max_new_tokens": 3, "temperature": 0}})
        self.assertEqual(r.status, 200, r)
        for item, want in zip(r.json(), [[3], [9, 8]]):
            check(item["meta_info"], want)
        # Without return_logprob nothing is reported; bad lists are refused by name.
        r = H.post(self.server, "/generate", {"input_ids": g["input_ids"], "token_ids_logprob": ids,
                                              "sampling_params": {"max_new_tokens": 2}})
        self.assertEqual(r.status, 200, r)
        self.assertNotIn("output_token_ids_logprobs", r.json()["meta_info"])
        for bad in ([1024], [-1], "7", [[1], [2]], [1.5]):
            r = H.post(self.server, "/generate", {"input_ids": g["input_ids"], "return_logprob": True,
                                                  "token_ids_logprob": bad})
            self.assertEqual(r.status, 400, (bad, r))
            self.assertIn("token_ids_logprob", r.json()["error"]["message"], bad)

    def test_score(self):
        """SGLang's /v1/score on token ids: an item's label scores are the next-token probabilities after query + item
        (transformers' for the reference's first token), exp of /generate's token_ids_logprob at the first output
        position, in label order; apply_softmax renormalises over the labels; item_first puts the item first."""
        g = REF["generate"][0]
        query, item, other = g["input_ids"][:3], g["input_ids"][3:], [7, 8, 9]
        first = g["output_ids"][0]
        labels = [first, 5, 1023, first]

        def score(**extra):
            body = {"query": query, "items": [item, other], "label_token_ids": labels}
            body.update(extra)
            r = H.post(self.server, "/v1/score", body)
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.json()["object"], "scoring")
            return r.json()["scores"]

        def generate_probs(ids):
            r = H.post(self.server, "/generate", {"input_ids": ids, "return_logprob": True, "token_ids_logprob": labels,
                                                  "sampling_params": {"max_new_tokens": 1, "temperature": 0}})
            self.assertEqual(r.status, 200, r)
            entries = r.json()["meta_info"]["output_token_ids_logprobs"][0]
            self.assertEqual([e[1] for e in entries], labels)
            return [math.exp(e[0]) for e in entries]

        plain = score()
        self.assertEqual(len(plain), 2)
        self.assertAlmostEqual(math.log(plain[0][0]), g["output_logprobs"][0], delta=H.GEN_LOGPROB_TOL)
        for got, ids in zip(plain, [query + item, query + other]):
            self.assertEqual(len(got), len(labels))
            for a, b in zip(got, generate_probs(ids)):
                self.assertAlmostEqual(a, b, delta=1e-4 * b)
            self.assertEqual(got[0], got[3])
            self.assertLess(sum(got[:3]), 1.0)
        soft = score(apply_softmax=True)
        for p, s in zip(plain, soft):
            self.assertAlmostEqual(sum(s), 1.0, delta=1e-6)
            for k in range(len(labels)):
                self.assertAlmostEqual(s[k], p[k] / sum(p), delta=1e-6)
        flipped = score(item_first=True)
        for got, ids in zip(flipped, [item + query, other + query]):
            for a, b in zip(got, generate_probs(ids)):
                self.assertAlmostEqual(a, b, delta=1e-4 * b)
        self.assertNotAlmostEqual(flipped[0][0], plain[0][0], delta=1e-3 * plain[0][0])
        # Refused by name: a label past the vocabulary (1024), text without a tokenizer, another model's name.
        for body, status, word in [({"query": query, "items": [item], "label_token_ids": [3, 1024]}, 400, "label_token_ids"),
                                   ({"query": "a", "items": ["b"], "label_token_ids": [3]}, 400, "tokenizer"),
                                   ({"query": query, "items": [item], "label_token_ids": [3], "model": "x"}, 404, "model"),
                                   ({"query": query, "items": [[]], "label_token_ids": [3], "item_first": True}, 200, "")]:
            r = H.post(self.server, "/v1/score", body)
            self.assertEqual(r.status, status, (body, r))
            if status != 200:
                self.assertIn(word, r.json()["error"]["message"], body)

    def test_pause_retract_flush_continue(self):
        """The real engine under /pause_generation mode retract mid-generation: the request goes back to the waiting
        queue with its KV freed (so /flush_cache is allowed while paused), and after /continue_generation it finishes
        with the reference's greedy tokens (prefilled again from prompt + output so far)."""
        g = REF["generate"][0]
        n = 2000  # (the context is 2048) several seconds of steps: the pause lands mid-generation
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            fut = pool.submit(H.post, self.server, "/generate", {"input_ids": g["input_ids"], "sampling_params": {
                "max_new_tokens": n, "temperature": 0, "ignore_eos": True}})
            self.assertTrue(H.wait_until(lambda: H.engine_state(self.server)["num_running_reqs"] == 1, 30))
            self.assertEqual(H.post(self.server, "/pause_generation", {"mode": "retract"}).status, 200)
            self.assertTrue(H.wait_until(lambda: H.engine_state(self.server)["num_waiting_reqs"] == 1, 30))
            self.assertFalse(fut.done())
            r = H.request(self.server, "POST", "/flush_cache")
            self.assertEqual(r.status, 200, r)
            st = H.engine_state(self.server)
            self.assertEqual((st["used_tokens"], st["num_running_reqs"], st["paused"]), (0, 0, True))
            self.assertEqual(H.post(self.server, "/continue_generation", {}).status, 200)
            j = fut.result(120).json()
        self.assertEqual(j["meta_info"]["finish_reason"]["type"], "length")
        self.assertEqual(len(j["output_ids"]), n)
        want = trusted_prefix(g)
        self.assertEqual(j["output_ids"][:len(want)], want)

    def test_profile_step_trace(self):
        """SGLang's /start_profile and /stop_profile on the real engine: the answer names the Chrome trace it wrote,
        whose spans hold the request's prompt tokens (prefill) and one decode step a further output token."""
        import tempfile
        g = REF["generate"][0]
        with tempfile.TemporaryDirectory() as d:
            r = H.post(self.server, "/start_profile", {"output_dir": d, "activities": ["CPU", "GPU"]})
            self.assertEqual((r.status, r.body), (200, b"Start profiling.\n"))
            self.assertEqual(H.post(self.server, "/start_profile", {}).status, 400)  # already on
            j = self.generate(g).json()
            r = H.post(self.server, "/stop_profile", {})
            self.assertEqual(r.status, 200, r)
            files = os.listdir(d)
            self.assertEqual(len(files), 1, files)
            self.assertIn(os.path.join(d, files[0]), r.body.decode())
            with open(os.path.join(d, files[0])) as f:
                spans = [e for e in json.load(f)["traceEvents"] if e["ph"] == "X"]
        self.assertEqual(sum(e["args"]["prefill_tokens"] for e in spans), len(g["input_ids"]))
        self.assertEqual(sum(e["args"]["decode_seqs"] for e in spans), len(j["output_ids"]) - 1)
        self.assertEqual(H.post(self.server, "/stop_profile", {}).status, 400)  # not on

    def test_expert_recorder_and_weight_update(self):
        """SGLang's expert distribution recorder and /update_weights_from_disk on the real engine: between /start_ and
        /stop_ every MoE layer counts top_k picks for each token forwarded (the dense ones none), the dump names its
        file; an update to the same checkpoint succeeds and generates the reference again under its weight_version,
        one to another model's checkpoint is a 400 naming the difference."""
        with open(os.path.join(FIXTURE, "config.json")) as f:
            cfg = json.load(f)
        g = REF["generate"][0]
        r = H.post(self.server, "/start_expert_distribution_record", {})
        self.assertEqual((r.status, r.body), (200, b"Start recording the expert distribution.\n"))
        j = self.generate(g).json()
        self.assertEqual(H.post(self.server, "/stop_expert_distribution_record", {}).status, 200)
        self.generate(g)  # after the stop: not counted
        r = H.post(self.server, "/dump_expert_distribution_record", {})
        self.assertEqual(r.status, 200, r)
        path = r.body.decode().split("Written to ")[1].strip()
        with open(path) as f:
            dump = json.load(f)
        os.remove(path)
        forwarded = len(g["input_ids"]) - j["meta_info"]["cached_tokens"] + len(j["output_ids"]) - 1
        want = [0 if layer < cfg["first_k_dense_replace"] else forwarded * cfg["num_experts_per_tok"]
                for layer in range(cfg["num_hidden_layers"])]
        self.assertEqual([sum(row) for row in dump["logical_count"][0]], want)
        r = H.post(self.server, "/update_weights_from_disk", {"model_path": FIXTURE, "weight_version": "w2"})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json(), {"success": True, "message": "Succeeded to update model weights.",
                                    "num_paused_requests": 0})
        j = self.generate(g).json()
        self.assert_matches_reference(j["output_ids"], g)
        self.assertEqual(j["meta_info"]["weight_version"], "w2")
        r = H.post(self.server, "/update_weights_from_disk",
                   {"model_path": os.path.join(H.SOURCE_DIR, "tests", "fixtures", "v3")})
        self.assertEqual(r.status, 400, r)
        self.assertFalse(r.json()["success"])
        self.assertIn("another model", r.json()["message"])

    def test_return_hidden_states(self):
        """SGLang's return_hidden_states through the CLI flag: meta_info.hidden_states is the prompt's rows, then a row
        a fed output token (hidden_size numbers each); the same prompt again is computed whole (no cached tokens) and
        gives the same rows; OpenAI's choice carries the last row; a request that does not ask gets none."""
        with open(os.path.join(FIXTURE, "config.json")) as f:
            cfg = json.load(f)
        g = REF["generate"][0]
        first = self.generate(g).json()  # the prompt is now in the radix cache
        self.assertNotIn("hidden_states", first["meta_info"])
        j = self.generate(g, return_hidden_states=True).json()
        hs = j["meta_info"]["hidden_states"]
        self.assertEqual(j["meta_info"]["cached_tokens"], 0)
        self.assertEqual(len(hs), 1 + g["max_new_tokens"] - 1)
        self.assertEqual(len(hs[0]), len(g["input_ids"]))
        for row in hs[0] + hs[1:]:
            self.assertEqual(len(row), cfg["hidden_size"])
            self.assertTrue(all(isinstance(v, float) and math.isfinite(v) for v in row))
        self.assertEqual(self.generate(g, return_hidden_states=True).json()["meta_info"]["hidden_states"], hs)
        c = H.post(self.server, "/v1/completions", {"prompt": g["input_ids"], "max_tokens": g["max_new_tokens"],
                                                    "temperature": 0, "ignore_eos": True,
                                                    "return_hidden_states": True}).json()
        self.assertEqual(c["choices"][0]["hidden_states"], hs[-1])

    def test_return_routed_experts(self):
        """SGLang's return_routed_experts through the CLI flag: meta_info.routed_experts is base64 of little-endian
        int32 [prompt + output - 1, layers, top_k] (what RL frameworks' routing replay decodes): top_k distinct experts
        a MoE layer, 0 in the dense ones; the same request again gives the same picks."""
        with open(os.path.join(FIXTURE, "config.json")) as f:
            cfg = json.load(f)
        g = REF["generate"][0]
        j = self.generate(g, return_routed_experts=True).json()
        raw = base64.b64decode(j["meta_info"]["routed_experts"])
        layers, k = cfg["num_hidden_layers"], cfg["num_experts_per_tok"]
        rows = len(g["input_ids"]) + len(j["output_ids"]) - 1
        self.assertEqual(len(raw), rows * layers * k * 4)
        ids = struct.unpack("<%di" % (rows * layers * k), raw)
        for t in range(rows):
            for layer in range(layers):
                picks = ids[(t * layers + layer) * k:(t * layers + layer + 1) * k]
                if layer < cfg["first_k_dense_replace"]:
                    self.assertEqual(picks, (0,) * k)
                else:
                    self.assertEqual(len(set(picks)), k)
                    self.assertTrue(all(0 <= e < cfg["n_routed_experts"] for e in picks))
        again = self.generate(g, return_routed_experts=True).json()
        self.assertEqual(again["meta_info"]["routed_experts"], j["meta_info"]["routed_experts"])
        self.assertNotIn("routed_experts", self.generate(g).json()["meta_info"])

    def test_session_continues_a_request(self):
        """SGLang's sessions on the real engine: a request continuing the first one's prompt and output ids (cut by
        offset, then its next id as the new input) generates the reference's continuation from there, with the
        continued prefix found in the radix cache."""
        g = REF["generate"][0]
        r = H.post(self.server, "/open_session", {"capacity_of_str_len": 4096})
        self.assertEqual(r.status, 200, r)
        sid = r.json()
        first = self.generate(g, rid="s-first", session_params={"id": sid}).json()
        self.assert_matches_reference(first["output_ids"], g)
        want = trusted_prefix(g)
        k = 10  # the continued prompt (8 + 10 + 1 ids) spans a whole 16-token page of the first request's ids
        self.assertGreater(len(want), k + 1)
        j = H.post(self.server, "/generate", {
            "input_ids": [first["output_ids"][k]], "rid": "s-second",
            "sampling_params": {"max_new_tokens": len(want) - k - 1, "temperature": 0, "ignore_eos": True},
            "session_params": {"id": sid, "rid": "s-first", "offset": len(g["input_ids"]) + k}}).json()
        self.assertEqual(j["meta_info"]["prompt_tokens"], len(g["input_ids"]) + k + 1)
        self.assertEqual(j["output_ids"], want[k + 1:])
        self.assertGreater(j["meta_info"]["cached_tokens"], 0)
        self.assertEqual(H.post(self.server, "/close_session", {"session_id": sid}).status, 200)
        r = H.post(self.server, "/generate", {"input_ids": [1], "session_params": {"id": sid, "rid": "s-first"}})
        self.assertEqual(r.status, 400, r)

    def test_bad_requests_then_still_serving(self):
        for body, status in [({"input_ids": [5000]}, 400),  # vocabulary is 1024
                             ({"input_ids": [1] * 2048}, 400),  # context 2048
                             ({"input_ids": [1], "sampling_params": {"max_new_tokens": 2048}}, 400),
                             ({"input_ids": [1], "sampling_params": {"temperature": -1}}, 400)]:
            r = H.post(self.server, "/generate", body)
            self.assertEqual(r.status, status, r)
        self.assertEqual(H.request(self.server, "GET", "/health_generate").status, 200)
        self.assert_matches_reference(self.generate(REF["generate"][0]).json()["output_ids"], REF["generate"][0])


class SglangCommandLineTest(unittest.TestCase):
    """An SGLang-style command line (--model, --tp 1, --trust-remote-code, --random-seed, --chunked-prefill-size -1:
    no chunking, with --max-prefill-tokens 5 so that the prompt still goes in pieces of 5: the most prompt tokens a
    step takes without chunking) serves the same greedy continuation; /get_server_info reports the sizes."""

    def test_sglang_spellings_and_unchunked_prefill(self):
        srv = H.Server(BINARY, ["--model", FIXTURE, "--skip-tokenizer-init", "--tp", "1", "--trust-remote-code",
                                "--random-seed", "7", "--chunked-prefill-size", "-1", "--max-prefill-tokens", "5",
                                "--max-total-tokens", "4096"])
        with srv:
            info = H.request(srv, "GET", "/get_server_info").json()
            self.assertEqual((info["tp_size"], info["dp_size"], info["chunked_prefill_size"], info["random_seed"],
                              info["max_prefill_tokens"]), (1, 1, -1, 7, 5))
            g = REF["generate"][0]
            self.assertGreater(len(g["input_ids"]), 5)
            r = H.post(srv, "/generate", {"input_ids": g["input_ids"], "sampling_params": {
                "max_new_tokens": g["max_new_tokens"], "temperature": 0, "ignore_eos": True}})
            self.assertEqual(r.status, 200, r)
            want = trusted_prefix(g)
            self.assertEqual(r.json()["output_ids"][:len(want)], want)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]] + [a for a in sys.argv[1:] if a.startswith("-")], verbosity=2)
