// Counted FLOPs/bytes, rooflines, model dimensions, options and row formatting of dserve_kernel_bench
// (see kernel_cost.h). Byte counts are the minimum traffic of an ideal kernel, so a roofline fraction of 1
// means nothing is left to gain from memory or tensor-core throughput.
#include "ops/kernel_cost.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ds::kbench {

namespace {
constexpr double kBf16 = 2, kF32 = 4, kI32 = 4;
}

Roofline roofline(const Cost& c, const Ceilings& ceil, double measured_s) {
  Roofline r;
  const double tc = ceil.gemm_flops_per_s > 0 ? c.flops / ceil.gemm_flops_per_s : 0;
  const double tm = ceil.copy_bytes_per_s > 0 ? c.bytes / ceil.copy_bytes_per_s : 0;
  r.time_s = std::max(tc, tm);
  r.compute_bound = tc > tm;
  r.fraction = measured_s > 0 ? r.time_s / measured_s : 0;
  return r;
}

ModelDims deepseek_v2_lite() {
  ModelDims m;
  m.name = "v2-lite";
  m.hidden = 2048;
  m.heads = 16;
  m.q_lora_rank = 0;
  m.kv_lora_rank = 512;
  m.qk_nope = 128;
  m.qk_rope = 64;
  m.v_head = 128;
  m.intermediate = 10944;
  m.moe_intermediate = 1408;
  m.n_routed = 64;
  m.n_shared = 2;
  m.top_k = 6;
  m.n_group = 1;
  m.topk_group = 1;
  m.vocab = 102400;
  m.sigmoid = false;
  m.routed_scaling = 1.0f;
  m.norm_topk = false;
  return m;
}

ModelDims deepseek_v3() {
  ModelDims m;
  m.name = "v3";
  m.hidden = 7168;
  m.heads = 128;
  m.q_lora_rank = 1536;
  m.kv_lora_rank = 512;
  m.qk_nope = 128;
  m.qk_rope = 64;
  m.v_head = 128;
  m.intermediate = 18432;
  m.moe_intermediate = 2048;
  m.n_routed = 256;
  m.n_shared = 1;
  m.top_k = 8;
  m.n_group = 8;
  m.topk_group = 4;
  m.vocab = 129280;
  m.sigmoid = true;
  m.routed_scaling = 2.5f;
  m.norm_topk = true;
  return m;
}

std::vector<LinearLayer> linear_layers(const ModelDims& m) {
  const int64_t qk = m.qk_nope + m.qk_rope, shared = m.n_shared * m.moe_intermediate;
  std::vector<LinearLayer> v;
  if (m.q_lora_rank > 0) {
    v.push_back({"q_a", m.hidden, m.q_lora_rank});
    v.push_back({"q_b", m.q_lora_rank, m.heads * qk});
  } else {
    v.push_back({"q", m.hidden, m.heads * qk});
  }
  v.push_back({"kv_a", m.hidden, m.kv_lora_rank + m.qk_rope});
  v.push_back({"kv_b", m.kv_lora_rank, m.heads * (m.qk_nope + m.v_head)});
  v.push_back({"o", m.heads * m.v_head, m.hidden});
  v.push_back({"dense_gate_up", m.hidden, 2 * m.intermediate});
  v.push_back({"dense_down", m.intermediate, m.hidden});
  if (shared > 0) {
    v.push_back({"shared_gate_up", m.hidden, 2 * shared});
    v.push_back({"shared_down", shared, m.hidden});
  }
  v.push_back({"lm_head", m.hidden, m.vocab});
  return v;
}

Cost linear_cost(int64_t M, int64_t in, int64_t out) {
  return {2.0 * M * in * out, kBf16 * (double(M) * in + double(out) * in + double(M) * out)};
}

Cost mla_decode_cost(int64_t batch, int64_t context, int64_t heads, int64_t head_dim, int64_t v_dim) {
  Cost c;
  c.flops = 2.0 * batch * heads * context * double(head_dim + v_dim);  // q.k over head_dim, p.v over v_dim
  c.bytes = kBf16 * (double(batch) * context * head_dim + double(batch) * heads * head_dim +
                     double(batch) * heads * v_dim);
  return c;
}

Cost indexer_cost(int64_t batch, int64_t context, int64_t heads, int64_t dim, int64_t topk, int64_t q_len) {
  double positions = 0, picks = 0;  // over one sequence's rows
  for (int64_t i = 0; i < q_len; ++i) {
    const int64_t n = context - q_len + i + 1;
    positions += double(n);
    picks += double(std::min(topk, n));
  }
  const double rows = double(batch) * q_len;
  Cost c;
  c.flops = 2.0 * batch * positions * double(heads) * dim;
  c.bytes = kBf16 * (double(batch) * context * dim + rows * heads * dim) + 4.0 * rows * heads + 4.0 * batch * picks;
  return c;
}

Cost mla_prefill_cost(int64_t tokens, int64_t heads, int64_t nope, int64_t rope, int64_t v) {
  const double pairs = double(tokens) * double(tokens + 1) / 2;  // causal (query, key) pairs
  Cost c;
  c.flops = 2.0 * heads * pairs * double(nope + rope + v);
  c.bytes = kBf16 * (double(tokens) * heads * (nope + rope) + double(tokens) * heads * (nope + v) +
                     double(tokens) * rope + double(tokens) * heads * v);
  return c;
}

Cost moe_cost(int64_t tokens, int top_k, double active_experts, int64_t hidden, int64_t inter) {
  Cost c;
  c.flops = 2.0 * tokens * top_k * 3.0 * double(inter) * hidden;
  c.bytes = kBf16 * (active_experts * 3 * inter * hidden + 2.0 * tokens * hidden) +
            double(tokens) * top_k * (kI32 + kF32);
  return c;
}

Cost add_rms_norm_cost(int64_t tokens, int64_t n) {
  // reads x and residual, writes residual and out; the weight once.
  return {4.0 * tokens * n, kBf16 * (4.0 * tokens * n + n)};
}

Cost rope_cache_cost(int64_t tokens, int64_t heads, int64_t rope, int64_t latent_row) {
  Cost c;
  const double rotated = double(tokens) * (heads + 1) * rope;  // q heads + the shared key
  c.flops = 3.0 * rotated;                                     // 6 FLOPs per rotated pair
  c.bytes = kBf16 * (2 * rotated + 2.0 * tokens * latent_row) + kI32 * 2.0 * tokens;  // + positions, slots
  return c;
}

Cost silu_mul_cost(int64_t tokens, int64_t inter) {
  return {5.0 * tokens * inter, kBf16 * 3.0 * tokens * inter};
}

Cost moe_route_cost(int64_t tokens, int experts, int top_k) {
  return {4.0 * tokens * experts, kF32 * (double(tokens) * experts + experts) + (kI32 + kF32) * double(tokens) * top_k};
}

Cost moe_permute_cost(int64_t tokens, int top_k, int experts) {
  const double n = double(tokens) * top_k;
  return {0, kI32 * (3 * n + 3.0 * experts)};
}

Cost moe_combine_cost(int64_t tokens, int top_k, int64_t hidden) {
  const double n = double(tokens) * top_k;
  return {2.0 * n * hidden, kBf16 * (n * hidden + double(tokens) * hidden) + (kI32 + kF32) * n};
}

Cost log_softmax_cost(int64_t tokens, int64_t vocab) {
  return {3.0 * tokens * vocab, 2 * kF32 * double(tokens) * vocab};
}

double expected_active_experts(int64_t tokens, int experts, int top_k) {
  if (experts <= 0) return 0;
  // Each token misses a given expert with probability 1 - K/E, independently across tokens.
  const double miss = 1.0 - double(top_k) / experts;
  return experts * (1.0 - std::pow(miss, double(tokens)));
}

std::string usage() {
  return "usage: dserve_kernel_bench [--csv PATH] [--filter SUBSTR[|SUBSTR...]] [--quick] [--reps N] [--list]\n"
         "  One line per case: op, shape, median time of N CUDA-graph replays (CUDA events), TFLOP/s, GB/s,\n"
         "  fraction of the roofline (ceilings measured in this run) and the time of a same-run baseline.\n";
}

Result<Options> parse_args(int argc, const char* const* argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* flag) -> Result<std::string> {
      if (i + 1 >= argc) return error("flag ", flag, " needs a value");
      return std::string(argv[++i]);
    };
    if (a == "--csv") {
      DS_ASSIGN_OR_RETURN(o.csv, value("--csv"));
    } else if (a == "--filter") {
      DS_ASSIGN_OR_RETURN(o.filter, value("--filter"));
    } else if (a == "--reps") {
      std::string v;
      DS_ASSIGN_OR_RETURN(v, value("--reps"));
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 1 || n > 1000) return error("flag --reps: expected 1..1000, got '", v, "'");
      o.reps = static_cast<int>(n);
    } else if (a == "--quick") {
      o.quick = true;
    } else if (a == "--list") {
      o.list = true;
    } else {
      return error("unknown flag '", a, "' (try --help)");
    }
  }
  return o;
}

bool matches_filter(const std::string& name, const std::string& filter) {
  if (filter.empty()) return true;
  size_t begin = 0;
  while (true) {  // alternatives separated by '|'
    const size_t end = filter.find('|', begin);
    const std::string alt = filter.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    if (!alt.empty() && name.find(alt) != std::string::npos) return true;
    if (end == std::string::npos) return false;
    begin = end + 1;
  }
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

namespace {
std::string fmt(const char* f, double x) {
  char b[64];
  std::snprintf(b, sizeof b, f, x);
  return b;
}
std::string no_commas(std::string s) {
  std::replace(s.begin(), s.end(), ',', ';');
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}
}  // namespace

std::string csv_header() {
  return "op,model,shape,ours_us,tflops,gbps,flops,bytes,roofline_us,bound,roofline_frac,baseline,baseline_us,"
         "speedup_vs_baseline,max_rel_vs_baseline,copy_gbps,gemm_tflops,status";
}

std::string csv_line(const Row& r, const Ceilings& c) {
  const double s = r.us * 1e-6;
  const Roofline rl = roofline(r.cost, c, s);
  std::string line = r.op + "," + r.model + "," + no_commas(r.shape) + ",";
  line += (r.us > 0 ? fmt("%.3f", r.us) : "") + ",";
  line += (r.us > 0 ? fmt("%.3f", r.cost.flops / s / 1e12) : "") + ",";
  line += (r.us > 0 ? fmt("%.1f", r.cost.bytes / s / 1e9) : "") + ",";
  line += fmt("%.0f", r.cost.flops) + "," + fmt("%.0f", r.cost.bytes) + ",";
  line += fmt("%.3f", rl.time_s * 1e6) + "," + (rl.compute_bound ? "compute" : "memory") + ",";
  line += (r.us > 0 ? fmt("%.4f", rl.fraction) : "") + ",";
  line += no_commas(r.baseline) + ",";
  line += (r.baseline_us > 0 ? fmt("%.3f", r.baseline_us) : "") + ",";
  line += (r.us > 0 && r.baseline_us > 0 ? fmt("%.4f", r.baseline_us / r.us) : "") + ",";
  line += (r.max_rel >= 0 ? fmt("%.3e", r.max_rel) : "") + ",";
  line += fmt("%.1f", c.copy_bytes_per_s / 1e9) + "," + fmt("%.1f", c.gemm_flops_per_s / 1e12) + ",";
  line += no_commas(r.status);
  return line;
}

std::string text_line(const Row& r, const Ceilings& c) {
  const double s = r.us * 1e-6;
  const Roofline rl = roofline(r.cost, c, s);
  char b[512];
  if (r.us <= 0) {
    std::snprintf(b, sizeof b, "%-13s %-8s %-44s FAILED: %s", r.op.c_str(), r.model.c_str(), r.shape.c_str(),
                  r.status.c_str());
    return b;
  }
  std::snprintf(b, sizeof b, "%-13s %-8s %-44s %10.2f us %8.2f TFLOP/s %7.0f GB/s  roofline %5.1f%% (%s)",
                r.op.c_str(), r.model.c_str(), r.shape.c_str(), r.us, r.cost.flops / s / 1e12, r.cost.bytes / s / 1e9,
                100 * rl.fraction, rl.compute_bound ? "compute" : "memory");
  std::string line = b;
  if (!r.baseline.empty()) {
    if (r.baseline_us > 0)
      std::snprintf(b, sizeof b, "  | %s %.2f us, x%.2f", r.baseline.c_str(), r.baseline_us, r.baseline_us / r.us);
    else
      std::snprintf(b, sizeof b, "  | %s failed", r.baseline.c_str());
    line += b;
  }
  if (r.max_rel >= 0) line += fmt("  max_rel %.2e", r.max_rel);
  if (r.status != "ok") line += "  [" + r.status + "]";
  return line;
}

}  // namespace ds::kbench
