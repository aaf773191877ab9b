#!/usr/bin/env python3
"""Soak test (RELIABILITY.md): `dserve serve` under overload for a fixed duration, then checks that nothing was
lost. Rounds of `dserve bench-serving` (request rate inf, high concurrency, small --max-queued-requests so that
some requests get 503) run back to back while other clients open streams and disconnect mid-stream. At the end:
every request completed or got a clean error (503 overload; counts add up), the page pool is idle (no running or
waiting request, every used KV slot belongs to the radix cache, and nothing after /flush_cache), and the server's
RSS (from /proc) after the soak is within a bound of its RSS after warmup.

Usage: soak.py [--binary build/dserve] [--duration 60] [--json-out FILE] [-- extra serve args]
Default serve args: the bundled demo model on the CPU. Exit status 0 when every check holds."""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def pool_state(server):
    return H.engine_state(server)


def disconnecting_client(server, stop, counts, vocab):
    """Opens a streamed /generate, reads its first bytes, then closes the socket mid-stream (or before any token)."""
    i = 0
    while not stop.is_set():
        i += 1
        body = json.dumps({"input_ids": [(i * 7 + k) % vocab for k in range(1, 40)],
                           "sampling_params": {"max_new_tokens": 200, "ignore_eos": True}, "stream": True})
        req = ("POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
               % (len(body), body)).encode()
        try:
            s = socket.create_connection((server.host, server.port), timeout=30)
            s.sendall(req)
            if i % 3 != 0:  # two in three wait for the first bytes (headers or a token); the rest leave at once
                s.recv(256 if i % 3 == 1 else 4096)
            s.close()
            counts["disconnects"] += 1
        except OSError as e:
            counts["client_errors"] += 1
            counts["last_client_error"] = str(e)
        time.sleep(0.2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=os.environ.get("DSERVE_BINARY", os.path.join(H.SOURCE_DIR, "build", "dserve")))
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of load")
    ap.add_argument("--concurrency", type=int, default=48, help="bench-serving --max-concurrency")
    ap.add_argument("--max-queued", type=int, default=16, help="--max-queued-requests of the server")
    ap.add_argument("--prompts-per-round", type=int, default=128)
    ap.add_argument("--input-len", type=int, default=96)
    ap.add_argument("--output-len", type=int, default=48)
    ap.add_argument("--vocab", type=int, default=8000, help="random-ids below this")
    ap.add_argument("--disconnectors", type=int, default=2, help="clients that leave mid-stream")
    ap.add_argument("--rss-bound-mib", type=float, default=64.0, help="largest RSS growth after warmup")
    ap.add_argument("--ready-timeout", type=float, default=600)
    ap.add_argument("--json-out", default="")
    ap.add_argument("serve_args", nargs="*", help="after --: serve flags (default: the demo model on the CPU)")
    a = ap.parse_args()
    # Default: the demo model on the CPU with a small KV pool (4096 tokens).
    serve_args = a.serve_args or ["--model-path", os.path.join(H.SOURCE_DIR, "models", "dserve-demo"), "--device", "cpu",
                                  "--max-total-tokens", "4096"]
    serve_args = serve_args + ["--max-queued-requests", str(a.max_queued), "--enable-metrics", "--skip-tokenizer-init"]
    srv = H.Server(a.binary, serve_args, ready_timeout=a.ready_timeout).start()
    failures = []
    report = {"serve_args": serve_args, "duration_s": a.duration, "concurrency": a.concurrency,
              "max_queued_requests": a.max_queued}
    out_file = tempfile.mktemp(prefix="dserve_soak_", suffix=".jsonl")

    def bench(num_prompts, concurrency, details=True):
        cmd = [a.binary, "bench-serving", "--backend", "sglang", "--host", srv.host, "--port", str(srv.port),
               "--dataset-name", "random-ids", "--random-ids-vocab-size", str(a.vocab),
               "--random-input-len", str(a.input_len), "--random-output-len", str(a.output_len),
               "--random-range-ratio", "0.25", "--num-prompts", str(num_prompts), "--request-rate", "inf",
               "--max-concurrency", str(concurrency), "--warmup-requests", "0", "--disable-tqdm",
               "--seed", str(int(time.time() * 1000) % 100000), "--timeout", "600", "--output-file", out_file]
        if details:
            cmd.append("--output-details")
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=max(900, a.duration * 3))
        if p.returncode != 0:
            failures.append("bench-serving exited %d: %s" % (p.returncode, p.stderr[-500:]))
            return None
        with open(out_file) as f:
            lines = f.read().strip().splitlines()
        return json.loads(lines[-1])

    try:
        # Warmup (below the queue limit), then the baseline RSS.
        bench(16, min(4, a.max_queued), details=False)
        H.wait_until(lambda: pool_state(srv)["num_running_reqs"] == 0, 60)
        rss_before = rss_kib(srv.proc.pid)
        stop = threading.Event()
        counts = {"disconnects": 0, "client_errors": 0}
        threads = [threading.Thread(target=disconnecting_client, args=(srv, stop, counts, a.vocab), daemon=True)
                   for _ in range(a.disconnectors)]
        for t in threads:
            t.start()
        t0 = time.time()
        sent = completed = refused = other_errors = rounds = 0
        latencies_p99 = []
        error_samples = []
        rss_peak = rss_before
        while time.time() - t0 < a.duration:
            j = bench(a.prompts_per_round, a.concurrency)
            rss_peak = max(rss_peak, rss_kib(srv.proc.pid))
            if j is None:
                break
            rounds += 1
            n = a.prompts_per_round
            sent += n
            completed += j["completed"]
            errs = [e for e in j.get("errors", []) if e]
            if j["completed"] + len(errs) != n:
                failures.append("round %d: %d completed + %d errors != %d sent" % (rounds, j["completed"], len(errs), n))
            for e in errs:
                if "503" in e and "overloaded" in e:
                    refused += 1
                else:
                    other_errors += 1
                    if len(error_samples) < 5:
                        error_samples.append(e[:300])
            if j["completed"] > 0:
                latencies_p99.append(j["p99_e2e_latency_ms"])
        stop.set()
        for t in threads:
            t.join(60)
        elapsed = time.time() - t0
        # Everything drains: no request running or waiting, only the radix cache holds pages.
        idle = H.wait_until(lambda: (lambda s: s["num_running_reqs"] == 0 and s["num_waiting_reqs"] == 0 and
                                     s["used_tokens"] == s["cached_tokens"])(pool_state(srv)), 60)
        state = pool_state(srv)
        if not idle:
            failures.append("page pool not idle after the soak: %s" % json.dumps(state))
        r = H.request(srv, "POST", "/flush_cache")
        flushed = H.wait_until(lambda: pool_state(srv)["used_tokens"] == 0, 10)
        if r.status != 200 or not flushed:
            failures.append("after /flush_cache: %d %r, used_tokens %d" % (r.status, r.body[:200],
                                                                           pool_state(srv)["used_tokens"]))
        rss_after = rss_kib(srv.proc.pid)
        growth_mib = (rss_after - rss_before) / 1024.0
        if growth_mib > a.rss_bound_mib:
            failures.append("RSS grew %.1f MiB (bound %.1f): %d -> %d KiB" % (growth_mib, a.rss_bound_mib, rss_before,
                                                                             rss_after))
        if other_errors:
            failures.append("%d requests failed with an unexpected error, e.g. %s" % (other_errors, error_samples))
        if completed == 0:
            failures.append("no request completed")
        if counts["disconnects"] == 0:
            failures.append("no client disconnected mid-stream")
        metrics = H.request(srv, "GET", "/metrics").body.decode("utf-8", "replace")
        report.update({
            "elapsed_s": round(elapsed, 1), "rounds": rounds, "requests": sent, "completed": completed,
            "refused_503": refused, "other_errors": other_errors, "disconnected_streams": counts["disconnects"],
            "client_socket_errors": counts["client_errors"],
            "p99_e2e_latency_ms_worst_round": round(max(latencies_p99), 1) if latencies_p99 else None,
            "rss_kib_before": rss_before, "rss_kib_after": rss_after, "rss_kib_peak": rss_peak,
            "rss_growth_mib": round(growth_mib, 1), "pool_idle": idle, "final_state": state,
            "num_retractions": state.get("num_retractions"),
            "aborted_requests_metric": [l for l in metrics.splitlines() if "abort" in l and not l.startswith("#")][:3],
        })
    finally:
        code = srv.stop(timeout=60)
        report["server_exit_code"] = code
        if code != 0:
            failures.append("server exit code %r: %s" % (code, srv.stderr_lines[-5:]))
        if os.path.exists(out_file):
            os.unlink(out_file)
    report["failures"] = failures
    text = json.dumps(report, indent=1)
    print(text)
    if a.json_out:
        with open(a.json_out, "w") as f:
            f.write(text + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
