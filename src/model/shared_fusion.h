// Shared-experts fusion (SGLang's, on unless --disable-shared-experts-fusion): a MoE layer's shared MLP cut along
// its intermediate dimension into n_shared_experts expert-sized MLPs, run as extra routed experts with weight 1
// (MoeRouting::shared_experts), so the grouped expert kernels stream the shared weights with the routed ones.
#pragma once
#include <vector>

#include "model/weights.h"

namespace ds {

// Whether `moe`'s shared MLP ([parts * inter, d] gate / up, [d, parts * inter] down) cuts into `parts` MLPs shaped
// and stored like its routed experts ([inter, d] / [d, inter], same dtype, block-FP8 scales the same way, the cut
// on scale-block boundaries). False names no error: the layer then runs its shared MLP apart.
bool can_split_shared(const MoeWeights& moe, int parts);

// The cut (can_split_shared must hold): part j has gate / up rows and down columns [j * inter, (j + 1) * inter) and
// their scale blocks. sum_j down_j(silu(gate_j x) * up_j x) = down(silu(gate x) * up x): each intermediate
// channel belongs to one part. Host tensors; the down halves are copies, the rest views of `moe`'s.
std::vector<MlpWeights> split_shared(const MoeWeights& moe, int parts);

}  // namespace ds
