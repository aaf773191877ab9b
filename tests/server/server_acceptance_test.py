#!/usr/bin/env python3
"""Issue 4 acceptance through the real server on the CPU (tiny fixture v3, --skip-tokenizer-init):
- /generate prompt logprobs (logprob_start_len 0) equal `dserve score` on the same ids;
- a second request with the same prompt reports cached_tokens > 0 and gives the same output;
- 200 concurrent streaming greedy clients (80 under the sanitizers) with a KV pool far too small for all of them: retraction happens
  (the server's num_retractions > 0), every request completes, and each output equals `dserve generate`
  for its ids and is the greedy choice of `dserve score` on its own text (on a bf16 backend, where kernel paths
  move logprobs: only the second, within a tolerance; see the spot check); afterwards only the radix cache holds
  pages.

Usage: server_acceptance_test.py DSERVE_BINARY
"""
import json
import os
import random
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (BF16_BACKEND, GEN_MIN_MARGIN, SANITIZED, SOURCE_DIR, Server, engine_state, post,  # noqa: E402
                     stream)

DSERVE = sys.argv[1]
# The v3 fixture's random routing is chaotic (one bf16 rounding can flip an expert and move a logprob by more
# than any margin), so a bf16 backend runs this test on the bundled demo model (trained, same architecture).
MODEL = os.path.join(SOURCE_DIR, "models", "dserve-demo") if BF16_BACKEND else \
    os.path.join(SOURCE_DIR, "tests", "fixtures", "v3")
failures, passed = [], 0
# bf16 only (the spot check below): how far under the scored top a streamed token may be, and at what share of
# the checked positions. The largest flip seen on CUDA: a margin of 3.8 (s22n, every output of this load checked).
# Seen on CUDA (session 23, 22 runs): at most 5 of 600 positions off the top per run, the farthest 2.35 nats (prompt
# 190, output 20: the server's path ranked "." first at -2.56 where the scored path and the CPU's fp32 put it 26th at
# -4.82, the whole distribution moved - an expert flip, not a shifted context: the fp32 distributions of the
# neighbouring contexts match neither).
PATH_FLIP_NATS = 4.0
MAX_FLIP_SHARE = 0.02
SCORED_TOP = 100  # top logprobs scored per position (a token past them counts as infinitely far)
# Concurrent streams, and how long a stream may go without a byte (a request queued or retracted behind the others
# sends nothing). Under ASan + UBSan on CI's two cores 200 streams took over 300 s and some waited longer than that
# for their first token (stop 33): there 80 streams and 900 s (what makes them retract: the pool below).
NUM_STREAMS = 80 if SANITIZED else 200
STREAM_TIMEOUT = 900 if SANITIZED else 300
# Whether retraction happens depends on how many streams run at once, and the CPU server takes them in slowly enough
# that few overlap: with the 1024-token pool and 30 new tokens a stream the sanitized run retracted 6, 3 and 1 times
# in three runs and 0 in session 34's CI (a failure), the plain one 2, 5 and 5. With a 256-token pool (16 pages) and
# 60 new tokens a stream (each outgrows its admission by four pages, and lives twice as long): sanitized 25-31 in
# four of four runs (~40 s a run), plain 76-81 in three (~22 s). The bf16 (CUDA) run keeps the old load.
STREAM_NEW_TOKENS = 30 if BF16_BACKEND else 60
POOL_TOKENS = "1024" if BF16_BACKEND else "256"


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


def scored_gaps(prompt, out):
    """How far below the top of `dserve score`'s distribution each token of `out` is, teacher-forced on prompt +
    out (inf: not in its top SCORED_TOP), with those distributions."""
    tops = cli("score", "--input-ids", ",".join(map(str, prompt + out)), "--top-logprobs", str(SCORED_TOP))
    tops = tops["input_top_logprobs"][len(prompt):]  # tops[k]: the distribution out[k] was drawn from
    gaps = []
    for k, dist in enumerate(tops):
        lp = next((e[0] for e in dist if e[1] == out[k]), None)
        gaps.append(dist[0][0] - lp if lp is not None else float("inf"))
    return gaps, tops


rng = random.Random(4)
server = Server(DSERVE, ["--model-path", MODEL, "--skip-tokenizer-init", "--max-total-tokens", POOL_TOKENS,
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

    # 3. 200 concurrent streams (NUM_STREAMS) on a 1024-token pool: retraction, and still the right tokens
    before = engine_state(server)["num_retractions"]
    prompts = [[rng.randrange(2, 1024) for _ in range(rng.randint(8, 40))] for _ in range(NUM_STREAMS)]
    results = [None] * len(prompts)
    # Every client sends once all are started, so the load is concurrent however long starting 200 threads takes
    # (a slow start let early requests finish before the pool overflowed: no retraction in 1 of 8 CUDA runs).
    go = threading.Barrier(len(prompts))

    def client(i):
        go.wait(120)
        status, events, done = stream(server, "/generate", {
            "input_ids": prompts[i], "stream": True, "return_logprob": True, "top_logprobs_num": 5,
            "sampling_params": {"max_new_tokens": STREAM_NEW_TOKENS, "temperature": 0, "ignore_eos": True}},
            timeout=STREAM_TIMEOUT)
        results[i] = (status, events[-1] if events else None, done)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(STREAM_TIMEOUT + 300)
    ok = [res for res in results if res and res[0] == 200 and res[2]]
    check(len(ok) == len(prompts), f"{len(ok)}/{len(prompts)} streams completed")
    state = engine_state(server)
    print(f"retractions under the load: {state['num_retractions'] - before}", flush=True)
    check(state["num_retractions"] > before, f"retraction happened ({state['num_retractions']} vs {before})")
    # Spot-check every 10th output. Two oracles: the single-sequence CLI (`dserve generate`), and the streamed
    # sequence scored by the CLI (`dserve score` on prompt + output, teacher-forced): each streamed token must be
    # the top token of the model's distribution given the tokens streamed before it.
    # fp32 (CPU): both exactly (ties aside). bf16: a sequence's path through the kernels depends on the load (a
    # request re-prefilled from the radix cache after a retraction takes the small-M GEMMs where its first prefill
    # took cuBLASLt; batched and lone decodes take different GEMM kernels) and the demo model's logprobs move by p50
    # 0.03 / p99 0.56 / max 3.1 between such paths (MoE routing near-ties; BENCHMARKS session 22): on these random
    # prompts' flat distributions 4 to 14 of the 20 outputs leave `dserve generate`'s text somewhere (session 23).
    # So on bf16 the first oracle is only reported, and the second allows a streamed token below the scored top by
    # up to PATH_FLIP_NATS at a few positions (MAX_FLIP_SHARE of those checked). Corruption (a wrong page, a lost
    # or repeated token) puts tokens far from the top, or many off it.
    bar = PATH_FLIP_NATS if BF16_BACKEND else GEN_MIN_MARGIN  # the farthest a streamed token may be below the top

    def streamed(i):
        return results[i][1]["output_ids"] if results[i] and results[i][1] else None

    differ, off_top, checked, worst = 0, [], 0, 0.0
    for i in range(0, len(prompts), 10):
        want = cli("generate", "--input-ids", ",".join(map(str, prompts[i])),
                   "--max-new-tokens", str(STREAM_NEW_TOKENS), "--temperature", "0", "--ignore-eos")["output_ids"]
        got = streamed(i)
        if got is None or len(got) != len(want):
            check(False, f"prompt {i}: streamed {got} vs generate {want}")
            continue
        k = next((k for k in range(len(want)) if got[k] != want[k]), None)
        if k is not None:
            print(f"prompt {i}: streamed output differs from dserve generate from output {k} on", flush=True)
            differ += 1
        gaps, tops = scored_gaps(prompts[i], got)
        for k, (d, dist) in enumerate(zip(gaps, tops)):
            checked += 1
            worst = max(worst, d)
            if d >= GEN_MIN_MARGIN:
                off_top.append((i, k, round(d, 4)))
                served = results[i][1]["meta_info"].get("output_top_logprobs") or []
                print(f"prompt {i} output {k}: streamed {got[k]}, scored top-3 {dist[:3]}, the server's top-3 "
                      f"{[e[:2] for e in served[k][:3]] if k < len(served) else None}\n  prompt {prompts[i]}\n"
                      f"  streamed {got}\n  generate {want}", flush=True)
    if not BF16_BACKEND:
        check(differ == 0, f"{differ} of {len(range(0, len(prompts), 10))} streamed outputs differ from dserve generate")
    print(f"streamed tokens below the scored top: worst {worst:.4f}, {len(off_top)} of {checked} by >= "
          f"{GEN_MIN_MARGIN}: {off_top}", flush=True)
    check(worst <= bar, f"a streamed token {worst:.4f} below the scored top")
    check(len(off_top) <= (MAX_FLIP_SHARE * checked if BF16_BACKEND else 0),
          f"{len(off_top)} of {checked} streamed tokens off the scored top")
    # The oracle's teeth: the same outputs with one token lost (output 15 dropped, the last repeated) must fail it
    # (on the demo model's CPU path, 10 of 10 such copies put a token > 4 nats below the top, 9 outside its top 100).
    caught = []
    for i in (0, len(prompts) // 20 * 10, len(prompts) - 20):  # spot-checked ones (multiples of 10)
        got = streamed(i)
        if got and len(got) == STREAM_NEW_TOKENS:
            caught.append(max(scored_gaps(prompts[i], got[:15] + got[16:] + got[-1:])[0]))
    check(sum(g > bar for g in caught) >= 2, f"a lost token went unnoticed by the spot check: largest gaps {caught}")
    check(state["num_running_reqs"] + state["num_waiting_reqs"] == 0 if "num_running_reqs" in state else True,
          "idle after the load")
    check(state["used_tokens"] == state["cached_tokens"], f"pool idle: used {state['used_tokens']} cached "
          f"{state['cached_tokens']}")
finally:
    server.stop()

print(f"{passed} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
