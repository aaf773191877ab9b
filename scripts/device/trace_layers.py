#!/usr/bin/env python3
"""Per-layer picture of traced decode-graph replays (cupti_trace CSVs, scripts/device/trace.sh), for comparing two runs
kernel by kernel: per CSV and each of its last N replays with the most kernels, the layer period (from one layer's
anchor kernel, mla_absorb_prep by default, to the next) and, for each kernel position within a layer, the median start
and end (us from the layer's anchor) over the middle layers (the first two and the last skipped); then the replay's
split: head -> layer 0, layer 0, layer 1, layers 2-26, last layer -> end.
Usage: trace_layers.py NAME CSV [NAME CSV ...] [--replays N] [--anchor SUBSTR]  (session 48 compared b1 alone with
b1 beside graphs 2-8 so)."""
import argparse, collections, csv, re, statistics, subprocess

ap = argparse.ArgumentParser()
ap.add_argument("pairs", nargs="+")
ap.add_argument("--replays", type=int, default=2)
ap.add_argument("--anchor", default="mla_absorb_prep")
a = ap.parse_args()
if len(a.pairs) % 2:
    raise SystemExit("give NAME CSV pairs")


def replays(path, n):
    rows = list(csv.DictReader(open(path)))
    count = collections.Counter(r["correlation"] for r in rows if r["graph_id"] != "0")
    most = max(count.values())
    last = sorted(int(k) for k, v in count.items() if v == most)[-n:]
    return [sorted((r for r in rows if r["correlation"] == str(k)), key=lambda r: int(r["start_ns"])) for k in last]


runs = [(a.pairs[i], replays(a.pairs[i + 1], a.replays)) for i in range(0, len(a.pairs), 2)]
names = sorted({r["name"] for _, rs in runs for st in rs for r in st})
dem = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.split("\n")
short = {n: re.sub(r"\(.*$", "", d.replace("(anonymous namespace)::", "")).replace("ds::kernels::", "")
         .replace("void ", "")[:46] for n, d in zip(names, dem)}
for name, rs in runs:
    for st in rs:
        b = int(st[0]["start_ns"])
        anchors = [i for i, r in enumerate(st) if a.anchor in short[r["name"]]]
        at = [(int(st[i]["start_ns"]) - b) / 1e3 for i in anchors]
        end = (max(int(r["end_ns"]) for r in st) - b) / 1e3
        print("%s: %d layers, span %.1f us; head -> layer 0 %.2f, layer 0 %.2f, layer 1 %.2f, layers 2-%d %.2f, "
              "last layer -> end %.2f" % (name, len(anchors), end, at[0], at[1] - at[0], at[2] - at[1],
                                          len(at) - 1, at[-1] - at[2], end - at[-1]))
        per, periods = collections.defaultdict(list), []
        for li in range(2, len(anchors) - 1):
            a0 = int(st[anchors[li]]["start_ns"])
            for j, r in enumerate(st[anchors[li]:anchors[li + 1]]):
                per[(j, short[r["name"]], r["grid"])].append(
                    ((int(r["start_ns"]) - a0) / 1e3, (int(r["end_ns"]) - a0) / 1e3))
            periods.append((int(st[anchors[li + 1]]["start_ns"]) - a0) / 1e3)
        print("   layer period median %.2f mean %.2f" % (statistics.median(periods), statistics.mean(periods)))
        for k, v in sorted(per.items()):
            print("   %2d %-46s g%4s n%2d start %7.2f end %7.2f" % (
                k[0], k[1], k[2], len(v), statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)))
