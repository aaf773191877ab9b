#!/usr/bin/env bash
# Prepared in session 34 (~330 s; binaries dserve, ds_ops_cuda_gpu_test): the FP8 MoE down's activation
# quantization and the quantizations before FP8 small-M GEMMs (o_proj, shared down) with an early trigger
# (Fp8QuantParams::early_ok, on only under DSERVE_PDL_EARLY=1: written after the
# last device call of session 34, not yet run). (1) The fixture / graph / MoE FP8 tests, the early-trigger fixture
# test among them (it forces DSERVE_PDL_EARLY=1, so now the quantization's trigger too). (2) FP8 A/B, three rounds
# alternating: new (the defaults: pair and one-row norms early at one token) vs all (DSERVE_PDL_EARLY=1: at one
# token the same plus the down quantization's trigger; at batch 8 every trigger). Prediction: the down walk's CTAs
# become resident as the gate|up walk's exit instead of after quant_act's wait: ~1-2 us a layer at batch 1.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
GTEST_FILTER='FixtureGpu*:Fp8Fixture*:CudaGraph*:MoeFp8*' SUITE_LIMIT=150 bash "$D/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
grep -rh "early triggers" "$OUT" 2>/dev/null | sort | uniq
AB_KINDS=fp8 AB_ROUNDS=3 AB_BINS="new all" AB_CFG_all=DSERVE_PDL_EARLY=1 bash "$D/abbin.sh"
