#!/usr/bin/env python3
"""Where a kernel's warps wait, instruction by instruction, from ncu's source page.

  ncu ... --section WarpStateStats --section SourceCounters -o REP <program>
  ncu -i REP.ncu-rep --page source --print-source sass --csv > PAGE.csv
  python3 scripts/ncu_source_top.py PAGE.csv [TOP]

Prints, per kernel in the page: the warp-state samples by stall reason, the share of 'no_instruction' stalls (high
where ptxas branched around code inside an unrolled loop: 15.8% of the MHA prefill's samples before session 65's fix,
0.7% after), and the TOP instructions by samples (address, executions, SASS, the three largest reasons). The PTX does
not show such branches (ptxas makes them), so the source page is the place to look.
"""
import csv
import sys


def kernels(path):
    rows = list(csv.reader(open(path)))
    i = 0
    while i < len(rows):
        if rows[i] and rows[i][0] == "Kernel Name":
            name, hdr, data = rows[i][1], rows[i + 1], []
            i += 2
            while i < len(rows) and not (rows[i] and rows[i][0] == "Kernel Name"):
                if len(rows[i]) == len(hdr):
                    data.append(rows[i])
                i += 1
            yield name, hdr, data
        else:
            i += 1


def num(x):
    try:
        return int(x)
    except ValueError:
        return 0


def main():
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    for name, hdr, data in kernels(sys.argv[1]):
        ix = {h: k for k, h in enumerate(hdr)}
        samp = ix["Warp Stall Sampling (All Samples)"]
        execd = ix.get("Instructions Executed")
        reasons = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
        total = sum(num(r[samp]) for r in data) or 1
        print(f"== {name[:150]}\n   {total} samples over {len(data)} instructions")
        by = sorted(((sum(num(r[ix[h]]) for r in data), h[6:]) for h in reasons), reverse=True)[:8]
        print("   by reason: " + ", ".join(f"{h} {100 * v / total:.1f}%" for v, h in by))
        no_inst = sum(num(r[ix["stall_no_inst"]]) for r in data) if "stall_no_inst" in ix else 0
        print(f"   no_instruction (fetch after branches, i-cache): {100 * no_inst / total:.1f}%")
        for r in sorted(data, key=lambda r: -num(r[samp]))[:top]:
            s = num(r[samp])
            rs = sorted(((num(r[ix[h]]), h[6:]) for h in reasons), reverse=True)[:3]
            ex = r[execd] if execd is not None else "?"
            print(f"   {r[0][-6:]} {100 * s / total:5.1f}% x{ex:>9}  {r[1].strip()[:64]:64s} "
                  + " ".join(f"{h}:{v}" for v, h in rs if v))


if __name__ == "__main__":
    main()
