#!/usr/bin/env python3
"""Summarises a cupti_trace CSV: the last decode steps (graph launches with the most kernels, plus the kernels
launched outside the graph until the next one: sampling), step wall time, kernel busy time, gaps, and the time
per kernel name in one step."""
import collections, csv, re, subprocess, sys

rows = list(csv.DictReader(open(sys.argv[1])))
rows = [r for r in rows if not r["name"].startswith("memcpy ")]  # cupti_trace's copy rows: kernels only here
for r in rows:
    for k in ("start_ns", "end_ns", "graph_id", "correlation", "grid", "block"):
        r[k] = int(r[k])
rows.sort(key=lambda r: r["start_ns"])
names = sorted({r["name"] for r in rows})
try:
    dem = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.split("\n")
except OSError:
    dem = names
short = {}
for n, d in zip(names, dem):
    d = d or n
    d = d.replace("(anonymous namespace)::", "")
    d = re.sub(r"\(.*$", "", d)           # drop parameters
    d = re.sub(r"^void ", "", d)
    d = d.replace("ds::kernels::", "").replace("(anonymous namespace)::", "")
    short[n] = d[:90]

if "--all" in sys.argv:
    # Eager work (prefill): every kernel of the trace, by name, and how much of the span the GPU was busy.
    per = collections.defaultdict(lambda: [0, 0.0])
    busy, prev_end = 0.0, 0
    for r in rows:
        e = per[short[r["name"]]]
        e[0] += 1
        t = (r["end_ns"] - max(r["start_ns"], prev_end)) / 1e3
        e[1] += max(t, 0.0)
        busy += max(t, 0.0)
        prev_end = max(prev_end, r["end_ns"])
    span = (rows[-1]["end_ns"] - rows[0]["start_ns"]) / 1e3 if rows else 0.0
    print(f"whole trace: span {span/1e3:.1f} ms, kernel busy {busy/1e3:.1f} ms ({100*busy/max(span,1e-9):.0f}%), {len(rows)} kernels")
    print("by kernel name: total ms, share, launches, mean us")
    for name, (cnt, us) in sorted(per.items(), key=lambda kv: -kv[1][1])[:40]:
        print(f"  {us/1e3:9.2f} ms  {100*us/max(busy,1e-9):5.1f}%  x{cnt:<6d} {us/max(cnt,1):8.2f} us  {name}")
    sys.exit(0)

launches = collections.OrderedDict()
for r in rows:
    if r["graph_id"]:
        launches.setdefault(r["correlation"], []).append(r)
if not launches:
    print("no graph-launched kernels in the trace"); sys.exit(0)
big = max(len(v) for v in launches.values())
steps = [c for c, v in launches.items() if len(v) == big]
print(f"{len(launches)} graph launches; {len(steps)} with {big} kernels (decode steps)")
use = steps[-3:]
per_name = collections.defaultdict(lambda: [0, 0.0])
for c in use:
    ks = launches[c]
    t0 = ks[0]["start_ns"]
    nxt = [r for r in rows if r["start_ns"] > ks[-1]["end_ns"] and r["graph_id"] and r["correlation"] != c]
    t_next = nxt[0]["start_ns"] if nxt else ks[-1]["end_ns"]
    step = [r for r in rows if t0 <= r["start_ns"] < t_next]
    busy = sum(r["end_ns"] - r["start_ns"] for r in step)
    graph_span = ks[-1]["end_ns"] - t0
    gaps = [b["start_ns"] - a["end_ns"] for a, b in zip(ks, ks[1:])]
    print(f"step corr={c}: graph span {graph_span/1e3:.1f} us, launch-to-next-launch {(t_next-t0)/1e3:.1f} us, "
          f"kernel time {busy/1e3:.1f} us in {len(step)} kernels ({len(step)-len(ks)} outside the graph), "
          f"in-graph gaps sum {sum(gaps)/1e3:.1f} us (median {sorted(gaps)[len(gaps)//2]/1e3:.2f} us, "
          f"negative = overlap: {sum(1 for g in gaps if g < 0)})")
    prev_end = 0
    for r in step:
        e = per_name[short[r["name"]]]
        e[0] += 1
        # With PDL a kernel starts early and waits: count it from the previous kernel's end.
        e[1] += (r["end_ns"] - max(r["start_ns"], prev_end)) / 1e3
        prev_end = max(prev_end, r["end_ns"])
n = len(use)
print(f"\nper decode step (mean of {n}): time from the previous kernel's end to this one's end, by kernel name: total us, share, launches, mean us")
tot = sum(v[1] for v in per_name.values()) / n
for name, (cnt, us) in sorted(per_name.items(), key=lambda kv: -kv[1][1]):
    print(f"  {us/n:9.1f} us  {100*us/n/tot:5.1f}%  x{cnt//n:<4d} {us/max(cnt,1):7.2f} us  {name}")
print(f"  {tot:9.1f} us  total kernel time")
# The gaps by the kernel that follows them (launch latency, dependency waits).
gap_by = collections.defaultdict(list)
ks = launches[use[-1]]
for a, b in zip(ks, ks[1:]):
    gap_by[short[b["name"]]].append((b["start_ns"] - a["end_ns"]) / 1e3)
print("\ngap before each kernel (last step): name, count, sum us, mean us")
for name, g in sorted(gap_by.items(), key=lambda kv: -sum(kv[1]))[:15]:
    print(f"  {sum(g):8.1f} us  x{len(g):<4d} {sum(g)/len(g):6.2f} us  {name}")
# Boundaries by what lies between two kernels in the graph (session 27): node ids of consecutive kernels differ by 1
# when nothing does, by more when non-kernel nodes (the allocator's alloc / free nodes without the graph arena) do;
# only a kernel-to-kernel edge can be programmatic (an early start).
if ks and "graph_node" in ks[0]:
    by_id = sorted(ks, key=lambda r: int(r["graph_node"]))
    dist = collections.defaultdict(list)
    for a, b in zip(by_id, by_id[1:]):
        dist[min(int(b["graph_node"]) - int(a["graph_node"]), 3)].append((b["start_ns"] - a["end_ns"]) / 1e3)
    print("\nstart - previous end by node-id distance (last step; 3 = three or more): pairs, median us, share > 0.3 us early")
    for d, g in sorted(dist.items()):
        g.sort()
        print(f"  {d}: {len(g):4d}  {g[len(g)//2]:6.2f} us  {sum(x < -0.3 for x in g) / len(g):.2f}")
# --timeline SUBSTR [OCC]: one layer's kernels in the last step, from the OCC-th (default 10th) kernel whose name
# contains SUBSTR to the next one: start and end from the first's start, duration, and start - previous end.
if "--timeline" in sys.argv:
    i = sys.argv.index("--timeline")
    sub = sys.argv[i + 1].replace(" ", "")  # spaces ignored on both sides (the argument passes through a shell)
    occ = int(sys.argv[i + 2]) if len(sys.argv) > i + 2 else 10
    ks = sorted(launches[use[-1]], key=lambda r: r["start_ns"])
    marks = [j for j, r in enumerate(ks) if sub in short[r["name"]].replace(" ", "")]
    if len(marks) <= occ + 1:
        print(f"\ntimeline: only {len(marks)} kernels match {sub!r}")
    else:
        a, b = marks[occ], marks[occ + 1]
        t0 = ks[a]["start_ns"]
        print(f"\ntimeline of kernels {a}..{b} (last step): start, end, duration, start - previous end (us), grid, block")
        prev_end = None
        for r in ks[a:b + 1]:
            gap = "" if prev_end is None else f"{(r['start_ns'] - prev_end)/1e3:7.2f}"
            print(f"  {(r['start_ns']-t0)/1e3:7.2f} {(r['end_ns']-t0)/1e3:7.2f} {(r['end_ns']-r['start_ns'])/1e3:6.2f} "
                  f"{gap:>7} {r['grid']:6d} {r['block']:5d}  {short[r['name']]}")
            prev_end = r["end_ns"] if prev_end is None else max(prev_end, r["end_ns"])

# --links: per kernel name and grid in the last step, the median over its launches (a decode step's layers) of its end
# minus the latest end of every kernel that started before it (its cost on the chain) and of its start minus that same
# end (negative: launched early, waiting). Session 41 separated a kernel's own time from when it could start this way
# (the MoE-summing norm +3.7 us, starting at the down walk's end; a plain norm +1.3 us, starting 3.3 us early).
if "--links" in sys.argv:
    ks = sorted(launches[use[-1]], key=lambda r: r["start_ns"])
    link = collections.defaultdict(list)
    prev_end = None
    for r in ks:
        if prev_end is not None:
            link[f"{short[r['name']]} grid {r['grid']}"].append(((r["end_ns"] - prev_end) / 1e3,
                                                                  (r["start_ns"] - prev_end) / 1e3))
        prev_end = r["end_ns"] if prev_end is None else max(prev_end, r["end_ns"])
    print("\nlinks (last step): launches, median end after the latest earlier end, median start after it (us)")
    for name, v in sorted(link.items(), key=lambda kv: -len(kv[1])):
        ends, starts = sorted(e for e, _ in v), sorted(s for _, s in v)
        print(f"  x{len(v):<4d} end {ends[len(ends)//2]:7.2f}  start {starts[len(starts)//2]:7.2f}  {name}")
