#!/usr/bin/env bash
# ASan + UBSan build of everything but CUDA (clang), the CPU test suite under it (less the tests labelled
# slow and the transformers-fixture cases of the two FP8 fixtures made for the CUDA backend's native FP8 shapes,
# which run in the normal build: on the CPU they take v3_fp8's code paths at larger sizes), then every libFuzzer
# target on its corpus (fuzz/corpus/<target>; new findings are not committed) for a fixed number of runs from a
# fixed seed, so that a CI result is reproducible: FUZZ_RUNS per target (default 200000), FUZZ_SEED (default 1), at
# most 120 s a target (a guard: every target finishes its runs before it, the slowest, fuzz_http, in ~65 s on two
# cores). Exits non-zero on any test failure or fuzzer crash.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${SAN_BUILD_DIR:-build-asan}
FUZZ_RUNS=${FUZZ_RUNS:-200000}
FUZZ_SEED=${FUZZ_SEED:-1}
# Line tables only (file:line in sanitizer reports, inlined frames included): full -g costs ~12% more compile time.
CC=clang CXX=clang++ cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDSERVE_CUDA=OFF \
  -DDSERVE_SANITIZE=ON "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -gline-tables-only -DNDEBUG" >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export DSERVE_TEST_SANITIZED=1  # the server load tests scale their load down and their waits up (tests/server/harness.py)
(cd "$BUILD_DIR" && ctest -L cpu -LE slow -E 'FixtureTest\..*"v3_fp8_(h256|mla128)"' --output-on-failure \
  -j "$(nproc)" --timeout 1800)
export DSERVE_FUZZ_TOKENIZER=tests/data/downloads/deepseek_v3_tokenizer
status=0
for target in "$BUILD_DIR"/fuzz_*; do
  name=$(basename "$target")
  corpus=fuzz/corpus/${name#fuzz_}
  work=$(mktemp -d)
  [ -d "$corpus" ] && cp -r "$corpus"/. "$work"/
  echo "fuzz: $name, $FUZZ_RUNS runs from seed $FUZZ_SEED"
  if ! "$target" -runs="$FUZZ_RUNS" -seed="$FUZZ_SEED" -max_total_time=120 -max_len=65536 -timeout=20 -rss_limit_mb=4096 \
      -print_final_stats=1 "$work" > "$work.log" 2>&1; then
    echo "fuzz: $name FAILED"; tail -40 "$work.log"; status=1
  else
    grep -E "stat::number_of_executed_units|cov:" "$work.log" | tail -2
  fi
  rm -rf "$work" "$work.log"
done
exit $status
