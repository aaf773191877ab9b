#!/usr/bin/env python3
"""Writes a GSM8K-format JSONL of synthetic arithmetic questions for `dserve bench-accuracy`:
{"question": "What is A plus B?", "answer": "C"} and the same with minus, 0 <= A, B <= 999 (C may be negative).

Usage: make_arithmetic_questions.py --num 205 --seed 1234 > arithmetic.jsonl
"""
import argparse
import json
import random

ap = argparse.ArgumentParser()
ap.add_argument("--num", type=int, default=205)
ap.add_argument("--seed", type=int, default=1234)
args = ap.parse_args()
rng = random.Random(args.seed)
for _ in range(args.num):
    a, b = rng.randint(0, 999), rng.randint(0, 999)
    if rng.random() < 0.5:
        q, c = f"What is {a} plus {b}?", a + b
    else:
        q, c = f"What is {a} minus {b}?", a - b
    print(json.dumps({"question": q, "answer": str(c)}))
