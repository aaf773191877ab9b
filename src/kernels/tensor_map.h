// The driver's tensor-map encoder (cuTensorMapEncodeTiled) reached through the runtime's driver entry point, so
// kernels that load TMA boxes link no libcuda themselves. Host-side only.
#pragma once
#include <cuda.h>  // CUtensorMap and its enums (types only)

namespace ds::kernels {

using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                   const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                   CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
// nullptr when the driver has none (then TMA kernels fall back or refuse).
EncodeTiledFn encode_tiled();

}  // namespace ds::kernels
