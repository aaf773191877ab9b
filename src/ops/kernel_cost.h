// The kernel benchmark's CUDA-free half (dserve_kernel_bench, ops/cuda/kernel_bench.cpp): DeepSeek-V2-Lite /
// V3 dimensions and their linear layers, counted FLOPs and bytes per op, the roofline against measured
// ceilings, the case filter, the command line and the CSV/text row format. Unit-tested on the CPU.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace ds::kbench {

// What a kernel must do at least: arithmetic (FLOPs, multiply-add = 2) and DRAM traffic (each input read
// once, each output written once; bf16 = 2 bytes, f32/i32 = 4).
struct Cost {
  double flops = 0;
  double bytes = 0;
};

// Ceilings measured in the same run: device-to-device copy (bytes read + written per second) and a large
// cuBLASLt bf16 GEMM (FLOP/s).
struct Ceilings {
  double copy_bytes_per_s = 0;
  double gemm_flops_per_s = 0;
};

struct Roofline {
  double time_s = 0;          // max(flops / gemm ceiling, bytes / copy ceiling)
  bool compute_bound = false;  // the FLOP term is the larger one
  double fraction = 0;        // time_s / measured time (1 = at the roofline); 0 when unknown
};
Roofline roofline(const Cost& c, const Ceilings& ceil, double measured_s);

// Model dimensions (from the Hugging Face configs in tests/data/configs; kernel_cost_test checks them).
struct ModelDims {
  std::string name;  // "v2-lite", "v3"
  int64_t hidden = 0, heads = 0, q_lora_rank = 0 /* 0: q_proj */, kv_lora_rank = 0;
  int64_t qk_nope = 0, qk_rope = 0, v_head = 0;
  int64_t intermediate = 0, moe_intermediate = 0;
  int n_routed = 0, n_shared = 0, top_k = 0, n_group = 1, topk_group = 1;
  int64_t vocab = 0;
  bool sigmoid = false;  // V3: sigmoid scores with noaux_tc; V2-Lite: softmax greedy
  float routed_scaling = 1.0f;
  bool norm_topk = false;
};
ModelDims deepseek_v2_lite();
ModelDims deepseek_v3();

// One nn.Linear of a decoder layer (or lm_head): weight [out, in].
struct LinearLayer {
  std::string name;
  int64_t in = 0, out = 0;
};
// Every distinct linear of the model that runs through ops.linear in bf16 (router excluded: fp32 logits).
std::vector<LinearLayer> linear_layers(const ModelDims& m);

// ---- counted cost per op (shapes as the ops see them) ----
Cost linear_cost(int64_t M, int64_t in, int64_t out);
// Absorbed MLA decode: batch sequences of `context` cached rows of head_dim (latent | rope) values, one query
// token each; value = first v_dim columns. Each cached row is read once for all heads.
Cost mla_decode_cost(int64_t batch, int64_t context, int64_t heads, int64_t head_dim = 576, int64_t v_dim = 512);
// V3.2 lightning indexer: batch sequences of `context` cached index keys of `dim` bf16 values, each with q_len query
// rows (the last at position context - 1; decode: 1) of `heads` query heads (q [rows, heads, dim], weights [rows,
// heads] f32); row i scores its n_i = context - q_len + i + 1 positions and writes its top min(topk, n_i) (i32). Keys
// count once a sequence; the scores' scratch is the kernel's business, not counted.
Cost indexer_cost(int64_t batch, int64_t context, int64_t heads, int64_t dim, int64_t topk, int64_t q_len = 1);
// MHA-form MLA prefill of one causal sequence of `tokens` (no cached prefix): q [T, H, nope + rope],
// kv [T, H, nope + v], the shared rope key [T, rope] (read from the context rows), out [T, H, v].
Cost mla_prefill_cost(int64_t tokens, int64_t heads, int64_t nope = 128, int64_t rope = 64, int64_t v = 128);
// Routed experts of one MoE layer: gate|up [2I, d] and down [d, I] of each of `active_experts` read once, x in,
// out written, plus ids/weights; FLOPs of tokens * top_k expert MLPs. The roofline of a fused kernel.
Cost moe_cost(int64_t tokens, int top_k, double active_experts, int64_t hidden, int64_t inter);
// residual += x; out = rms_norm(residual) * w.
Cost add_rms_norm_cost(int64_t tokens, int64_t n);
// rope on the rope dims of q [T, H, nope + rope] and of the new latent row's rope part, then the latent row
// [T, kv_lora + rope] stored into its cache slot.
Cost rope_cache_cost(int64_t tokens, int64_t heads, int64_t rope = 64, int64_t latent_row = 576);
Cost silu_mul_cost(int64_t tokens, int64_t inter);
// Router logits [T, E] f32 (+ bias) -> ids [T, K] i32, weights [T, K] f32.
Cost moe_route_cost(int64_t tokens, int experts, int top_k);
// ids [T * K] -> counts/offsets/cursor [E], row_of [T * K], src_token [T * K].
Cost moe_permute_cost(int64_t tokens, int top_k, int experts);
// out[t] = sum_k w[t, k] * y[row_of[t, k]]: y [T * K, d] bf16 read, out [T, d] written.
Cost moe_combine_cost(int64_t tokens, int top_k, int64_t hidden);
// f32 logits [T, V] -> f32 log-probabilities.
Cost log_softmax_cost(int64_t tokens, int64_t vocab);

// Expected number of distinct experts hit by `tokens` tokens choosing top_k distinct experts uniformly.
double expected_active_experts(int64_t tokens, int experts, int top_k);

// ---- command line ----
struct Options {
  std::string csv;     // --csv PATH ("" = none)
  std::string filter;  // --filter SUBSTR[|SUBSTR...]: only cases whose name contains one of them
  bool quick = false;  // --quick: fewer sizes and repetitions
  bool list = false;   // --list: print case names only (no GPU work)
  int reps = 0;        // --reps N: timed repetitions (0 = default: 15, quick 5)
};
Result<Options> parse_args(int argc, const char* const* argv);
std::string usage();

// A case's name is "op model shape" (e.g. "linear v3 q_b M=64 K=1536 N=24576"); --filter selects names that
// contain any of its '|'-separated substrings ("" selects everything).
bool matches_filter(const std::string& name, const std::string& filter);

// ---- rows ----
struct Row {
  std::string op, model, shape;
  double us = 0;            // ours: median time per call in microseconds (0 = failed)
  Cost cost;
  std::string baseline;     // what the baseline is ("cublaslt-default", "reference", "d2d-copy", ...)
  double baseline_us = 0;   // 0 = none / failed
  double max_rel = -1;      // ours vs baseline output, when both compute the same thing (-1 = not compared)
  std::string status = "ok";  // "ok" or a one-line failure reason (no commas)
  std::string name() const { return op + " " + model + " " + shape; }
};
std::string csv_header();
std::string csv_line(const Row& r, const Ceilings& c);
std::string text_line(const Row& r, const Ceilings& c);
// Median of a non-empty sample (upper median for even sizes).
double median(std::vector<double> v);

}  // namespace ds::kbench
