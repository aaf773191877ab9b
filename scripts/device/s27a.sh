#!/usr/bin/env bash
# Session 27, first call: the whole GPU suite (incl. the PDL chain probe of session 26 and the new join probe,
# Pdl.JoinedStreamWaitsForBoth; PDLCHAIN / PDLJOIN lines), then the MoE / fixture GPU tests with
# DSERVE_PDL_JOIN_FENCE=0 and bench-one-batch V2-Lite FP8 (batch 1, 8) with the join fence on / off, alternating.
set -u
source "$(dirname "$0")/lib.sh"
OUT=$OUT/suite timeout 250 bash "$(dirname "$0")/gpusuite.sh"
grep -h "PDLCHAIN\|PDLJOIN" "$OUT"/suite/*.log
DSERVE_PDL_JOIN_FENCE=0 GTEST_FILTER='*Fixture*:*Moe*:Pdl.*' SUITE_LIMIT=160 OUT=$OUT/nofence timeout 170 \
  bash "$(dirname "$0")/gpusuite.sh"
for rep in 1 2; do
  AB_EXTRA="--quantization fp8" AB_BATCHES=1,8 AB_CONFIGS="base DSERVE_PDL_JOIN_FENCE=0" \
    OUT=$OUT/ab$rep bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
done
