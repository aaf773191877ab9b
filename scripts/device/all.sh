#!/usr/bin/env bash
# One device session: runs the named scripts/device/<name>.sh in order, each under its own time limit
# and output folder ($OUT/<name>/), so one failure does not stop the rest. Usage: all.sh name[:seconds] ...
set -u
cd "$(dirname "$0")/../.."
ROOT_OUT=$OUT
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader | tee "$ROOT_OUT/gpu.txt"
for spec in "$@"; do
  name=${spec%%:*}; secs=${spec#*:}; [ "$secs" = "$spec" ] && secs=180
  mkdir -p "$ROOT_OUT/$name"
  start=$(date +%s)
  echo "######## $name (limit ${secs}s)"
  OUT="$ROOT_OUT/$name" timeout --kill-after=10 "$secs" bash "scripts/device/$name.sh" 2>&1 | tee "$ROOT_OUT/$name/console.txt"
  echo "######## $name rc=${PIPESTATUS[0]} ($(( $(date +%s) - start )) s)"
done
