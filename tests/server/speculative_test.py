#!/usr/bin/env python3
"""`dserve serve --speculative-algorithm NEXTN` on the tiny V3 fixture (its MTP layer drafts; token ids only): greedy
/generate reproduces the transformers reference continuation alone, streamed and in a concurrent batch, seeded
sampling gives what a server without drafts gives, meta_info carries SGLang's spec_verify_ct / spec_accept_length /
spec_accept_rate / spec_accept_histogram and /get_server_info the accept length bench_serving prints; a checkpoint
without an MTP layer is refused at start.
Usage: speculative_test.py [path/to/dserve]."""
import concurrent.futures
import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

BINARY = H.dserve_binary(sys.argv)
FIXTURE = os.path.join(H.SOURCE_DIR, "tests", "fixtures", "v3")
with open(os.path.join(FIXTURE, "reference.json")) as f:
    REF = json.load(f)
COMMON = ["--model-path", FIXTURE, "--skip-tokenizer-init", "--page-size", "16", "--max-total-tokens", "8192",
          "--device", "cpu"]


class SpeculativeServerTest(unittest.TestCase):
    spec = None
    plain = None

    @classmethod
    def setUpClass(cls):
        cls.spec = H.Server(BINARY, COMMON + ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "2",
                                              "--enable-metrics"]).start()
        cls.plain = H.Server(BINARY, COMMON).start()

    @classmethod
    def tearDownClass(cls):
        for s in (cls.spec, cls.plain):
            code = s.stop(timeout=30)
            assert code == 0, "server exit code %r; stderr: %s" % (code, s.stderr_lines[-10:])

    def test_greedy_matches_transformers_with_spec_meta_info(self):
        for g in REF["generate"]:
            r = H.generate_ids(self.spec, g["input_ids"], g["max_new_tokens"])
            self.assertEqual(r.status, 200, r)
            j = r.json()
            want = H.trusted_prefix(g)
            self.assertEqual(j["output_ids"][:len(want)], want)
            m = j["meta_info"]
            self.assertEqual(m["completion_tokens"], g["max_new_tokens"])
            # The first token comes from the prefill; each verify step gives one more plus its accepted drafts.
            self.assertEqual(m["completion_tokens"], 1 + m["spec_verify_ct"] + m["spec_accepted_drafts"])
            self.assertAlmostEqual(m["spec_accept_length"], m["completion_tokens"] / m["spec_verify_ct"], places=6)
            # SGLang's other fields: the drafts fed, the rate, and the histogram of drafts accepted per verify step.
            hist = m["spec_accept_histogram"]
            self.assertEqual(sum(hist), m["spec_verify_ct"])
            self.assertEqual(sum(n * c for n, c in enumerate(hist)), m["spec_accepted_drafts"])
            self.assertGreaterEqual(m["spec_proposed_drafts"], m["spec_accepted_drafts"])
            self.assertLessEqual(len(hist), 1 + max(1, m["spec_proposed_drafts"]))
            self.assertAlmostEqual(m["spec_accept_rate"], m["spec_accepted_drafts"] / m["spec_proposed_drafts"], places=6)
            self.assertEqual((m["spec_accept_token_num"], m["spec_draft_token_num"]),
                             (m["spec_accepted_drafts"], m["spec_proposed_drafts"]))
        plain = H.generate_ids(self.plain, REF["generate"][0]["input_ids"], 4).json()["meta_info"]
        self.assertNotIn("spec_verify_ct", plain)

    def test_stream_and_concurrent_batch(self):
        g = REF["generate"][1]
        status, events, done = H.stream(self.spec, "/generate", {
            "input_ids": g["input_ids"], "stream": True,
            "sampling_params": {"max_new_tokens": g["max_new_tokens"], "temperature": 0, "ignore_eos": True}})
        self.assertEqual(status, 200)
        self.assertTrue(done)
        want = H.trusted_prefix(g)
        self.assertEqual(events[-1]["output_ids"][:len(want)], want)
        prompts = [[(7 * i + 3 * k) % 900 + 2 for k in range(5 + 9 * i)] for i in range(6)]
        with concurrent.futures.ThreadPoolExecutor(6) as ex:
            spec = list(ex.map(lambda p: H.generate_ids(self.spec, p, 12).json()["output_ids"], prompts))
            plain = list(ex.map(lambda p: H.generate_ids(self.plain, p, 12).json()["output_ids"], prompts))
        self.assertEqual(spec, plain)

    def test_seeded_sampling_and_logprobs_equal_plain_server(self):
        p = REF["generate"][0]["input_ids"]
        ids = [0, 5, 900, p[0]]
        body = {"input_ids": p, "return_logprob": True, "top_logprobs_num": 2, "token_ids_logprob": ids,
                "sampling_params": {"max_new_tokens": 16, "temperature": 0.9, "top_p": 0.95, "seed": 1234,
                                    "ignore_eos": True}}
        a = H.post(self.spec, "/generate", body).json()
        b = H.post(self.plain, "/generate", body).json()
        self.assertEqual(a["output_ids"], b["output_ids"])
        la = [t[0] for t in a["meta_info"]["output_token_logprobs"]]
        lb = [t[0] for t in b["meta_info"]["output_token_logprobs"]]
        self.assertEqual(len(la), 16)
        for x, y in zip(la, lb):
            self.assertAlmostEqual(x, y, delta=1e-4)
        # token_ids_logprob on every output position, accepted drafts' included (their own verification rows).
        ia, ib = a["meta_info"]["output_token_ids_logprobs"], b["meta_info"]["output_token_ids_logprobs"]
        self.assertEqual(len(ia), 16)
        for ea, eb in zip(ia, ib):
            self.assertEqual([e[1] for e in ea], ids)
            self.assertEqual([e[1] for e in eb], ids)
            for x, y in zip(ea, eb):
                self.assertAlmostEqual(x[0], y[0], delta=1e-4)

    def test_server_info_reports_accept_length(self):
        H.generate_ids(self.spec, REF["generate"][0]["input_ids"], 8)
        info = H.request(self.spec, "GET", "/get_server_info").json()
        self.assertEqual(info["speculative_algorithm"], "EAGLE")
        self.assertEqual(info["speculative_num_steps"], 2)
        self.assertEqual(info["speculative_num_draft_tokens"], 3)
        self.assertEqual(info["max_running_requests"], 48)  # SGLang's default with speculative decoding
        st = info["internal_states"][0]
        self.assertGreater(st["spec_verify_steps"], 0)
        self.assertGreater(st["spec_draft_tokens"], 0)
        self.assertGreaterEqual(st["avg_spec_accept_length"], 1.0)
        self.assertNotIn("avg_spec_accept_length", H.engine_state(self.plain))
        # The same on /metrics as SGLang's gauge (no request in between: the same totals).
        metrics = H.request(self.spec, "GET", "/metrics").body.decode()
        line = [ln for ln in metrics.splitlines() if ln.startswith("sglang:spec_accept_length{")]
        self.assertEqual(len(line), 1, metrics)
        self.assertAlmostEqual(float(line[0].split()[-1]), st["avg_spec_accept_length"], places=4)
        self.assertIn("sglang:spec_accept_rate{", metrics)

    def test_checkpoint_without_mtp_is_refused(self):
        no_mtp = os.path.join(H.SOURCE_DIR, "tests", "fixtures", "v2_lite")
        p = subprocess.run([BINARY, "serve", "--port", "0", "--model-path", no_mtp, "--skip-tokenizer-init",
                            "--device", "cpu", "--speculative-algorithm", "EAGLE"],
                           capture_output=True, text=True, timeout=120)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("MTP", p.stderr)
        p = subprocess.run([BINARY, "serve", "--port", "0", "--model-path", FIXTURE, "--skip-tokenizer-init",
                            "--speculative-algorithm", "EAGLE", "--speculative-eagle-topk", "2"],
                           capture_output=True, text=True, timeout=120)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--speculative-eagle-topk 2", p.stderr)


    def test_ngram_drafts_on_a_checkpoint_without_mtp(self):
        # NGRAM drafts from the request's own tokens: V2-Lite (no MTP layer) serves the transformers reference with
        # them, and its /get_server_info names the algorithm.
        fx = os.path.join(H.SOURCE_DIR, "tests", "fixtures", "v2_lite")
        with open(os.path.join(fx, "reference.json")) as f:
            ref = json.load(f)
        with H.Server(BINARY, ["--model-path", fx, "--skip-tokenizer-init", "--page-size", "16", "--device", "cpu",
                               "--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "5"]) as server:
            for g in ref["generate"]:
                r = H.generate_ids(server, g["input_ids"], g["max_new_tokens"])
                self.assertEqual(r.status, 200, r)
                want = H.trusted_prefix(g)
                self.assertEqual(r.json()["output_ids"][:len(want)], want)
                m = r.json()["meta_info"]
                self.assertEqual(m["completion_tokens"], 1 + m["spec_verify_ct"] + m["spec_accepted_drafts"])
            info = H.request(server, "GET", "/get_server_info").json()
        self.assertEqual(info["speculative_algorithm"], "NGRAM")
        self.assertEqual(info["speculative_num_draft_tokens"], 5)
        self.assertGreater(info["internal_states"][0]["spec_draft_tokens"], 0)


DEMO = os.path.join(H.SOURCE_DIR, "models", "dserve-demo")


class DemoModelDraftsTest(unittest.TestCase):
    """The bundled demo model's MTP head was trained (next-next-token loss): its drafts must be accepted often
    (measured on this CPU backend, 2026-12-05: 70 of 117 first drafts on three greedy prompts, accept length 1.59
    with one draft step, 1.89 with three), and greedy text stays the transformers reference's."""

    def test_trained_mtp_drafts_are_accepted(self):
        with open(os.path.join(DEMO, "reference.json")) as f:
            ref = json.load(f)
        with H.Server(BINARY, ["--model-path", DEMO, "--device", "cpu", "--speculative-algorithm", "EAGLE",
                               "--speculative-num-steps", "1"]) as server:
            for g in ref["generate"]:
                r = H.generate_ids(server, g["input_ids"], g["max_new_tokens"])
                self.assertEqual(r.status, 200, r)
                want = H.trusted_prefix(g)
                self.assertEqual(r.json()["output_ids"][:len(want)], want, g.get("prompt"))
            for text in ("In the beginning", "And God said", "Question: What is 12 plus 30?\nAnswer:"):
                r = H.post(server, "/generate", {"text": text, "sampling_params": {"max_new_tokens": 48,
                                                                                     "temperature": 0}})
                self.assertEqual(r.status, 200, r)
            st = H.engine_state(server)
        rate = st["spec_accepted_tokens"] / st["spec_draft_tokens"]
        print(f"demo model, one draft step: {st['spec_accepted_tokens']} of {st['spec_draft_tokens']} drafts accepted "
              f"({rate:.2f}), accept length {st['avg_spec_accept_length']:.2f}", flush=True)
        self.assertGreater(rate, 0.4)

    def test_ngram_drafts_on_repeated_text(self):
        # NGRAM on text that repeats itself: greedy output is what the server gives without drafts. (This 4-layer
        # model does not copy the repeated lines - 7 of 194 drafts accepted, 2026-12-05 - so the acceptance is
        # printed, not asserted; NgramDrafter's own tests check the matching.)
        text = "".join(f"Item {i}: the quick brown fox jumps over the lazy dog.\n" for i in range(1, 5)) + "Item 5:"
        outs = {}
        for extra in ([], ["--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "6"]):
            with H.Server(BINARY, ["--model-path", DEMO, "--device", "cpu"] + extra) as server:
                r = H.post(server, "/generate", {"text": text, "sampling_params": {"max_new_tokens": 48,
                                                                                     "temperature": 0}})
                self.assertEqual(r.status, 200, r)
                outs[bool(extra)] = r.json()["output_ids"]
                st = H.engine_state(server)
        self.assertEqual(outs[True], outs[False])
        rate = st["spec_accepted_tokens"] / st["spec_draft_tokens"]
        print(f"demo model, NGRAM 5 drafts on repeated text: {st['spec_accepted_tokens']} of "
              f"{st['spec_draft_tokens']} accepted ({rate:.2f}), accept length {st['avg_spec_accept_length']:.2f}",
              flush=True)
        self.assertGreater(st["spec_draft_tokens"], 0)
        self.assertGreaterEqual(st["avg_spec_accept_length"], 1.0)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
