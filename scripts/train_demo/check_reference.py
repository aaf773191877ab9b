#!/usr/bin/env python3
# Checks a dserve build against models/dserve-demo/reference.json (greedy continuations and token ids that
# transformers / Rust tokenizers produced on the training machine). Exit status 0 only if all agree.
"""Usage: python3 scripts/train_demo/check_reference.py [--dserve build/dserve] [--model models/dserve-demo]
                                                        [-- extra generate flags, e.g. --device cuda]"""
import argparse
import json
import os
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dserve", default="build/dserve")
    ap.add_argument("--model", default="models/dserve-demo")
    ap.add_argument("--reference", default="", help="default: MODEL/reference.json")
    ap.add_argument("--logprob-tol", type=float, default=1e-3)
    ap.add_argument("extra", nargs="*", help="flags passed on to dserve generate")
    a = ap.parse_args()
    ref_path = a.reference or os.path.join(a.model, "reference.json")
    with open(ref_path) as f:
        ref = json.load(f)
    failed = passed = 0
    for g in ref["generate"]:
        cmd = [a.dserve, "generate", "--model-path", a.model, "--input-ids", ",".join(map(str, g["input_ids"])),
               "--max-new-tokens", str(g["max_new_tokens"]), "--json"] + a.extra
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            print(f"FAIL generate {g['prompt'][-40:]!r}: {p.stderr.strip()[-300:]}")
            failed += 1
            continue
        out = json.loads(p.stdout)
        ids = out["output_ids"]
        diff = max((abs(x - y) for x, y in zip(out.get("output_token_logprobs", []), g["output_logprobs"])), default=0)
        ok = ids == g["output_ids"] and diff <= a.logprob_tol
        print(f"{'ok  ' if ok else 'FAIL'} generate {g['prompt'][-40:]!r}: max |logprob diff| {diff:.2e}"
              + ("" if ok else f"\n     got  {ids}\n     want {g['output_ids']}"))
        passed += ok
        failed += not ok
    texts = [t["text"] for t in ref["tokenize"]]
    p = subprocess.run([a.dserve, "tokenize", "--tokenizer-path", a.model], input=json.dumps(texts),
                       capture_output=True, text=True)
    got = json.loads(p.stdout) if p.returncode == 0 else [None] * len(texts)
    for t, ids in zip(ref["tokenize"], got):
        ok = ids == t["ids"]
        print(f"{'ok  ' if ok else 'FAIL'} tokenize {t['text'][:40]!r}")
        passed += ok
        failed += not ok
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
