// Subcommand registry: one line per subcommand.
#include "app/commands.h"

namespace ds {

const Command* commands(int* count) {
  static const Command kCommands[] = {
      {"serve", "HTTP server: SGLang /generate and the OpenAI API over the batch engine", run_serve},
      {"score", "teacher-forced log-probabilities of a token sequence", run_score},
      {"generate", "greedy/sampled continuation of a token sequence", run_generate},
      {"tokenize", "encode a JSON list of strings (stdin) to id lists", run_tokenize},
      {"detokenize", "decode a JSON list of id lists (stdin) to strings", run_detokenize},
      {"chat-template", "render a messages array (stdin) in the checkpoint's chat format", run_chat_template},
      {"bench-one-batch", "static-batch prefill/decode latency (sglang.bench_one_batch)", run_bench_one_batch},
      {"bench-accuracy", "GSM8K-style few-shot accuracy against a server (bench_sglang.py)", run_bench_accuracy},
      {"bench-serving", "online serving benchmark against an HTTP server (sglang.bench_serving)", run_bench_serving},
      {"tune-gemm", "measure the FP8 small-M / cuBLASLt crossover per linear shape on this GPU (JSON table)", run_tune_gemm},
      {"tune-moe", "measure where the FP8 MoE layer should leave the grouped kernels for cuBLASLt (JSON table)", run_tune_moe},
  };
  *count = sizeof(kCommands) / sizeof(kCommands[0]);
  return kCommands;
}

}  // namespace ds
