// The device-to-device copy bandwidth of the current GPU (bytes read + written per second): the memory roofline
// the benchmarks and timing tests divide by (../shared/DEVICE.md), measured in the same run rather than assumed
// (the H100 copies at ~2.99 TB/s, the H200 at ~4.22).
#pragma once
#include <cstddef>

#include <cuda_runtime.h>

namespace ds {

// Median of `reps` timed cudaMemcpyAsync copies of `bytes` on `stream` (after three untimed ones), from two
// buffers of its own (freed before returning).
double measure_copy_bandwidth(cudaStream_t stream, size_t bytes = size_t{1} << 30, int reps = 10);

}  // namespace ds
