#!/usr/bin/env bash
# A/B of binaries: bench-one-batch (ab.sh: V2-Lite config, dummy weights, input 256 / output 32, graphs) with
# $B/prev/dserve and $B/dserve, alternating, AB_ROUNDS rounds (default 2); per round and binary each of AB_KINDS
# (default "fp8 bf16": --quantization fp8, then bf16) at AB_BATCHES (default 1,8). AB_BINS (default "prev new")
# names the order; a name other than prev / new is the new binary with the settings AB_CFG_<name> (e.g.
# AB_CFG_cap=DSERVE_X=1). AB_GREP: the lines kept (default: the runs and decode medians). Logs under $OUT/ab_<bin>_<round>/.
set -u
source "$(dirname "$0")/lib.sh"
for round in $(seq 1 "${AB_ROUNDS:-2}"); do
  for bin in ${AB_BINS:-prev new}; do
    dir=$B; [ "$bin" = prev ] && dir=$B/prev
    cfg_var="AB_CFG_$bin"
    cfg=${!cfg_var:-base}
    for kind in ${AB_KINDS:-fp8 bf16}; do
      extra=""; [ "$kind" = fp8 ] && extra="--quantization fp8"
      echo "-- round $round: $bin $kind"
      DEVBIN=$dir AB_EXTRA="$extra" AB_BATCHES=${AB_BATCHES:-1,8} AB_CONFIGS=$cfg OUT=$OUT/ab_${bin}_$round \
        bash "$(dirname "$0")/ab.sh" | grep -E "${AB_GREP:-^==|Decode\.  median}"
    done
  done
done
