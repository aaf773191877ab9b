#!/usr/bin/env python3
"""Session 48-49's engine-side input checks on the CUDA backend (the CPU tests cover the CPU path; CUDA sizes its pool
and activation reserve from the GPU's memory): a serve with --max-running-requests 10^9 starts, reports a capped
limit in /get_server_info and answers; --context-length past the model and --max-total-tokens past memory are
refused with one line; bench-one-batch refuses a cache past memory. Prints one CHECK line each, exits 1 on a failure.
Usage: engine_checks_cuda.py DSERVE MODEL_DIR CONFIG_JSON"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "server"))
import harness as H  # noqa: E402

DSERVE, MODEL, CONFIG = sys.argv[1:4]
failed = 0


def check(ok, what):
    global failed
    print(("CHECK ok   " if ok else "CHECK FAIL ") + what, flush=True)
    failed += not ok


def one_line_error(args, needle, what):
    p = subprocess.run([DSERVE, *args], capture_output=True, text=True, timeout=300)
    lines = [l for l in p.stderr.strip().splitlines() if l.strip()]
    check(p.returncode != 0 and len(lines) >= 1 and needle in lines[-1],
          f"{what}: rc={p.returncode} last stderr line {lines[-1] if lines else ''!r}")


srv = H.Server(DSERVE, ["--model-path", MODEL, "--device", "cuda", "--max-running-requests", "1000000000",
                        "--mem-fraction-static", "0.5"])
try:
    srv.start()
    st = H.engine_state(srv)
    limit, pool = st.get("max_running_requests"), st.get("max_total_num_tokens")
    check(isinstance(limit, int) and 1 <= limit < 1000000000 and limit * 64 <= pool + 64,
          f"--max-running-requests 1e9 on CUDA: limit in effect {limit}, pool {pool} tokens")
    r = H.post(srv, "/generate", {"text": "1 + 1 =", "sampling_params": {"max_new_tokens": 4, "temperature": 0}})
    check(r.status == 200 and len(r.json().get("text", "")) > 0, f"a request with that limit: {r.status} {r.body[:120]!r}")
    check(any("capped at" in l for l in srv.stderr_lines + srv.stdout_lines),
          "the cap is logged: " + next((l for l in srv.stderr_lines + srv.stdout_lines if "capped at" in l), "(no line)"))
except Exception as e:  # noqa: BLE001
    check(False, f"serve --max-running-requests 1e9 on CUDA: {e}")
finally:
    srv.stop()

one_line_error(["serve", "--model-path", MODEL, "--device", "cuda", "--port", "0", "--context-length", "1000000000000"],
               "max_position_embeddings", "serve --context-length 1e12 on CUDA")
one_line_error(["serve", "--model-path", MODEL, "--device", "cuda", "--port", "0", "--max-total-tokens", "100000000000"],
               "--max-total-tokens 100000000000", "serve --max-total-tokens 1e11 on CUDA")
one_line_error(["bench-one-batch", "--model-path", CONFIG, "--load-format", "dummy", "--device", "cuda", "--batch-size",
                "1", "--input-len", "8", "--output-len", "2", "--max-total-tokens", "100000000000"],
               "--max-total-tokens 100000000000", "bench-one-batch --max-total-tokens 1e11 on CUDA")
one_line_error(["bench-one-batch", "--model-path", CONFIG, "--load-format", "dummy", "--device", "cuda", "--batch-size",
                "100000000", "--input-len", "8", "--output-len", "2"], "--batch-size 100000000 x (--input-len + --output-len)",
               "bench-one-batch --batch-size 1e8 on CUDA")

# Session 50: without chunking (--chunked-prefill-size -1) a prompt past --max-prefill-tokens goes in pieces of it (the
# activation reserve counts that many tokens a step); before, one 100K-token prompt was one step's activations, past
# the reserve. V2-Lite's config with dummy weights: the long prompt answers, then a short one (the server lives), and
# the step counts show the pieces.
LONG = int(os.environ.get("ENGINE_CHECKS_LONG", "100000"))
srv = H.Server(DSERVE, ["--model-path", CONFIG, "--load-format", "dummy", "--skip-tokenizer-init", "--device", "cuda",
                        "--chunked-prefill-size", "-1", "--port", "0"], ready_timeout=300)
try:
    srv.start()
    info = H.request(srv, "GET", "/get_server_info").json()
    check(info.get("max_prefill_tokens") == 16384, f"--max-prefill-tokens default: {info.get('max_prefill_tokens')}")
    ids = [(i * 7919) % 100000 + 10 for i in range(LONG)]
    r = H.post(srv, "/generate", {"input_ids": ids, "sampling_params": {"max_new_tokens": 2, "temperature": 0,
                                                                           "ignore_eos": True}}, timeout=600)
    check(r.status == 200 and len(r.json().get("output_ids", [])) == 2,
          f"a {LONG}-token prompt without chunking: {r.status} {r.body[:160]!r}")
    r = H.post(srv, "/generate", {"input_ids": ids[:50], "sampling_params": {"max_new_tokens": 4, "temperature": 0,
                                                                                "ignore_eos": True}})
    check(r.status == 200 and len(r.json().get("output_ids", [])) == 4, f"then a short one: {r.status} {r.body[:160]!r}")
except Exception as e:  # noqa: BLE001
    check(False, f"serve --chunked-prefill-size -1 with a {LONG}-token prompt on CUDA: {e}")
finally:
    srv.stop()
    tail = [l for l in srv.stderr_lines + srv.stdout_lines if "step" in l.lower() or "error" in l.lower()][-5:]
    print("  server tail: " + " | ".join(tail), flush=True)
sys.exit(1 if failed else 0)
