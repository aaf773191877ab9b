#!/usr/bin/env python3
"""The head of a traced graph replay (cupti_trace CSV, scripts/device/trace.sh): for the last N replays with the most
kernels, the first K kernels (start and end, us from the replay's first start) and the span; --short prints one line a
replay instead (first kernel's end, second kernel's start, span, kernels): the graph's start stall of session 46.
Usage: replay_head.py CSV [--replays N] [--kernels K] [--short]"""
import argparse, collections, csv

ap = argparse.ArgumentParser()
ap.add_argument("csv")
ap.add_argument("--replays", type=int, default=1)
ap.add_argument("--kernels", type=int, default=3)
ap.add_argument("--short", action="store_true")
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
    for r in st[:a.kernels]:
        print("  %8.2f %8.2f %s" % ((int(r["start_ns"]) - b) / 1e3, (int(r["end_ns"]) - b) / 1e3, r["name"][:70]))
    print("  span %.1f us" % span)
