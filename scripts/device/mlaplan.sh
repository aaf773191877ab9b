#!/usr/bin/env bash
# Experiment (issue 6): the CUDA graphs' split-KV plan is made for a 4096-token context; at a 256-token context
# most split blocks are empty. ncu per-kernel time of a graph-replayed batch-1 decode step with the default plan
# and with DSERVE_GRAPH_PLAN_CONTEXT=256, plus bench-one-batch batch 1 / 8 both ways. Binary: .devbin/dserve.
set -u
source "$(dirname "$0")/lib.sh"
for plan in default 256; do
  mkdir -p "$OUT/$plan"
  if [ "$plan" = default ]; then unset DSERVE_GRAPH_PLAN_CONTEXT; else export DSERVE_GRAPH_PLAN_CONTEXT=$plan; fi
  echo "######## plan $plan"
  OUT="$OUT/$plan" PROF_EXTRA="" PROF_KERNELS=1400 bash scripts/device/prof.sh 2>&1 | grep -E "kernels|mla_|==" | head -8
  timeout 100 .devbin/dserve bench-one-batch --device cuda --model-path tests/data/configs/deepseek-v2-lite.json \
    --load-format dummy --batch-size 1,8 --input-len 256 --output-len 32 > "$OUT/$plan/b1b.log" 2>&1
  echo "== b1b rc=$?"; grep median "$OUT/$plan/b1b.log"
done
