#!/usr/bin/env python3
"""Issue 4 acceptance through the real server on the CPU (tiny fixture v3, --skip-tokenizer-init):
- /generate prompt logprobs (logprob_start_len 0) equal `dserve score` on the same ids;
- a second request with the same prompt reports cached_tokens > 0 and gives the same output;
- 200 concurrent streaming greedy clients with a KV pool far too small for all of them: retraction happens
  (the server's num_retractions > 0), every request completes, and each output equals `dserve generate`
  for its ids; afterwards only the radix cache holds pages.

Usage: server_acceptance_test.py DSERVE_BINARY
"""
import json
import os
import random
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import BF16_BACKEND, GEN_MIN_MARGIN, SOURCE_DIR, Server, engine_state, post, stream  # noqa: E402

DSERVE = sys.argv[1]
# The v3 fixture's random routing is chaotic (one bf16 rounding can flip an expert and move a logprob by more
# than any margin), so a bf16 backend runs this test on the bundled demo model (trained, same architecture).
MODEL = os.path.join(SOURCE_DIR, "models", "dserve-demo") if BF16_BACKEND else \
    os.path.join(SOURCE_DIR, "tests", "fixtures", "v3")
failures, passed = [], 0


def check(cond, what):
    global passed
    if cond:
        passed += 1
    else:
        failures.append(what)
        print("FAIL:", what, flush=True)


def cli(*args):
    p = subprocess.run([DSERVE, *args, "--model-path", MODEL, "--json"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


rng = random.Random(4)
server = Server(DSERVE, ["--model-path", MODEL, "--skip-tokenizer-init", "--max-total-tokens", "1024",
                         "--page-size", "16", "--max-running-requests", "256"]).start()
try:
    # 1. prompt logprobs through /generate == dserve score
    prompt = [rng.randrange(2, 1024) for _ in range(130)]
    r = post(server, "/generate", {"input_ids": prompt, "return_logprob": True, "logprob_start_len": 0,
                                   "sampling_params": {"max_new_tokens": 4, "temperature": 0, "ignore_eos": True}})
    check(r.status == 200, f"/generate with logprobs: {r}")
    first = r.json()
    got = [t[0] for t in first["meta_info"]["input_token_logprobs"]]
    want = cli("score", "--input-ids", ",".join(map(str, prompt)))["input_token_logprobs"]
    check(len(got) == len(want) and got[0] is None, "one input logprob per prompt token, the first null")
    worst = max(abs(a - b) for a, b in zip(got[1:], want[1:]))
    check(worst <= 1e-4, f"/generate prompt logprobs vs dserve score: max diff {worst}")

    # 2. the same prompt again: prefix cache hit, same output
    r = post(server, "/generate", {"input_ids": prompt,
                                   "sampling_params": {"max_new_tokens": 4, "temperature": 0, "ignore_eos": True}})
    second = r.json()
    check(second["meta_info"]["cached_tokens"] > 0, f"cached_tokens {second['meta_info']['cached_tokens']}")
    check(second["output_ids"] == first["output_ids"], "cached prefix gives the same output")

    # 3. 200 concurrent streams on a 1024-token pool: retraction, and still the right tokens
    before = engine_state(server)["num_retractions"]
    prompts = [[rng.randrange(2, 1024) for _ in range(rng.randint(8, 40))] for _ in range(200)]
    results = [None] * len(prompts)

    def client(i):
        status, events, done = stream(server, "/generate", {
            "input_ids": prompts[i], "stream": True,
            "sampling_params": {"max_new_tokens": 30, "temperature": 0, "ignore_eos": True}})
        results[i] = (status, events[-1] if events else None, done)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    ok = [res for res in results if res and res[0] == 200 and res[2]]
    check(len(ok) == len(prompts), f"{len(ok)}/{len(prompts)} streams completed")
    state = engine_state(server)
    check(state["num_retractions"] > before, f"retraction happened ({state['num_retractions']} vs {before})")
    mismatches = 0
    for i in range(0, len(prompts), 10):  # spot-check every 10th against the single-sequence CLI
        want = cli("generate", "--input-ids", ",".join(map(str, prompts[i])), "--max-new-tokens", "30",
                   "--temperature", "0", "--ignore-eos")["output_ids"]
        got = results[i][1]["output_ids"] if results[i] and results[i][1] else None
        n = len(want)
        if BF16_BACKEND:  # batched bf16 rounding may flip a near-tie: compare the outputs before the first
            # margin < GEN_MIN_MARGIN (tops[k] is the distribution output k was drawn from: a near-tie there may flip).
            # Not only near-ties move on CUDA: a request re-prefilled from the radix cache after a retraction takes
            # other kernels (the small-M GEMMs) than its first prefill, and the demo model's bf16 first-token
            # logprobs move by p50 0.03 / p99 0.56 / max 3.1 between such paths (MoE routing near-ties), both paths
            # equally far from fp32 (prefix_cache_drift_check.py, BENCHMARKS session 22). With heavy retraction
            # (clients started together) 2 of 4 CUDA runs failed here at a 0.61 margin; as written, ~1 in 10.
            tops = cli("score", "--input-ids", ",".join(map(str, prompts[i] + want)), "--top-logprobs", "2")
            tops = tops["input_top_logprobs"][len(prompts[i]):]
            n = next((k for k, t in enumerate(tops) if t[0][0] - t[1][0] < GEN_MIN_MARGIN), n)
        bad = got is None or len(got) != len(want) or got[:n] != want[:n]
        if bad:
            print(f"prompt {i}: streamed {got} vs generate {want} (compared {n})")
            k = next((k for k in range(n) if got is None or k >= len(got) or got[k] != want[k]), None)
            if BF16_BACKEND and k is not None:
                print(f"  first difference at output {k}: dserve score margin there {tops[k][0][0] - tops[k][1][0]:.4f}"
                      f", top-2 {tops[k][:2]}", flush=True)
        mismatches += bad
    check(mismatches == 0, f"{mismatches} of 20 streamed outputs differ from dserve generate")
    check(state["num_running_reqs"] + state["num_waiting_reqs"] == 0 if "num_running_reqs" in state else True,
          "idle after the load")
    check(state["used_tokens"] == state["cached_tokens"], f"pool idle: used {state['used_tokens']} cached "
          f"{state['cached_tokens']}")
finally:
    server.stop()

print(f"{passed} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
