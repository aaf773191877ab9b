// Probes of programmatic dependent launch (pdl.cuh): whether the second kernel of a stream really starts before
// the first has finished, in eager launches and in graphs (GPU test, launch overhead); whether a third starts before
// the second has finished when the second itself started early (a decode step's chains); building blocks for a join of
// two streams; and a delayed writer for testing pre-wait reads.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

namespace ds::kernels {

bool pdl_enabled();

// Kernel A (one CTA) spins for spin_ns, then writes its end time to t[0]; kernel B (launch_pdl) writes its start
// time to t[1] before pdl_wait and its time after pdl_wait to t[2] (globaltimer, ns). With PDL on, expect
// t[1] < t[0] <= t[2].
cudaError_t launch_pdl_probe(uint64_t* t, int64_t spin_ns, cudaStream_t stream);

// Three kernels: A (one CTA) spins for spin_ns and writes its end time to t[0]; B (b_ctas CTAs of 256 threads,
// launch_pdl) writes the earliest start of its CTAs before pdl_wait to t[1] (t[1] must hold UINT64_MAX before the
// launch), then pdl_wait, pdl_launch_dependents, spins for spin_ns and writes its latest CTA end to t[2]; C
// (launch_pdl) writes its start before pdl_wait to t[3] and its time after it to t[4]. Expect t[1] < t[0] <= t[2]
// <= t[4]; t[3] < t[2] says that a kernel which itself started early still lets its successor start early.
cudaError_t launch_pdl_chain_probe(uint64_t* t, int b_ctas, int64_t spin_ns, cudaStream_t stream);

// Building blocks for probes across two streams (the side-stream join): a PDL kernel of one CTA that spins for
// spin_ns after its wait and writes its end time to end[0]; a PDL kernel that writes its start before pdl_wait to
// t[0] and its time after it to t[1].
cudaError_t launch_pdl_spin(uint64_t* end, int64_t spin_ns, cudaStream_t stream);
cudaError_t launch_pdl_stamp(uint64_t* t, cudaStream_t stream);

// For tests of kernels that read before their PDL wait: a PDL kernel that lets the next one start at once, spins
// for spin_ns, then copies `bytes` (a multiple of 16, 16-byte aligned) from src to dst, so whatever the next kernel
// read of dst before its wait is stale.
cudaError_t launch_pdl_delayed_copy(void* dst, const void* src, int64_t bytes, int64_t spin_ns, cudaStream_t stream);

}  // namespace ds::kernels
