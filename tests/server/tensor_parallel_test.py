#!/usr/bin/env python3
"""`dserve serve --tp-size 2 [--ep-size 2 | --dp-size 2 --enable-dp-attention [--speculative-algorithm NEXTN]]
--device cpu` (ranks as threads, each with its weight shard) on the tiny V3 fixture:
greedy /generate reproduces the transformers reference continuation, concurrent requests give what one rank gives,
and sizes that do not shard are refused at start with the reason.
Usage: tensor_parallel_test.py [path/to/dserve]."""
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


class TensorParallelServerTest(unittest.TestCase):
    def test_two_ranks_serve_the_reference(self):
        prompts = [[(11 * i + 5 * k) % 900 + 2 for k in range(4 + 13 * i)] for i in range(5)]
        with H.Server(BINARY, COMMON) as one:
            with concurrent.futures.ThreadPoolExecutor(5) as ex:
                want = list(ex.map(lambda p: H.generate_ids(one, p, 10).json()["output_ids"], prompts))
        with H.Server(BINARY, COMMON + ["--tp-size", "2"]) as tp:
            self.assertEqual(H.request(tp, "GET", "/get_server_info").json()["tp_size"], 2)
            for g in REF["generate"]:
                r = H.generate_ids(tp, g["input_ids"], g["max_new_tokens"])
                self.assertEqual(r.status, 200, r)
                ref = H.trusted_prefix(g)
                self.assertEqual(r.json()["output_ids"][:len(ref)], ref)
            with concurrent.futures.ThreadPoolExecutor(5) as ex:
                got = list(ex.map(lambda p: H.generate_ids(tp, p, 10).json()["output_ids"], prompts))
        self.assertEqual(got, want)
        # Expert parallelism: the routed experts dealt out whole over the two ranks; data-parallel attention: two
        # ranks with their own requests and pools, MLPs sharded over both.
        # And data-parallel attention with MTP speculative decoding (each rank drafts and verifies its own requests).
        for extra in (["--tp-size", "2", "--ep-size", "2"], ["--tp", "2", "--dp", "2", "--enable-dp-attention"],
                      ["--tp", "2", "--dp", "2", "--enable-dp-attention", "--speculative-algorithm", "NEXTN",
                       "--speculative-num-steps", "2"]):
            with H.Server(BINARY, COMMON + extra) as srv:
                with concurrent.futures.ThreadPoolExecutor(5) as ex:
                    got = list(ex.map(lambda p: H.generate_ids(srv, p, 10).json()["output_ids"], prompts))
                state = H.engine_state(srv)
            self.assertEqual(got, want, extra)
            self.assertEqual(state["num_running_reqs"] + state["num_waiting_reqs"], 0, extra)
            if "--speculative-algorithm" in extra:  # the ranks' verify steps summed
                self.assertGreaterEqual(state["avg_spec_accept_length"], 1.0)

    def test_unshardable_sizes_are_refused(self):
        for extra, named in ((["--tp-size", "3"], "attention heads"), (["--tp-size", "0"], "--tp-size"),
                             (["--dp-size", "2"], "--dp-size"), (["--tp", "2", "--dp", "2"], "--enable-dp-attention"),
                             (["--tp-size", "2", "--ep-size", "4"], "--ep-size")):
            p = subprocess.run([BINARY, "serve", "--port", "0"] + COMMON + extra, capture_output=True, text=True,
                               timeout=120)
            self.assertNotEqual(p.returncode, 0, extra)
            self.assertIn(named, p.stderr, extra)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
