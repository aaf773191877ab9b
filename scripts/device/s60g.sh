#!/usr/bin/env bash
# Session 60, last call: the final select (one block a token; the cluster split of s60f measured and removed) on the
# indexer cases with a row past the 40960 keys staged in shared memory, both scoring paths, + memcheck.
set -u
source "$(dirname "$0")/lib.sh"
gtest_run idx 200 '*IndexerTopk*'
grep -E "^ERR indexer|FAILED|Failure" "$OUT/idx.log" | head -20
memcheck_run idx_mc 200 '*IndexerTopk*'
