#!/usr/bin/env python3
# End-to-end test of `dserve chat-template`: reference renderings from tests/data/chat_golden.json fed
# through stdin and flags, format detection from a tokenizer directory, and bad input.
#   cli_chat_template_test.py DSERVE_BINARY GOLDEN_JSON
import json
import os
import subprocess
import sys
import tempfile


def run(binary, args, stdin):
    return subprocess.run([binary, "chat-template", *args], input=stdin.encode("utf-8"), capture_output=True,
                          timeout=60)


def main():
    binary, golden_path = sys.argv[1], sys.argv[2]
    with open(golden_path, encoding="utf-8") as f:
        golden = json.load(f)
    failures = passed = 0
    seen = {}
    for case in golden["cases"]:
        fmt = case["format"]
        if seen.get(fmt, 0) >= 6:
            continue
        seen[fmt] = seen.get(fmt, 0) + 1
        args = ["--template", fmt]
        if case["thinking"]:
            args.append("--thinking")
        if case["add_generation_prompt"]:
            args.append("--add-generation-prompt")
        payload = {"messages": case["messages"]}
        if case["tools"] is not None:
            payload["tools"] = case["tools"]
        r = run(binary, args, json.dumps(payload, ensure_ascii=False))
        if r.returncode != 0 or r.stdout.decode("utf-8") != case["expected"]:
            failures += 1
            print(f"FAIL {case['name']}: rc={r.returncode} stderr={r.stderr.decode()[:200]}")
        else:
            passed += 1

    # chat_template_kwargs / add_generation_prompt in the request object work like the flags.
    case = next(c for c in golden["cases"] if c["format"] == "v31" and c["thinking"] and c["add_generation_prompt"])
    r = run(binary, ["--template", "v31"], json.dumps({"messages": case["messages"], "tools": case["tools"],
                                                      "chat_template_kwargs": {"thinking": True},
                                                      "add_generation_prompt": True}))
    ok = r.returncode == 0 and r.stdout.decode("utf-8") == case["expected"]
    passed, failures = passed + ok, failures + (not ok)
    if not ok:
        print(f"FAIL kwargs in request: {r.stderr.decode()[:200]}")

    # Detection from a checkpoint directory (the template string of each format, and V3.2 without one).
    with tempfile.TemporaryDirectory() as d:
        for fmt, model_type, template in [("r1", "deepseek_v3", golden["templates"]["r1"]),
                                          ("v32exp", "deepseek_v32", golden["templates"]["v32exp"]),
                                          ("v32", "deepseek_v32", None)]:
            cfg = {"bos_token": {"content": golden["bos_token"]}, "eos_token": golden["eos_token"]}
            if template is not None:
                cfg["chat_template"] = template
            with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
                json.dump(cfg, f, ensure_ascii=False)
            with open(os.path.join(d, "config.json"), "w") as f:
                json.dump({"model_type": model_type}, f)
            case = next(c for c in golden["cases"] if c["format"] == fmt and c["tools"] is None
                        and not c["thinking"] and c["add_generation_prompt"])
            r = run(binary, ["--tokenizer-path", d, "--add-generation-prompt"], json.dumps(case["messages"]))
            ok = r.returncode == 0 and r.stdout.decode("utf-8") == case["expected"]
            passed, failures = passed + ok, failures + (not ok)
            if not ok:
                print(f"FAIL detect {fmt}: rc={r.returncode} {r.stderr.decode()[:200]}")

    # Bad input: exit code 1 and a one-line message naming the problem.
    for args, stdin, needle in [(["--template", "v9"], "[]", "v9"),
                                (["--template", "v3"], "[{\"role\": \"user\"", "standard input"),
                                (["--template", "v3"], "[{\"content\": \"x\"}]", "messages[0].role"),
                                ([], "[]", "--tokenizer-path"),
                                (["--tokenizer-path", "/nonexistent"], "[]", "tokenizer_config.json")]:
        r = run(binary, args, stdin)
        err = r.stderr.decode()
        ok = r.returncode == 1 and needle in err and err.count("\n") == 1
        passed, failures = passed + ok, failures + (not ok)
        if not ok:
            print(f"FAIL bad input {args}: rc={r.returncode} stderr={err!r}")

    print(f"{passed} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
