#!/usr/bin/env python3
"""Diagnostic (not a CTest): every output of a retraction-heavy streaming load against the same server's output
for that prompt alone. Rounds of 200 concurrent greedy streaming clients (started together) on a 1024-token pool,
then each prompt again on its own with its top-2 logprobs; a loaded output that differs before the first position
whose unloaded margin is under GEN_MIN_MARGIN is printed with that margin. Found on CUDA (session 22): in 2 of 22
server_acceptance_test runs prompt 20's streamed output left `dserve generate` at a 0.61 margin.

Usage: load_consistency_check.py DSERVE_BINARY [ROUNDS]   (DSERVE_TEST_SERVE_ARGS as for the server tests;
LOAD_CHECK_MODEL: another checkpoint directory; LOAD_CHECK_POOL: the pool's tokens, default 1024)
"""
import os
import random
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import BF16_BACKEND, GEN_MIN_MARGIN, SOURCE_DIR, Server, engine_state, post, stream  # noqa: E402

DSERVE = sys.argv[1]
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3
MODEL = os.environ.get("LOAD_CHECK_MODEL") or (os.path.join(SOURCE_DIR, "models", "dserve-demo") if BF16_BACKEND
                                               else os.path.join(SOURCE_DIR, "tests", "fixtures", "v3"))
NEW = 30

rng = random.Random(4)
POOL = os.environ.get("LOAD_CHECK_POOL", "1024")  # --max-total-tokens: a large one means no retraction
server = Server(DSERVE, ["--model-path", MODEL, "--skip-tokenizer-init", "--max-total-tokens", POOL,
                         "--page-size", "16", "--max-running-requests", "256"]).start()
bad_total = 0
try:
    for rnd in range(ROUNDS):
        prompts = [[rng.randrange(2, 1024) for _ in range(rng.randint(8, 40))] for _ in range(200)]
        results = [None] * len(prompts)
        go = threading.Barrier(len(prompts))
        before = engine_state(server)["num_retractions"]

        def client(i):
            go.wait(120)
            status, events, done = stream(server, "/generate", {
                "input_ids": prompts[i], "stream": True,
                "sampling_params": {"max_new_tokens": NEW, "temperature": 0, "ignore_eos": True}})
            results[i] = events[-1]["output_ids"] if status == 200 and done and events else None

        threads = [threading.Thread(target=client, args=(i,)) for i in range(len(prompts))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
        retractions = engine_state(server)["num_retractions"] - before
        bad = 0
        for i, p in enumerate(prompts):
            r = post(server, "/generate", {"input_ids": p, "return_logprob": True, "top_logprobs_num": 2,
                                           "sampling_params": {"max_new_tokens": NEW, "temperature": 0,
                                                               "ignore_eos": True}}).json()
            want = r["output_ids"]
            tops = r["meta_info"]["output_top_logprobs"]
            n = next((k for k, t in enumerate(tops) if t[0][0] - t[1][0] < GEN_MIN_MARGIN), len(want))
            got = results[i]
            if got is None or got[:n] != want[:n]:
                bad += 1
                k = next((k for k in range(n) if got is None or k >= len(got) or got[k] != want[k]), n)
                print(f"round {rnd} prompt {i} (len {len(p)}): first difference at output {k}, unloaded margin "
                      f"{tops[k][0][0] - tops[k][1][0]:.4f} top-2 {[t[1] for t in tops[k]]}, loaded "
                      f"{got[k] if got and k < len(got) else None}\n  loaded   {got}\n  unloaded {want}", flush=True)
        bad_total += bad
        print(f"round {rnd}: {bad} of {len(prompts)} loaded outputs differ, {retractions} retractions", flush=True)
finally:
    server.stop()
print(f"{bad_total} differing outputs in {ROUNDS} rounds")
sys.exit(1 if bad_total else 0)
