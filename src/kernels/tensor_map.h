// The driver's tensor-map encoder (cuTensorMapEncodeTiled) reached through the runtime's driver entry point, so
// kernels that load TMA boxes link no libcuda themselves. Host-side only.
#pragma once
#include <cstdint>

#include <cuda.h>  // CUtensorMap and its enums (types only)

namespace ds::kernels {

using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                   const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                   CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
// nullptr when the driver has none (then TMA kernels fall back or refuse).
EncodeTiledFn encode_tiled();

// The 2D map every TMA kernel here uses: `rows` rows of `cols` elements of `type` at `base`, `row_stride` bytes apart,
// read in boxes of box_cols x box_rows with the 128-byte swizzle and 256-byte L2 promotion, zeros past the edges.
// False when the driver has no encoder or refuses the layout.
bool encode_2d_swizzle128(CUtensorMap* out, CUtensorMapDataType type, const void* base, uint64_t cols, uint64_t rows,
                          uint64_t row_stride, uint32_t box_cols, uint32_t box_rows);

}  // namespace ds::kernels
