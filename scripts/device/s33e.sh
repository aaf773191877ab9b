#!/usr/bin/env bash
# Session 33 (~150 s; binaries dserve, prev/dserve = main 21e6e56): s33d's bf16 A/B again with the order turned
# (s33d: the new binary with the walk off ran 0.03 ms slower than prev at batch 1 and 0.17 at batch 8 in both
# rounds, the walked down 0.01-0.02 faster than prev at batch 1): new (walk off), prev, wd (DSERVE_MOE_SMALL_WALK=1),
# three rounds.
set -u
source "$(dirname "$0")/lib.sh"
AB_KINDS=bf16 AB_ROUNDS=3 AB_BINS="new prev wd" AB_CFG_wd=DSERVE_MOE_SMALL_WALK=1 bash "$(dirname "$0")/abbin.sh"
