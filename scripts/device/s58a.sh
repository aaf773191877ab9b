#!/usr/bin/env bash
# Session 58's first call: the GPU suite (with session 57's SpeculativeGpu and session 58's verify graphs:
# CudaGraphTest.VerifyGraphsMatchEagerAbsorbedRows, SpeculativeGpu with and without graphs), then if time is left the
# speculative serving comparison (specserve.sh).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
SUITE_LIMIT=150 bash "$D/gpusuite.sh"
grep -h "drafts accepted\|GRAPH\|DRAFTGRAPH" "$OUT"/*.log | head -30
