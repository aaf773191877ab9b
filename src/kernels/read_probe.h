// A pure weight-read probe for the benchmarks (not an op): streams `bytes` of device memory once and keeps
// nothing, the floor a weight-streaming kernel of that size can reach from the same launch (PDL, one wave).
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

namespace ds::kernels {

// Reads [p, p + bytes) (16-byte aligned, bytes % 16 == 0) with 16-byte non-caching loads, 8 in flight per
// thread, grid-strided over ctas_per_sm CTAs per SM of 256 threads; writes *sink only when the xor of
// everything read equals `never` (so the loads are kept). Launched with launch_pdl: the loads start before the
// PDL wait, as a weight stream may (the next launch can start while this one reads), or with wait_first after
// it, as loads of anything an earlier kernel wrote must.
cudaError_t launch_read_probe(const void* p, int64_t bytes, uint32_t* sink, uint32_t never, int ctas_per_sm,
                              bool wait_first, cudaStream_t stream);

// The grid barrier a one-launch (persistent) decode layer would put where today's kernels hand over through PDL:
// ctas_per_sm CTAs of 256 threads per SM (all resident, else cudaErrorCooperativeLaunchTooLarge) run `phases` phases;
// phase k reads `bytes` (slice k % slices of p, slices * bytes long) like launch_read_probe and ends at a grid-wide
// barrier (an arrival counter and a generation word in sync[0..1]: zero them once, they are left ready for the next
// launch). ahead: the next phase's first round of loads is issued before the barrier (weights staged ahead of it).
// Time per phase against launch_read_probe(wait_first) of the same bytes per launch = barrier vs launch handoff.
cudaError_t launch_barrier_probe(const void* p, int64_t bytes, int slices, int phases, uint32_t* sync, uint32_t* sink,
                                 uint32_t never, int ctas_per_sm, bool ahead, cudaStream_t stream);

}  // namespace ds::kernels
