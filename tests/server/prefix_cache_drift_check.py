#!/usr/bin/env python3
"""Diagnostic (not a CTest): how far a prompt's first-token logprobs move between its first request (whole prompt
prefilled) and a repeat (prefix from the radix cache, the rest prefilled), one request at a time. Prints, over 200
random prompts, the distribution of the largest |logprob difference| among the top-5 tokens the two share, the
top-1 flips, and a third request's difference from the second (the cached path's own repeatability).

Usage: prefix_cache_drift_check.py DSERVE_BINARY [REF.json]   (DSERVE_TEST_SERVE_ARGS as for the server tests)
DRIFT_SAVE=F.json writes each prompt's first-request top-5 ({id: logprob}) to F; with REF.json (such a file from
another backend, e.g. the CPU's fp32), both requests are also measured against it.
"""
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import BF16_BACKEND, SOURCE_DIR, Server, post  # noqa: E402

MODEL = os.environ.get("LOAD_CHECK_MODEL") or (os.path.join(SOURCE_DIR, "models", "dserve-demo") if BF16_BACKEND
                                               else os.path.join(SOURCE_DIR, "tests", "fixtures", "v3"))
rng = random.Random(4)
server = Server(sys.argv[1], ["--model-path", MODEL, "--skip-tokenizer-init", "--page-size", "16"]).start()


def first_token(p):
    r = post(server, "/generate", {"input_ids": p, "return_logprob": True, "top_logprobs_num": 5,
                                   "sampling_params": {"max_new_tokens": 1, "temperature": 0}}).json()
    return {t[1]: t[0] for t in r["meta_info"]["output_top_logprobs"][0]}, r["meta_info"].get("cached_tokens", 0)


def diff(a, b):
    common = set(a) & set(b)
    return max(abs(a[k] - b[k]) for k in common) if common else float("inf")


ref = json.load(open(sys.argv[2])) if len(sys.argv) > 2 else None
saved = []
try:
    d12, d23, flips, cached, r1, r2 = [], [], 0, [], [], []
    for i in range(200):
        p = [rng.randrange(2, 1024) for _ in range(rng.randint(8, 40))]
        a, _ = first_token(p)
        b, c = first_token(p)
        c3, _ = first_token(p)
        d12.append(diff(a, b))
        d23.append(diff(b, c3))
        cached.append(c)
        saved.append({str(k): v for k, v in a.items()})
        if ref:
            want = {int(k): v for k, v in ref[i].items()}
            r1.append(diff(a, want))
            r2.append(diff(b, want))
        if max(a, key=a.get) != max(b, key=b.get):
            flips += 1
            print(f"prompt {i} (len {len(p)}, cached {c}): top-1 {max(a, key=a.get)} -> {max(b, key=b.get)}, "
                  f"max |diff| {d12[-1]:.4f}", flush=True)
    if os.environ.get("DRIFT_SAVE"):
        json.dump(saved, open(os.environ["DRIFT_SAVE"], "w"))
    for name, v in (("first vs cached", d12), ("cached vs cached", d23), ("first vs REF", r1), ("cached vs REF", r2)):
        if not v:
            continue
        v = sorted(v)
        print(f"{name}: max |logprob diff| p50 {v[100]:.4f} p90 {v[180]:.4f} p99 {v[198]:.4f} max {v[-1]:.4f}")
    print(f"top-1 flips first vs cached: {flips} of 200; cached tokens p50 {sorted(cached)[100]}")
finally:
    server.stop()
