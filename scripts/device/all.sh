#!/usr/bin/env bash
# One device session: runs the named scripts/device/<name>.sh in order, each under its own time limit
# and output folder, so one failure does not stop the rest. Usage: all.sh name[:seconds] ...
# Only a few files come back from the device machine: every log ends up in $OUT/logs.tar.gz.
set -u
cd "$(dirname "$0")/../.."
FINAL_OUT=$OUT
ROOT_OUT=$(mktemp -d /tmp/devlogs.XXXX)
trap 'tar -C "$ROOT_OUT" -czf "$FINAL_OUT/logs.tar.gz" . ; cp "$ROOT_OUT"/*.csv "$FINAL_OUT"/ 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader | tee "$ROOT_OUT/gpu.txt"
for spec in "$@"; do
  name=${spec%%:*}; secs=${spec#*:}; [ "$secs" = "$spec" ] && secs=180
  mkdir -p "$ROOT_OUT/$name"
  start=$(date +%s)
  echo "######## $name (limit ${secs}s)"
  OUT="$ROOT_OUT/$name" timeout --kill-after=10 "$secs" bash "scripts/device/$name.sh" 2>&1 | tee "$ROOT_OUT/$name/console.txt"
  echo "######## $name rc=${PIPESTATUS[0]} ($(( $(date +%s) - start )) s)"
done
