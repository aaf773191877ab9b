#!/usr/bin/env bash
# Session 58's prepared first call (no device was lent in session 58, so all of this is unrun): the GPU suite, with
# the speculative cases written blind - CudaGraphTest.VerifyGraphsMatchEagerAbsorbedRows/* (verify graphs),
# CudaDraftGraphs.DraftsMatchAnEagerChain (MTP draft graphs), Fixtures/SpeculativeGpu.* (the CUDA engine with drafts:
# verify + draft graphs, eager, NGRAM, oracle drafts, against the CPU engine). Run as
# `all.sh s58a:190 specserve:240 s58c:130`. If SpeculativeGpu passes, drop the DSERVE_SPECULATIVE_CUDA gate
# (runner/batch_engine.cpp). `gtest_run spec 200 'Fixtures/SpeculativeGpu*'` alone gives its log.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
SUITE_LIMIT=150 bash "$D/gpusuite.sh"
grep -h "drafts accepted\|GRAPH\|DRAFTGRAPH" "$OUT"/*.log | head -30
