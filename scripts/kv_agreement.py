#!/usr/bin/env python3
"""Top-1 agreement of `dserve score` with a quantized KV cache against a reference cache dtype (issue 7's FP8 KV
criterion: >= 99% on positions whose reference margin exceeds 0.1), over several independent texts so the figure
is not one sample's luck. Each seed's text is 40 arithmetic questions with answers scored as one sequence on the
demo model (a trained model: its margins mean something), absorbed attention, 64-token chunks.

Usage: kv_agreement.py --dserve build/dserve --device cpu --seeds 11-18 --base auto --dtypes bf16,fp8_e4m3
Prints one line per seed and dtype, then the totals.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ap = argparse.ArgumentParser()
ap.add_argument("--dserve", default="build/dserve")
ap.add_argument("--device", default="cpu")
ap.add_argument("--model-path", default="models/dserve-demo")
ap.add_argument("--seeds", default="11-18", help="first-last (inclusive)")
ap.add_argument("--base", default="auto", help="reference --kv-cache-dtype")
ap.add_argument("--dtypes", default="fp8_e4m3", help="comma-separated --kv-cache-dtype values to compare")
ap.add_argument("--margin", type=float, default=0.1)
ap.add_argument("--questions", type=int, default=40)
args = ap.parse_args()


def text_for(seed):
    # scripts/make_arithmetic_questions.py's questions for this seed, as "Question: ... Answer: ..." lines.
    gen = os.path.join(os.path.dirname(os.path.abspath(__file__)), "make_arithmetic_questions.py")
    out = run([sys.executable, gen, "--num", str(args.questions), "--seed", str(seed)])
    return [f"Question: {q['question']} Answer: {q['answer']}" for q in map(json.loads, out.splitlines())]


def run(cmd, stdin=None):
    r = subprocess.run(cmd, input=stdin, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd[:3])} ... failed (rc {r.returncode}): {r.stderr.strip()[-400:]}")
    return r.stdout


def score(ids, dtype):
    out = run([args.dserve, "score", "--device", args.device, "--model-path", args.model_path, "--kv-cache-dtype",
               dtype, "--attention-mode", "absorbed", "--chunk-size", "64", "--input-ids", ids, "--top-logprobs", "2",
               "--json"])
    return json.loads(out)


def compare(base, other):
    agree = n = 0
    worst = total = 0.0
    count = 0
    for i, (a, b) in enumerate(zip(base["input_top_logprobs"], other["input_top_logprobs"])):
        if a is None or b is None:
            continue
        diff = abs(base["input_token_logprobs"][i] - other["input_token_logprobs"][i])
        worst, total, count = max(worst, diff), total + diff, count + 1
        if a[0][0] - a[1][0] > args.margin:
            n += 1
            agree += a[0][1] == b[0][1]
    return agree, n, worst, total, count


first, last = (int(v) for v in args.seeds.split("-"))
dtypes = [d for d in args.dtypes.split(",") if d]
totals = {d: [0, 0, 0.0, 0.0, 0] for d in dtypes}
for seed in range(first, last + 1):
    # Each line tokenized on its own, the ids concatenated (as scripts/device/kvfp8.sh did).
    lines = json.loads(run([args.dserve, "tokenize", "--tokenizer-path", args.model_path], json.dumps(text_for(seed))))
    ids = ",".join(str(i) for line in lines for i in line)
    base = score(ids, args.base)
    for d in dtypes:
        agree, n, worst, total, count = compare(base, score(ids, d))
        t = totals[d]
        t[0], t[1], t[2], t[3], t[4] = t[0] + agree, t[1] + n, max(t[2], worst), t[3] + total, t[4] + count
        print(f"seed {seed} {d} vs {args.base}: {agree}/{n} (margin > {args.margin}), max |logprob diff| {worst:.4f}")
for d, (agree, n, worst, total, count) in totals.items():
    print(f"TOTAL {d} vs {args.base} ({args.device}): top-1 agreement {agree}/{n} = {100.0 * agree / max(n, 1):.2f}% "
          f"(margin > {args.margin}), |logprob diff| max {worst:.4f} mean {total / max(count, 1):.5f} over {count} "
          f"positions")
