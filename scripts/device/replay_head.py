#!/usr/bin/env python3
"""The head of a traced graph replay (cupti_trace CSV, scripts/device/trace.sh): for the last N replays with the most
kernels, the first K kernels (start and end, us from the replay's first start) and the span; --short prints one line a
replay instead (first kernel's end, second kernel's start, span, kernels): the graph's start stall of session 46.
Where the CSV has them (session 48's tracer): each kernel's stream and hardware channel, and the memory copies that
ended in the 100 us before the replay's first kernel (its input copy).
Usage: replay_head.py CSV [--replays N] [--kernels K] [--short]"""
import argparse, collections, csv

ap = argparse.ArgumentParser()
ap.add_argument("csv")
ap.add_argument("--replays", type=int, default=1)
ap.add_argument("--kernels", type=int, default=3)
ap.add_argument("--short", action="store_true")
ap.add_argument("--streams", action="store_true", help="also count the replay's kernels per stream and channel")
a = ap.parse_args()
rows = list(csv.DictReader(open(a.csv)))
count = collections.Counter(r["correlation"] for r in rows if r["graph_id"] != "0")
if not count:
    raise SystemExit("  no graph replays in " + a.csv)
most = max(count.values())
for last in sorted((int(k) for k, v in count.items() if v == most))[-a.replays:]:
    st = sorted((r for r in rows if r["correlation"] == str(last)), key=lambda r: int(r["start_ns"]))
    b = int(st[0]["start_ns"])
    span = (max(int(r["end_ns"]) for r in st) - b) / 1e3
    if a.short:
        print("  first end %.2f, second start %.2f, span %.1f us, %d kernels" % (
            (int(st[0]["end_ns"]) - b) / 1e3, (int(st[1]["start_ns"]) - b) / 1e3, span, len(st)))
        continue
    where = lambda r: " s%s c%s" % (r["stream"], r["channel"]) if "stream" in r else ""
    for r in rows:
        if r["name"].startswith("memcpy ") and b - 100000 <= int(r["end_ns"]) <= b + 100000:
            print("  %8.2f %8.2f%s %s" % ((int(r["start_ns"]) - b) / 1e3, (int(r["end_ns"]) - b) / 1e3, where(r), r["name"]))
    for r in st[:a.kernels]:
        print("  %8.2f %8.2f%s %s" % ((int(r["start_ns"]) - b) / 1e3, (int(r["end_ns"]) - b) / 1e3, where(r),
                                     r["name"][:70]))
    print("  span %.1f us" % span)
    if a.streams and "stream" in st[0]:
        per = collections.Counter((r["stream"], r["channel"]) for r in st)
        print("  kernels per (stream, channel): " + ", ".join("s%s c%s: %d" % (k[0], k[1], v) for k, v in sorted(per.items())))
        if st[0].get("queued_ns", "0") != "0":
            print("  first kernel queued %.2f us, submitted %.2f us before its start" % (
                (b - int(st[0]["queued_ns"])) / 1e3, (b - int(st[0]["submitted_ns"])) / 1e3))
