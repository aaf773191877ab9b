#!/usr/bin/env python3
"""Renders a dserve_kernel_bench CSV as the markdown table of BENCHMARKS.md (one row per case; the ceilings
measured in the run go in the caption). Usage: kernel_table.py KERNELS.csv [--filter SUBSTR] [--device NAME]
[--date YYYY-MM-DD]"""
import argparse
import csv


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--filter", default="")
    ap.add_argument("--device", default="H100 80GB HBM3")
    ap.add_argument("--date", default="")
    a = ap.parse_args()
    rows = list(csv.DictReader(open(a.csv)))
    ceil = [r for r in rows if r["op"] == "ceiling"]
    copy = max(float(r["copy_gbps"]) for r in ceil)
    gemm = max(float(r["gemm_tflops"]) for r in ceil)
    print(f"Ceilings measured in the same run ({a.device}, {a.date}): copy {copy:.0f} GB/s, "
          f"cuBLASLt bf16 GEMM {gemm:.0f} TFLOP/s.\n")
    print("| op | model | shape | ours (us) | TFLOP/s | GB/s | bound | roofline fraction | baseline | baseline (us) | ours vs baseline |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["op"] == "ceiling" or a.filter not in r["op"] + " " + r["shape"]:
            continue
        sp = r["speedup_vs_baseline"]
        print(f"| {r['op']} | {r['model']} | {r['shape']} | {float(r['ours_us']):.1f} | {float(r['tflops']):.1f} | "
              f"{float(r['gbps']):.0f} | {r['bound']} | {float(r['roofline_frac']):.2f} | {r['baseline']} | "
              f"{float(r['baseline_us']):.1f} | {float(sp):.2f}x |" if sp else
              f"| {r['op']} | {r['model']} | {r['shape']} | {float(r['ours_us']):.1f} | {float(r['tflops']):.1f} | "
              f"{float(r['gbps']):.0f} | {r['bound']} | {float(r['roofline_frac']):.2f} | — | — | — |")


if __name__ == "__main__":
    main()
