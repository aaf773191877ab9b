"""End-to-end test of `dserve bench-serving`.

Usage: bench_serving_test.py DSERVE FIXTURE_V3_DIR TOKENIZER_DIR

1. Against a fake SGLang/OpenAI server (fake_server.py) that records every request: the report block has
   SGLang's labels in SGLang's order and widths, and its counts add up with what the server saw
   (successful requests, failures, input tokens, server-reported completion tokens == requested tokens
   under ignore_eos, the concurrency cap), for each backend, streamed and not; setup failures exit 1.
2. Against the real `dserve serve` on the CPU with the tiny fixture and --skip-tokenizer-init (random-ids):
   successful requests == --num-prompts and the generated-token total equals both what the requests asked
   for and the server's own token counters (/metrics).
"""
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fake_server import FakeServer  # noqa: E402

DSERVE, FIXTURE, TOKENIZER = sys.argv[1], sys.argv[2], sys.argv[3]

# SGLang's block (shared/spec/sglang-reference.md section 3); separators written as -Title-.
LABELS = [
    "Backend:", "Traffic request rate:", "Max request concurrency:", "Successful requests:",
    "Benchmark duration (s):", "Total input tokens:", "Total generated tokens:",
    "Total generated tokens (retokenized):", "Request throughput (req/s):", "Input token throughput (tok/s):",
    "Output token throughput (tok/s):", "Peak output token throughput (tok/s):", "Peak concurrent requests:",
    "Total token throughput (tok/s):", "Concurrency:", "-End-to-End Latency-", "Mean E2E Latency (ms):",
    "Median E2E Latency (ms):", "P90 E2E Latency (ms):", "P99 E2E Latency (ms):", "-Time to First Token-",
    "Mean TTFT (ms):", "Median TTFT (ms):", "P99 TTFT (ms):", "-Time per Output Token (excl. 1st token)-",
    "Mean TPOT (ms):", "Median TPOT (ms):", "P99 TPOT (ms):", "-Inter-Token Latency-", "Mean ITL (ms):",
    "Median ITL (ms):", "P95 ITL (ms):", "P99 ITL (ms):", "Max ITL (ms):",
]
INT_LABELS = {"Successful requests:", "Total input tokens:", "Total generated tokens:",
              "Total generated tokens (retokenized):", "Peak concurrent requests:"}

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg, flush=True)


def run_bench(args, expect_rc=0):
    cmd = [DSERVE, "bench-serving", "--disable-tqdm"] + args
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if p.returncode != expect_rc:
        print(" ".join(cmd), "\nstdout:\n", p.stdout, "\nstderr:\n", p.stderr, flush=True)
    check(p.returncode == expect_rc, "rc %d != %d for %s" % (p.returncode, expect_rc, " ".join(args)))
    return p


def parse_report(stdout, accept=False):
    lines = stdout.splitlines()
    head = "============ Serving Benchmark Result ============"
    assert head in lines, "no report block in:\n" + stdout
    i = lines.index(head)
    check(lines[i - 1] == "", "the block is preceded by an empty line")
    j = lines.index("=" * 50, i + 1)
    labels, values = [], {}
    for l in lines[i + 1:j]:
        if l.startswith("-"):
            check(len(l) == 50, "separator width: %r" % l)
            labels.append("-" + l.strip("-") + "-")
            continue
        label, sep, value = l[:40].rstrip(), l[40], l[41:]
        check(sep == " " and len(l) >= 51 and (len(l) == 51 or value.strip() == value),
              "line layout {:<40} {:<10}: %r" % l)
        labels.append(label)
        values[label] = value.strip()
    want = list(LABELS)
    if accept:
        want.insert(want.index("Concurrency:") + 1, "Accept length:")
    check(labels == want, "labels/order differ:\n%s\nvs\n%s" % (labels, want))
    for k, v in values.items():
        if k in INT_LABELS:
            check(re.fullmatch(r"\d+", v) is not None, "%s is not an integer: %r" % (k, v))
        elif k not in ("Backend:", "Traffic request rate:", "Max request concurrency:"):
            check(re.fullmatch(r"-?\d+\.\d\d|nan", v) is not None, "%s is not %%.2f: %r" % (k, v))
    return values


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]  # Python's json reads SGLang's Infinity


def stats(srv):
    with urllib.request.urlopen(srv.url + "/stats") as r:
        return json.load(r)


def fake_server_runs(tmp):
    out = os.path.join(tmp, "fake.jsonl")
    common = ["--dataset-name", "random-ids", "--random-ids-vocab-size", "1000", "--random-input-len", "32",
              "--random-output-len", "12", "--random-range-ratio", "0.5", "--seed", "7"]

    # 1. Native /generate, streamed, concurrency cap 4, every 7th request fails on the server.
    n = 24
    with FakeServer(fail_every=7, token_delay=0.002) as srv:
        p = run_bench(["--backend", "sglang", "--base-url", srv.url, "--num-prompts", str(n),
                       "--max-concurrency", "4", "--output-file", out, "--output-details",
                       "--extra-request-body", '{"bench_tag": "t1"}'] + common)
        st = stats(srv)
    v = parse_report(p.stdout)
    recs = st["records"]
    check(len(recs) == n + 1, "server saw %d requests, want %d (+1 warmup)" % (len(recs), n))
    warm, main = recs[0], recs[1:]
    check(warm["max_new"] <= 32, "warmup asks for at most 32 tokens")
    ok = [r for r in main if not r["failed"]]
    check(len(ok) == n - 3, "fail_every=7 fails requests 7, 14, 21 of 25")
    check(v["Successful requests:"] == str(len(ok)), "successful %s vs server %d" % (v["Successful requests:"], len(ok)))
    gen = sum(r["completion_tokens"] for r in ok)
    check(v["Total generated tokens:"] == str(gen), "generated %s vs server-reported %d" % (v["Total generated tokens:"], gen))
    check(gen == sum(r["max_new"] for r in ok), "ignore_eos: completion == requested")
    check(all(r["ignore_eos"] and r["stream"] for r in main), "ignore_eos and stream are sent by default")
    check(v["Total input tokens:"] == str(sum(r["prompt_len"] for r in ok)), "input tokens add up")
    check(all(16 <= r["prompt_len"] <= 32 and 6 <= r["max_new"] <= 12 for r in main), "lengths in [len*ratio, len]")
    check(st["peak_live"] == 4, "server-side peak concurrency %d, want 4" % st["peak_live"])
    # SGLang's "Peak concurrent requests" counts requests alive at any time within a one-second bucket, so it
    # can exceed the cap; it is at least the cap here (24 queued requests of >= 12 ms each in the first second).
    check(int(v["Peak concurrent requests:"]) >= 4, "peak concurrent requests >= cap")
    check(v["Max request concurrency:"] == "4" and v["Traffic request rate:"] == "inf", "header values")
    check(all(r["extra"] == "t1" for r in recs), "--extra-request-body reaches every request")
    check("3 of 24 requests failed" in p.stderr and "injected failure" in p.stderr, "failures are reported: " + p.stderr)
    check(v["Total generated tokens (retokenized):"] == "0", "no tokenizer: nothing retokenized")
    check(float(v["Mean TTFT (ms):"]) > 0 and float(v["Mean ITL (ms):"]) > 0, "streamed timings measured")
    check(float(v["Mean TTFT (ms):"]) < float(v["Mean E2E Latency (ms):"]), "TTFT < E2E when streaming")
    row = read_jsonl(out)[-1]
    check(row["completed"] == len(ok) and row["total_output_tokens"] == gen and row["failed"] == 3, "JSON counts")
    check(row["request_rate"] == math.inf and row["max_concurrency"] == 4 and row["backend"] == "sglang", "JSON args")
    check(sum(row["output_lens"]) == gen and len(row["errors"]) == n, "JSON details")
    check(abs(row["mean_e2e_latency_ms"] - float(v["Mean E2E Latency (ms):"])) < 0.006, "JSON == printed")

    # 2. Same, server sends ids only (a --skip-tokenizer-init server): tokens still counted and timed.
    with FakeServer(ids_only=True) as srv:
        p = run_bench(["--backend", "sglang", "--base-url", srv.url, "--num-prompts", "6", "--request-rate", "50"]
                      + common)
        st = stats(srv)
    v = parse_report(p.stdout)
    gen = sum(r["completion_tokens"] for r in st["records"][1:])
    check(v["Successful requests:"] == "6" and v["Total generated tokens:"] == str(gen), "ids-only counts")
    check(v["Traffic request rate:"] == "50.0" and v["Max request concurrency:"] == "not set", "finite rate header")
    check(float(v["Mean ITL (ms):"]) > 0, "ids-only chunks are timed")

    # 3. OpenAI completions (id prompts), streamed with a usage chunk, bearer key; then not streamed.
    for stream_args in ([], ["--disable-stream"]):
        with FakeServer(api_key="sekrit") as srv:
            p = run_bench(["--backend", "vllm", "--base-url", srv.url, "--num-prompts", "10", "--api-key", "sekrit",
                           "--max-concurrency", "3"] + stream_args + common)
            st = stats(srv)
        v = parse_report(p.stdout)
        main = st["records"][1:]
        check(v["Successful requests:"] == "10", "vllm successes")
        check(v["Total generated tokens:"] == str(sum(r["completion_tokens"] for r in main)), "vllm tokens")
        check(all(r["route"] == "/v1/completions" for r in main), "vllm uses /v1/completions")
        if stream_args:
            check(v["Mean TTFT (ms):"] == v["Mean E2E Latency (ms):"], "no streaming: TTFT == E2E")
            check(v["Mean ITL (ms):"] == "0.00", "no streaming: no ITL")
        else:
            check(all(r["include_usage"] for r in main), "stream_options.include_usage is requested")
    with FakeServer(api_key="sekrit") as srv:
        p = run_bench(["--backend", "vllm", "--base-url", srv.url, "--num-prompts", "2"] + common, expect_rc=1)
    check("Warmup failed" in p.stderr or "401" in p.stderr, "a refused key fails the setup: " + p.stderr)

    # 4. Chat backend needs text: the DeepSeek-V3 tokenizer decodes the random ids; retokenized counts.
    with FakeServer() as srv:
        p = run_bench(["--backend", "sglang-oai-chat", "--base-url", srv.url, "--num-prompts", "5",
                       "--tokenizer", TOKENIZER, "--model", "m"] + common)
        st = stats(srv)
    v = parse_report(p.stdout)
    check(v["Successful requests:"] == "5", "chat successes")
    check(all(r["route"] == "/v1/chat/completions" for r in st["records"]), "chat route")
    check(int(v["Total generated tokens (retokenized):"]) > 0, "outputs retokenized with --tokenizer")

    # 5. Accept length: printed only when the server reports it.
    with FakeServer(accept_length=2.5) as srv:
        p = run_bench(["--backend", "sglang", "--base-url", srv.url, "--num-prompts", "3"] + common)
    v = parse_report(p.stdout, accept=True)
    check(v.get("Accept length:") == "2.50", "accept length from /get_server_info")

    # 6. Setup errors exit 1 with a message: nobody listening; every warmup request failing.
    p = run_bench(["--base-url", "http://127.0.0.1:9", "--num-prompts", "2"] + common, expect_rc=1)
    check("127.0.0.1:9" in p.stderr, "unreachable server is named: " + p.stderr)
    with FakeServer(fail_every=1) as srv:
        p = run_bench(["--base-url", srv.url, "--num-prompts", "2"] + common, expect_rc=1)
    check("Warmup failed" in p.stderr, "warmup failure: " + p.stderr)
    p = run_bench(["--backend", "trt", "--num-prompts", "2"] + common, expect_rc=1)
    check("--backend" in p.stderr, "bad backend named")


def metric(url, name):
    with urllib.request.urlopen(url + "/metrics") as r:
        text = r.read().decode()
    total = 0.0
    for l in text.splitlines():
        if l.startswith(name + "{") or l.startswith(name + " "):
            total += float(l.rsplit(" ", 1)[1])
    return total


def real_server_run(tmp):
    help_text = subprocess.run([DSERVE, "--help"], capture_output=True, text=True).stdout
    if not re.search(r"^\s+serve\s", help_text, re.M):
        print("dserve has no serve command in this build: real-server part not run", flush=True)
        return
    srv = subprocess.Popen([DSERVE, "serve", "--model-path", FIXTURE, "--skip-tokenizer-init", "--port", "0",
                            "--device", "cpu", "--enable-metrics", "--io-threads", "2"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url = None
        for line in srv.stderr:
            m = re.search(r"listening on (http://\S+)", line)
            if m:
                url = m.group(1)
                break
        assert url, "dserve serve did not report its address"
        deadline = time.time() + 180
        while True:
            try:
                with urllib.request.urlopen(url + "/health", timeout=30) as r:
                    if r.status == 200:
                        break
            except Exception:
                pass
            assert time.time() < deadline, "dserve serve did not become healthy"
            time.sleep(0.5)
        gen0 = metric(url, "sglang:generation_tokens_total")
        prompt0 = metric(url, "sglang:prompt_tokens_total")
        out = os.path.join(tmp, "real.jsonl")
        n, in_len, out_len = 8, 24, 10
        p = run_bench(["--backend", "sglang", "--base-url", url, "--dataset-name", "random-ids",
                       "--random-ids-vocab-size", "1024", "--num-prompts", str(n), "--random-input-len", str(in_len),
                       "--random-output-len", str(out_len), "--random-range-ratio", "1.0", "--max-concurrency", "4",
                       "--output-file", out, "--output-details"])
        v = parse_report(p.stdout)
        row = read_jsonl(out)[-1]
        check(v["Successful requests:"] == str(n), "real server: successful %s != %d" % (v["Successful requests:"], n))
        check(v["Total generated tokens:"] == str(n * out_len), "real server: generated %s != asked %d"
              % (v["Total generated tokens:"], n * out_len))
        check(sum(row["output_lens"]) == n * out_len, "real server: per-request completion_tokens add up")
        check(v["Total input tokens:"] == str(n * in_len), "real server: input tokens")
        # The server's own counters: the warmup (min(out_len, 32) tokens) plus the timed requests.
        gen = metric(url, "sglang:generation_tokens_total") - gen0
        prompt = metric(url, "sglang:prompt_tokens_total") - prompt0
        check(gen == n * out_len + min(out_len, 32), "server counted %d generated tokens, bench %d + warmup %d"
              % (gen, n * out_len, min(out_len, 32)))
        check(prompt == (n + 1) * in_len, "server counted %d prompt tokens, want %d" % (prompt, (n + 1) * in_len))
        check(float(v["Mean TTFT (ms):"]) > 0 and float(v["Mean ITL (ms):"]) > 0, "real server: timings measured")
    finally:
        srv.terminate()
        try:
            srv.wait(timeout=30)
        except subprocess.TimeoutExpired:
            srv.kill()


def main():
    with tempfile.TemporaryDirectory() as tmp:
        fake_server_runs(tmp)
        real_server_run(tmp)
    if failures:
        print("%d check(s) failed" % len(failures))
        sys.exit(1)
    print("bench-serving end-to-end: all checks passed")


if __name__ == "__main__":
    main()
