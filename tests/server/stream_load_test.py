#!/usr/bin/env python3
"""Many concurrent streaming clients against one server (the 200-client acceptance test). By default it starts
`dserve serve --fake-engine`; with --url it drives a running server (e.g. the real engine on a GPU), and with
--model-path it starts the real engine. A quarter of the clients hang up mid-stream; every other stream must be
complete and well-formed, and afterwards the engine must have no running requests.
Usage: stream_load_test.py [dserve] [--clients 200] [--max-tokens 32] [--url http://host:port | --model-path DIR]."""
import argparse
import json
import os
import socket
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402


def read_sse_stream(host, port, body, hang_up_after=None, timeout=600):
    """One streaming /generate over a raw socket. Returns (status, events, saw_done, ttft_s, total_s)."""
    t0 = time.time()
    s = socket.create_connection((host, port), timeout=timeout)
    data = json.dumps(body).encode()
    s.sendall(b"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
              % len(data) + data)
    buf = b""
    while b"\r\n\r\n" not in buf:
        b = s.recv(65536)
        if not b:
            s.close()
            return None, [], False, None, None
        buf += b
    head, _, buf = buf.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    events, done, ttft = [], False, None
    payload = b""
    # De-chunk incrementally, then split SSE events.
    while not done:
        while True:
            line_end = buf.find(b"\r\n")
            if line_end < 0:
                break
            size = int(buf[:line_end], 16)
            if len(buf) < line_end + 2 + size + 2:
                break
            payload += buf[line_end + 2:line_end + 2 + size]
            buf = buf[line_end + 2 + size + 2:]
            if size == 0:
                done = done or payload.endswith(b"data: [DONE]\n\n")
                break
        while b"\n\n" in payload:
            ev, _, payload = payload.partition(b"\n\n")
            assert ev.startswith(b"data: "), ev[:100]
            ev = ev[len(b"data: "):]
            if ev == b"[DONE]":
                done = True
                break
            if ttft is None:
                ttft = time.time() - t0
            events.append(json.loads(ev))
            if hang_up_after is not None and len(events) >= hang_up_after:
                s.close()
                return status, events, False, ttft, time.time() - t0
        if done:
            break
        b = s.recv(65536)
        if not b:
            break
        buf += b
    s.close()
    return status, events, done, ttft, time.time() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary", nargs="?", default=None)
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--url", default=os.environ.get("DSERVE_TEST_URL"))
    ap.add_argument("--model-path", default=None)
    ap.add_argument("--vocab", type=int, default=1000, help="prompt ids are drawn below this")
    args = ap.parse_args()

    fake = not args.url and not args.model_path
    if args.url:
        server = H.ExternalServer(args.url)
    elif args.model_path:
        server = H.Server(H.dserve_binary([None, args.binary] if args.binary else [None]),
                          ["--model-path", args.model_path, "--skip-tokenizer-init"]).start()
    else:
        server = H.Server(H.dserve_binary([None, args.binary] if args.binary else [None]),
                          ["--fake-engine", "--skip-tokenizer-init", "--fake-vocab-size", str(args.vocab),
                           "--fake-step-us", "2000", "--io-threads", "2"]).start()
    failures = []
    results = [None] * args.clients
    try:
        def client(i):
            prompt = [1 + (i * 7) % (args.vocab - 1), 1 + (i * 13) % (args.vocab - 1)]
            hang = 3 if i % 4 == 3 else None
            body = {"input_ids": prompt, "stream": True,
                    "sampling_params": {"max_new_tokens": args.max_tokens, "temperature": 0, "ignore_eos": True}}
            try:
                results[i] = (prompt, hang) + read_sse_stream(server.host, server.port, body, hang)
            except Exception as e:  # noqa: BLE001
                results[i] = (prompt, hang, None, [], False, None, None)
                failures.append("client %d: %r" % (i, e))

        t0 = time.time()
        threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.time() - t0
        ttfts, totals, tokens = [], [], 0
        for i, (prompt, hang, status, events, done, ttft, total) in enumerate(results):
            if status != 200:
                failures.append("client %d: status %r" % (i, status))
                continue
            lengths = [len(e["output_ids"]) for e in events]
            if lengths != sorted(lengths):
                failures.append("client %d: output_ids not cumulative" % i)
            if hang is not None:
                continue
            if not done:
                failures.append("client %d: stream ended without [DONE]" % i)
                continue
            last = events[-1]
            if len(last["output_ids"]) != args.max_tokens or last["meta_info"]["finish_reason"]["type"] != "length":
                failures.append("client %d: %d tokens, finish %r" % (i, len(last["output_ids"]),
                                                                       last["meta_info"]["finish_reason"]))
            if fake and last["output_ids"] != H.continuation(prompt[-1], args.max_tokens, vocab=args.vocab):
                failures.append("client %d: wrong tokens" % i)
            ttfts.append(ttft)
            totals.append(total)
            tokens += len(last["output_ids"])
        released = H.wait_until(lambda: H.engine_state(server)["num_running_reqs"] == 0 and
                                H.engine_state(server)["num_waiting_reqs"] == 0, 60)
        if not released:
            failures.append("engine still busy after all clients finished: %r" % H.engine_state(server))
        if ttfts:
            print("clients %d (%d hung up), wall %.2fs, %d tokens, %.0f tok/s; TTFT p50 %.3fs p99 %.3fs; "
                  "stream p50 %.3fs" % (args.clients, sum(1 for r in results if r[1] is not None), wall, tokens,
                                        tokens / wall, statistics.median(ttfts),
                                        sorted(ttfts)[int(0.99 * (len(ttfts) - 1))], statistics.median(totals)))
    finally:
        code = server.stop(timeout=60)
        if not args.url and code != 0:
            failures.append("server exit code %r" % code)
    for f in failures[:30]:
        print("FAIL", f)
    print("%d failures" % len(failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
