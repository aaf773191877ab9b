// bench-accuracy: the counterpart of SGLang's benchmark/gsm8k/bench_sglang.py. Few-shot prompts
// "Question: q\nAnswer: a\n\n" from a GSM8K-format JSONL file, greedy /generate requests in parallel,
// the last number of each reply against the label's last number.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace ds::bench {

struct QaItem {
  std::string question;
  std::string answer;  // GSM8K: reasoning then "#### N"; the arithmetic set: just "N"
};

// Reads {"question": ..., "answer": ...} per line; errors name the file and line.
Result<std::vector<QaItem>> read_qa_jsonl(const std::string& path);

// The last integer in `text` (commas removed; a leading minus kept), or kInvalidAnswer.
constexpr int64_t kInvalidAnswer = -9999999;
int64_t last_number(const std::string& text);

// The few-shot prefix built from the first `num_shots` items.
std::string few_shot_prefix(const std::vector<QaItem>& items, int num_shots);

struct AccuracyOptions {
  std::string base_url = "http://127.0.0.1:30000";
  std::string api_key;
  std::string data_path;
  int num_shots = 5;
  int num_questions = 200;
  int parallel = 64;
  int max_new_tokens = 512;
  std::string result_file;  // append one JSON line when set
};

struct AccuracyResult {
  double accuracy = 0;
  double invalid = 0;
  double latency_s = 0;
  double output_throughput = 0;  // completion tokens / latency
  int64_t num_questions = 0;
  int64_t num_failed = 0;  // HTTP or transport failures (counted as wrong)
};

// Runs the benchmark against a server and prints SGLang's lines (Accuracy, Invalid, Latency, Output throughput).
Result<AccuracyResult> run_bench_accuracy(const AccuracyOptions& opts);

}  // namespace ds::bench
