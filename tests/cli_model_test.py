#!/usr/bin/env python3
"""End-to-end tests of `dserve score` / `dserve generate` (standard library only).

1. score --json on every fixture matches the transformers reference (max |diff| <= 2e-3), and generate
   --json reproduces the reference greedy tokens where the reference margin exceeds 1e-2.
2. Malformed checkpoints and inputs: each gives exit code != 0 and ONE line on stderr naming the problem.
Usage: cli_model_test.py DSERVE_BINARY FIXTURES_DIR
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

DSERVE, FIXTURES = sys.argv[1], sys.argv[2]
failures = []
passed = 0


def check(cond, what):
    global passed
    if cond:
        passed += 1
    else:
        failures.append(what)
        print("FAIL:", what, flush=True)


# Commands run in a scratch folder: bench-one-batch appends its result lines to ./result.jsonl by default (as
# sglang.bench_one_batch does).
WORK = tempfile.mkdtemp(prefix="dserve_cli_")


def run(*args):
    p = subprocess.run([DSERVE, *args], capture_output=True, text=True, timeout=300, cwd=WORK)
    return p.returncode, p.stdout, p.stderr


def ids_arg(ids):
    return ",".join(str(i) for i in ids)


# ---- 1. fixtures through the CLI ----
for name in sorted(os.listdir(FIXTURES)):
    d = os.path.join(FIXTURES, name)
    ref_path = os.path.join(d, "reference.json")
    if not os.path.isfile(ref_path):
        continue
    ref = json.load(open(ref_path))
    # the longest and the shortest score prompt
    prompts = sorted(ref["score"], key=lambda e: len(e["input_ids"]))
    for entry in (prompts[0], prompts[-1]):
        rc, out, err = run("score", "--model-path", d, "--input-ids", ids_arg(entry["input_ids"]),
                           "--top-logprobs", "3", "--json")
        check(rc == 0, f"{name}: score exited {rc}: {err.strip()}")
        if rc != 0:
            continue
        got = json.loads(out)
        lps = got["input_token_logprobs"]
        check(lps[0] is None and got["input_top_logprobs"][0] is None, f"{name}: entry 0 must be null")
        check(len(lps) == len(entry["input_ids"]), f"{name}: one logprob per input token")
        worst = max([abs(a - b) for a, b in zip(lps[1:], entry["token_logprobs"][1:])] or [0.0])
        check(worst <= 2e-3, f"{name}: score max diff {worst} (len {len(entry['input_ids'])})")
        if len(lps) > 1:
            check(len(got["input_top_logprobs"][1]) == 3, f"{name}: top-3 lists")
    g = ref["generate"][0]
    rc, out, err = run("generate", "--model-path", d, "--input-ids", ids_arg(g["input_ids"]),
                       "--max-new-tokens", str(g["max_new_tokens"]), "--temperature", "0", "--ignore-eos", "--json")
    check(rc == 0, f"{name}: generate exited {rc}: {err.strip()}")
    if rc == 0:
        got = json.loads(out)
        n = 0
        for i, (a, b) in enumerate(zip(got["output_ids"], g["output_ids"])):
            if g["top2_margin"][i] <= 1e-2:
                break
            check(a == b, f"{name}: generate token {i}: {a} != {b}")
            if a != b:
                break
            n += 1
        check(n > 0, f"{name}: compared at least one generated token")


# ---- bench-one-batch prints SGLang's lines, takes its lists (space-separated, or with commas) and writes its
# result lines: a run for every batch size x input length x output length ----
import re
results = os.path.join(WORK, "runs.jsonl")
rc, out, err = run("bench-one-batch", "--model-path", os.path.join(FIXTURES, "v3"), "--batch-size", "1", "2",
                   "--input-len", "16", "--output-len", "4", "2", "--run-name", "cli", "--result-filename", results)
check(rc == 0, f"bench-one-batch exited {rc}: {err.strip()}")
check(len(re.findall(r"^Prefill\. latency: [0-9.]+ s, throughput: [0-9.]+ token/s$", out, re.M)) == 4, "Prefill lines")
check(len(re.findall(r"^Decode\.  median latency: [0-9.]+ s, median throughput: [0-9.]+ token/s$", out, re.M)) == 4,
      "Decode median lines")
check(len(re.findall(r"^Total\. latency: [0-9.]+ s, throughput: [0-9.]+ token/s$", out, re.M)) == 4, "Total lines")
batch_lines = re.findall(r"^Decode [0-9]+\. Batch size: ([0-9]+),", out, re.M)
check(batch_lines == ["1"] * 3 + ["1"] + ["2"] * 3 + ["2"], f"decode steps in SGLang's order: {batch_lines}")
rows = [json.loads(l) for l in open(results)] if os.path.isfile(results) else []
check([(r["batch_size"], r["input_len"], r["output_len"], r["run_name"]) for r in rows] ==
      [(1, 16, 4, "cli"), (1, 16, 2, "cli"), (2, 16, 4, "cli"), (2, 16, 2, "cli")], f"result lines: {rows}")
for r in rows:
    check(abs(r["prefill_throughput"] - r["batch_size"] * r["input_len"] / r["prefill_latency"]) < 1e-6 *
          r["prefill_throughput"] and r["median_decode_latency"] > 0, f"result line figures: {r}")

# --max-total-tokens sizes the cache (a pool larger than the run needs), and one below the run's need is refused.
rc, out, err = run("bench-one-batch", "--model-path", os.path.join(FIXTURES, "v3"), "--batch-size", "2",
                   "--input-len", "16", "--output-len", "3", "--max-total-tokens", "4096")
check(rc == 0 and len(re.findall(r"^Decode\.  median latency: [0-9.]+ s", out, re.M)) == 1,
      f"bench-one-batch --max-total-tokens 4096: rc={rc} {err.strip()}")
# Without --result-filename the line goes to ./result.jsonl, as SGLang's default.
default_rows = [json.loads(l) for l in open(os.path.join(WORK, "result.jsonl"))] \
    if os.path.isfile(os.path.join(WORK, "result.jsonl")) else []
check(len(default_rows) == 1 and default_rows[0]["batch_size"] == 2 and default_rows[0]["run_name"] == "default",
      f"default result.jsonl: {default_rows}")
rc, out, err = run("bench-one-batch", "--model-path", os.path.join(FIXTURES, "v3"), "--batch-size", "2",
                   "--input-len", "16", "--output-len", "3", "--max-total-tokens", "8")
check(rc != 0 and "--max-total-tokens 8 is below" in err, f"--max-total-tokens 8 refused: rc={rc} {err.strip()}")

# Dummy weights with --quantization fp8 (made in block-FP8 directly) on a bf16 config: runs, and its decode is
# a real one (the same lines).
rc, out, err = run("bench-one-batch", "--model-path", os.path.join(FIXTURES, "v2_lite", "config.json"), "--load-format",
                   "dummy", "--quantization", "fp8", "--batch-size", "1", "--input-len", "8", "--output-len", "2")
check(rc == 0, f"bench-one-batch dummy fp8 exited {rc}: {err.strip()}")
check(len(re.findall(r"^Decode\.  median latency: [0-9.]+ s", out, re.M)) == 1, "dummy fp8: Decode median line")
# serve's --enable-return-hidden-states / --enable-return-routed-experts (what they cost, measured on the GPU): the run
# still makes its lines, a prompt longer than the recording buffer's 256 rows included.
rc, out, err = run("bench-one-batch", "--model-path", os.path.join(FIXTURES, "v3"), "--batch-size", "2",
                   "--input-len", "300", "--output-len", "3", "--enable-return-hidden-states",
                   "--enable-return-routed-experts", "--result-filename", "")
check(rc == 0 and len(re.findall(r"^Decode\.  median latency: [0-9.]+ s", out, re.M)) == 1,
      f"bench-one-batch with the return flags: rc={rc} {err.strip()}")


# ---- load-time FP8 quantization and KV cache dtypes run, and change the result only slightly ----
e = json.load(open(os.path.join(FIXTURES, "v2_lite", "reference.json")))["score"][3]
for extra, bound in ((["--quantization", "fp8"], 0.5), (["--kv-cache-dtype", "fp8_e4m3"], 0.1),
                     (["--kv-cache-dtype", "bf16"], 0.05)):
    rc, out, err = run("score", "--model-path", os.path.join(FIXTURES, "v2_lite"), "--input-ids",
                       ids_arg(e["input_ids"]), "--json", *extra)
    check(rc == 0, f"score {extra} exited {rc}: {err.strip()}")
    if rc == 0:
        lps = json.loads(out)["input_token_logprobs"][1:]
        diffs = [abs(a - b) for a, b in zip(lps, e["token_logprobs"][1:])]
        mean = sum(diffs) / len(diffs)
        check(0 < mean < bound, f"score {extra}: mean |diff| {mean} not in (0, {bound})")


# ---- the MHA prefill's context chunks: on by default past their byte limit (DSERVE_MHA_CHUNK_BYTES, set tiny
# here), off with --disable-chunked-prefix-cache (one pass: exactly the results of an unbounded limit) ----
def score_lps(*extra, env=None):
    p = subprocess.run([DSERVE, "score", "--model-path", os.path.join(FIXTURES, "v3"), "--input-ids",
                        ids_arg(list(range(3, 40))), "--chunk-size", "6", "--json", *extra], capture_output=True,
                       text=True, timeout=300, cwd=WORK, env={**os.environ, **(env or {})})
    check(p.returncode == 0, f"score {extra} {env}: rc={p.returncode} {p.stderr.strip()}")
    return json.loads(p.stdout)["input_token_logprobs"][1:] if p.returncode == 0 else None


one_pass = score_lps(env={"DSERVE_MHA_CHUNK_BYTES": str(1 << 60)})
chunked = score_lps(env={"DSERVE_MHA_CHUNK_BYTES": "100"})
flagged = score_lps("--disable-chunked-prefix-cache", env={"DSERVE_MHA_CHUNK_BYTES": "100"})
if one_pass and chunked and flagged:
    check(flagged == one_pass, "--disable-chunked-prefix-cache: not the one-pass results")
    check(chunked != one_pass and max(abs(a - b) for a, b in zip(chunked, one_pass)) < 1e-4,
          "context chunks: not close to (or exactly) the one-pass results")


# ---- 2. bad input: one clear line, non-zero exit ----
def expect_error(args, needle, what):
    rc, out, err = run(*args)
    lines = [l for l in err.strip().splitlines() if l.strip()]
    ok = rc != 0 and len(lines) == 1 and needle in lines[0]
    check(ok, f"{what}: rc={rc} stderr={err.strip()!r} (expected one line containing {needle!r})")


# bench-one-batch: a cache far beyond memory, sized by --max-total-tokens or by the batch, is one line naming what
# sized it (an allocation check aborted the process before).
expect_error(["bench-one-batch", "--model-path", os.path.join(FIXTURES, "v3"), "--batch-size", "1", "--input-len", "8",
              "--output-len", "2", "--max-total-tokens", "100000000000"], "--max-total-tokens 100000000000: the KV cache",
             "--max-total-tokens 1e11")
expect_error(["bench-one-batch", "--model-path", os.path.join(FIXTURES, "v3"), "--batch-size", "100000000",
              "--input-len", "8", "--output-len", "2"], "--batch-size x (--input-len + --output-len): the KV cache",
             "--batch-size 1e8")
expect_error(["bench-one-batch", "--model-path", os.path.join(FIXTURES, "v3"), "--batch-size", "1", "0"],
             "--batch-size values must be in [1, 2^31 - 1], got 0", "--batch-size 1 0")
expect_error(["bench-one-batch", "--model-path", os.path.join(FIXTURES, "v3"), "--result-filename",
              os.path.join(WORK, "no_such_dir", "r.jsonl")], "--result-filename", "--result-filename in a missing folder")


def read_st(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def write_st(path, header, data):
    h = json.dumps(header).encode()
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + data)


base = os.path.join(FIXTURES, "v3_fp8")
tmp = tempfile.mkdtemp()
try:
    def variant(name):
        d = os.path.join(tmp, name)
        shutil.copytree(base, d)
        return d, os.path.join(d, "model.safetensors")

    score = lambda d: ["score", "--model-path", d, "--input-ids", "2,3,4", "--json"]

    d, st = variant("missing")
    hdr, data = read_st(st)
    del hdr["model.norm.weight"]
    write_st(st, hdr, data)
    expect_error(score(d), "model.norm.weight", "missing tensor")

    d, st = variant("shape")
    hdr, data = read_st(st)
    key = "model.layers.0.input_layernorm.weight"
    hdr[key]["shape"] = [hdr[key]["shape"][0] // 2, 2]
    write_st(st, hdr, data)
    expect_error(score(d), "input_layernorm", "wrong shape")

    d, st = variant("truncated")
    raw = open(st, "rb").read()
    open(st, "wb").write(raw[:8 + 100])
    expect_error(score(d), "model.safetensors", "truncated safetensors header")

    d, st = variant("badjson")
    open(os.path.join(d, "config.json"), "w").write('{"model_type": "deepseek_v3", "hidden_size": }')
    expect_error(score(d), "config.json", "bad config JSON")

    d, st = variant("modeltype")
    cfg = json.load(open(os.path.join(d, "config.json")))
    cfg["model_type"] = "llama"
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
    expect_error(score(d), "model_type", "unknown model_type")

    d, st = variant("noscale")
    hdr, data = read_st(st)
    scale = next(k for k in hdr if k.endswith("weight_scale_inv"))
    del hdr[scale]
    write_st(st, hdr, data)
    expect_error(score(d), scale[:-len("_scale_inv")], "FP8 tensor without scale")

    expect_error(["score", "--model-path", base, "--input-ids", "2,x,4"], "--input-ids", "non-integer id")
    expect_error(["score", "--model-path", base, "--input-ids", "2,99999999"], "99999999", "id outside vocab")
    expect_error(["score", "--model-path", os.path.join(tmp, "nope"), "--input-ids", "2"], "nope", "missing dir")
    expect_error(["score", "--model-path", base, "--input-ids", "2", "--bogus", "1"], "--bogus", "unknown flag")
    expect_error(["generate", "--model-path", base, "--input-ids", "2", "--max-new-tokens", "0"], "--max-new-tokens",
                 "max-new-tokens 0")
    expect_error(["score", "--model-path", base, "--input-ids", "2", "--quantization", "int4"], "--quantization",
                 "bad --quantization")
    expect_error(["score", "--model-path", base, "--input-ids", "2", "--kv-cache-dtype", "fp4"], "--kv-cache-dtype",
                 "bad --kv-cache-dtype")
    # SGLang's spellings: accepted where they mean what dserve does, refused with the flag named where not.
    rc, out, err = run("score", "--model", base, "--input-ids", "2,3,4", "--json", "--tp", "1", "--trust-remote-code")
    check(rc == 0, f"score with --model / --tp 1 / --trust-remote-code: rc={rc} {err.strip()}")
    expect_error(["score", "--model-path", base, "--input-ids", "2", "--tp", "2"], "--tp-size 2", "score --tp 2")
    for flags, needle in ((["--tp-size", "8"], "--tp-size 8"), (["--dp", "2"], "--dp-size 2"),
                          (["--mem-fraction-static", "2"], "--mem-fraction-static"),
                          (["--mem-fraction-static", "nan"], "--mem-fraction-static"),
                          (["--cuda-graph-max-bs", "-1"], "--cuda-graph-max-bs"),
                          (["--cuda-graph-bs", "1", "0"], "--cuda-graph-bs values"),
                          (["--stream-interval", "0"], "--stream-interval"),
                          (["--sampling-defaults", "vllm"], "--sampling-defaults"),
                          (["--radix-eviction-policy", "lfu"], "--radix-eviction-policy lfu"),
                          (["--preferred-sampling-params", '{"top_p": 2}'], "--preferred-sampling-params"),
                          (["--log-requests", "--log-requests-level", "5"], "--log-requests-level"),
                          (["--cuda-graph-bs", "1", "two"], "--cuda-graph-bs"),
                          (["--chunked-prefill-size", "-2"], "--chunked-prefill-size"),
                          (["--max-prefill-tokens", "0"], "--max-prefill-tokens")):
        expect_error(["serve", "--model-path", base, "--port", "0", *flags], needle, f"serve {' '.join(flags)}")
    # A generation_config.json whose sampling fields a request could not give: one line naming the file and field.
    badgen = os.path.join(tmp, "badgen")
    shutil.copytree(base, badgen)
    with open(os.path.join(badgen, "generation_config.json"), "w") as f:
        f.write('{"temperature": 0.6, "top_p": 1.5}')
    expect_error(["serve", "--model-path", badgen, "--port", "0"], "generation_config.json: 'top_p' must be in (0, 1]",
                 "serve with a bad generation_config.json")
    expect_error(["tune-gemm"], "--model-path is required", "tune-gemm without a model")
    expect_error(["tune-gemm", "--model-path", base, "--m-list", "0,8"], "[1, 64]", "tune-gemm bad --m-list")
    expect_error(["tune-gemm", "--model-path", os.path.join(tmp, "nowhere")], "neither a config.json",
                 "tune-gemm missing model")
    big = os.path.join(os.path.dirname(FIXTURES), "data", "configs", "deepseek-v3.json")
    expect_error(["tune-moe"], "--model-path is required", "tune-moe without a model")
    expect_error(["tune-moe", "--model-path", os.path.join(tmp, "nowhere")], "neither a config.json",
                 "tune-moe missing model")
    expect_error(["tune-moe", "--model-path", big, "--tokens", "8,64"], "[17, 65536]", "tune-moe bad --tokens")
    expect_error(["tune-moe", "--model-path", big, "--iters", "0"], "--iters", "tune-moe bad --iters")
    expect_error(["tune-moe", "--model-path", base], "not a multiple of 128", "tune-moe hidden size 192")
    bad_table = os.path.join(tmp, "bad_moe_table.json")
    with open(bad_table, "w") as f:
        f.write('{"shapes": [{"experts": 8}]}')
    expect_error(["tune-moe", "--model-path", big, "--output", bad_table], "is not an FP8 MoE table",
                 "tune-moe bad existing --output")
    if os.path.isfile(big) and os.path.getsize("/proc/meminfo") == 0:  # procfs: size 0 means present
        expect_error(["bench-one-batch", "--model-path", big, "--load-format", "dummy"], "GiB", "model too big for CPU")
finally:
    shutil.rmtree(tmp)

shutil.rmtree(WORK, ignore_errors=True)
print(f"{passed} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
