#!/usr/bin/env python3
"""End-to-end test of `dserve tokenize` / `dserve detokenize` against the Rust-tokenizers golden file.

Usage: cli_text_test.py DSERVE_BINARY GOLDEN_JSON TOKENIZER_DIR
"""
import json
import subprocess
import sys

DSERVE, GOLDEN, TOK = sys.argv[1:4]
golden = json.load(open(GOLDEN))
failures, passed = [], 0


def check(cond, what):
    global passed
    if cond:
        passed += 1
    else:
        failures.append(what)
        print("FAIL:", what, flush=True)


def run(args, stdin):
    p = subprocess.run([DSERVE, *args], input=stdin, capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


# Every golden string through one tokenize call each way (with and without special tokens).
enc = golden["encode"]
texts = [e["text"] for e in enc]
for special, key in ((False, "ids"), (True, "ids_special")):
    args = ["tokenize", "--tokenizer-path", TOK] + (["--add-special-tokens"] if special else [])
    rc, out, err = run(args, json.dumps(texts))
    check(rc == 0, f"tokenize exited {rc}: {err.strip()}")
    if rc == 0:
        got = json.loads(out)
        bad = [i for i, e in enumerate(enc) if got[i] != e[key]]
        check(not bad, f"tokenize special={special}: {len(bad)} mismatches, first {bad[:3]}")

dec = golden["decode"]
for skip, key in ((False, "text"), (True, "text_skip")):
    args = ["detokenize", "--tokenizer-path", TOK] + (["--skip-special-tokens"] if skip else [])
    rc, out, err = run(args, json.dumps([d["ids"] for d in dec]))
    check(rc == 0, f"detokenize exited {rc}: {err.strip()}")
    if rc == 0:
        got = json.loads(out)
        bad = [i for i, d in enumerate(dec) if got[i] != d[key]]
        check(not bad, f"detokenize skip={skip}: {len(bad)} mismatches, first {bad[:3]}")


def expect_error(args, stdin, needle, what):
    rc, out, err = run(args, stdin)
    lines = [l for l in err.strip().splitlines() if l.strip()]
    check(rc != 0 and len(lines) == 1 and needle in lines[0], f"{what}: rc={rc} stderr={err.strip()!r}")


expect_error(["tokenize", "--tokenizer-path", "/nonexistent/dir"], "[]", "nonexistent", "missing tokenizer dir")
expect_error(["tokenize", "--tokenizer-path", TOK], "[\"a\", ", "JSON", "bad JSON on stdin")
expect_error(["tokenize", "--tokenizer-path", TOK], "[1, 2]", "string", "non-string items")
expect_error(["detokenize", "--tokenizer-path", TOK], "[[1, 99999999]]", "99999999", "id out of range")
print(f"{passed} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
