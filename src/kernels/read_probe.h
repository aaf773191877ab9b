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

}  // namespace ds::kernels
