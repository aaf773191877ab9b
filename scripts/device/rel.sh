#!/usr/bin/env bash
# Reliability on the GPU (issue 9): the NaN-logit / step-error fault-injection e2e tests on --device cuda (demo
# model), then the overload soak (tests/server/soak.py) for ~80 s on the DeepSeek-V2-Lite config with dummy
# weights: bench-serving at rate inf against a small --max-queued-requests (some 503s) plus clients that leave
# mid-stream; checks counts add up, the page pool returns to idle, host RSS stays bounded. Binary: .devbin/dserve.
# Logs under $OUT (rel_faults.log, soak.json, soak_stdout.log); keeps going after a failure.
set -u
source "$(dirname "$0")/lib.sh"
export PYTHONUNBUFFERED=1
BIN=$PWD/$B/dserve
start=$(date +%s)
DSERVE_TEST_SERVE_ARGS="--device cuda" timeout 60 python3 tests/server/reliability_test.py "$BIN" \
  NanLogitsTest StepErrorTest > "$OUT/rel_faults.log" 2>&1
echo "== reliability faults on cuda rc=$? ($(( $(date +%s) - start )) s)"; tail -5 "$OUT/rel_faults.log"
start=$(date +%s)
timeout ${REL_SOAK_LIMIT:-420} python3 tests/server/soak.py --binary "$BIN" --duration ${REL_SOAK_SECONDS:-80} --concurrency 128 \
  --max-queued 32 --prompts-per-round 512 --input-len 512 --output-len 128 --vocab 100000 --disconnectors 4 \
  --rss-bound-mib 512 --json-out "$OUT/soak.json" -- \
  --device cuda --model-path tests/data/configs/deepseek-v2-lite.json --load-format dummy \
  --max-running-requests 256 --max-total-tokens 100000 > "$OUT/soak_stdout.log" 2>&1
echo "== soak on cuda rc=$? ($(( $(date +%s) - start )) s)"
grep -E '"(requests|completed|refused_503|other_errors|disconnected_streams|p99_e2e_latency_ms_worst_round|rss_kib_before|rss_kib_after|rss_growth_mib|pool_idle|num_retractions|server_exit_code)"' "$OUT/soak.json" 2>/dev/null || tail -20 "$OUT/soak_stdout.log"
grep -A3 '"failures"' "$OUT/soak.json" 2>/dev/null
