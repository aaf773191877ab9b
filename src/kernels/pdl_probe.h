// A two-kernel probe of programmatic dependent launch (pdl.cuh): shows whether the second kernel of a stream
// really starts before the first has finished, in eager launches and in graphs (GPU test, launch overhead); and a
// delayed writer for testing pre-wait reads.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

namespace ds::kernels {

bool pdl_enabled();

// Kernel A (one CTA) spins for spin_ns, then writes its end time to t[0]; kernel B (launch_pdl) writes its start
// time to t[1] before pdl_wait and its time after pdl_wait to t[2] (globaltimer, ns). With PDL on, expect
// t[1] < t[0] <= t[2].
cudaError_t launch_pdl_probe(uint64_t* t, int64_t spin_ns, cudaStream_t stream);

// For tests of kernels that read before their PDL wait: a PDL kernel that lets the next one start at once, spins
// for spin_ns, then copies `bytes` (a multiple of 16, 16-byte aligned) from src to dst, so whatever the next kernel
// read of dst before its wait is stale.
cudaError_t launch_pdl_delayed_copy(void* dst, const void* src, int64_t bytes, int64_t spin_ns, cudaStream_t stream);

}  // namespace ds::kernels
