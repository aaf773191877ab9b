#!/usr/bin/env bash
# Session 41, third call (~230 s; binaries from main + the DSERVE_MOE_JOIN_BEFORE_DOWN switch, the walk max 256 default):
# s41b's traces showed the MoE-summing norm starting only ~2 us after the side stream's shared down ended (a full
# graph edge: the event join), 3.7-3.8 us after the routed down, where the plain norm ends 1.3 us after o_proj.
# (1) the GPU suite with the side chain joined before the routed down (so a default flip is covered);
# (2) A/B two rounds bf16 / FP8 b1 / b8: default, jd (join before down), jdp (jd + the side stream at high priority);
# (3) traces of jd at batch 1, bf16 and FP8.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
DSERVE_MOE_JOIN_BEFORE_DOWN=1 SUITE_LIMIT=170 bash "$D/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
AB_BATCHES=1,8 AB_KINDS="bf16 fp8" AB_ROUNDS=2 AB_BINS="new jd jdp" AB_CFG_jd=DSERVE_MOE_JOIN_BEFORE_DOWN=1 \
  AB_CFG_jdp=DSERVE_MOE_JOIN_BEFORE_DOWN=1,DSERVE_STREAM_PRIORITY=2 bash "$D/abbin.sh"
for kind in bf16 fp8; do
  extra=""; [ "$kind" = fp8 ] && extra="--quantization fp8"
  DSERVE_MOE_JOIN_BEFORE_DOWN=1 OUT=$OUT/trace_jd_$kind TRACE_BS="1" TRACE_EXTRA="$extra" \
    TRACE_SUMMARY_ARGS="--timeline mla_absorb_prep 12" bash "$D/trace.sh" > "$OUT/trace_jd_$kind.txt" 2>&1
  echo "== trace jd $kind"; sed -n "/^timeline/,\$p" "$OUT/trace_jd_$kind.txt"
  xz -9 "$OUT/trace_jd_$kind/trace_bs1.csv"
done
