// bench-accuracy (see accuracy.h): the questions run as /generate requests with text prompts, greedy,
// stopping at "Question" like SGLang's script, at most `parallel` in flight on one event loop.
#include "bench/accuracy.h"

#include <cctype>
#include <cstdio>
#include <fstream>
#include <regex>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "bench/http_client.h"

namespace ds::bench {

Result<std::vector<QaItem>> read_qa_jsonl(const std::string& path) {
  std::ifstream f(path);
  if (!f) return error("--data-path '", path, "' cannot be read");
  std::vector<QaItem> items;
  std::string line;
  for (int n = 1; std::getline(f, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("question") || !j.contains("answer") ||
        !j["question"].is_string() || !j["answer"].is_string())
      return error(path, ":", n, ": expected a JSON object with string fields \"question\" and \"answer\"");
    items.push_back(QaItem{j["question"].get<std::string>(), j["answer"].get<std::string>()});
  }
  if (items.empty()) return error(path, ": no questions");
  return items;
}

int64_t last_number(const std::string& text) {
  std::string s;
  for (char c : text)
    if (c != ',') s += c;
  static const std::regex kNumber("-?[0-9]+");
  int64_t value = kInvalidAnswer;
  for (auto it = std::sregex_iterator(s.begin(), s.end(), kNumber); it != std::sregex_iterator(); ++it) {
    const std::string m = it->str();
    if (m.size() > 18) continue;  // not a plausible answer; keep looking
    value = std::stoll(m);
  }
  return value;
}

std::string few_shot_prefix(const std::vector<QaItem>& items, int num_shots) {
  std::string p;
  for (int i = 0; i < num_shots && i < static_cast<int>(items.size()); ++i)
    p += "Question: " + items[i].question + "\nAnswer: " + items[i].answer + "\n\n";
  return p;
}

Result<AccuracyResult> run_bench_accuracy(const AccuracyOptions& o) {
  if (o.num_shots < 0 || o.num_questions < 1 || o.parallel < 1 || o.max_new_tokens < 1)
    return error("--num-shots must be >= 0 and --num-questions, --parallel, --max-new-tokens >= 1");
  DS_ASSIGN_OR_RETURN(std::vector<QaItem> items, read_qa_jsonl(o.data_path));
  DS_ASSIGN_OR_RETURN(BaseUrl url, parse_base_url(o.base_url));
  std::vector<std::pair<std::string, std::string>> headers;
  if (!o.api_key.empty()) headers.emplace_back("Authorization", "Bearer " + o.api_key);
  HttpClient client(url, headers, 600.0);
  DS_RETURN_IF_ERROR(client.resolve());

  const std::string prefix = few_shot_prefix(items, o.num_shots);
  const int n = std::min<int>(o.num_questions, static_cast<int>(items.size()));
  std::vector<int64_t> preds(n, kInvalidAnswer);
  std::vector<char> failed(n, 0);
  int64_t completion_tokens = 0;
  int next = 0, done = 0;
  const auto t0 = Clock::now();
  std::function<void()> launch = [&]() {
    if (next >= n) return;
    const int i = next++;
    nlohmann::json body = {
        {"text", prefix + "Question: " + items[i].question + "\nAnswer:"},
        {"sampling_params",
         {{"temperature", 0}, {"max_new_tokens", o.max_new_tokens}, {"stop", {"Question", "Assistant:", "<|separator|>"}}}}};
    auto response = std::make_shared<std::string>();
    auto status = std::make_shared<int>(0);
    HttpCallbacks cb;
    cb.on_headers = [status](int code, const std::string&) { *status = code; };
    cb.on_body = [response](std::string_view bytes, Clock::time_point) { response->append(bytes); };
    cb.on_done = [&, i, response, status](const Status& transport, Clock::time_point) {
      ++done;
      nlohmann::json j = nlohmann::json::parse(*response, nullptr, false);
      if (!transport.is_ok() || *status != 200 || j.is_discarded() || !j.contains("text")) {
        failed[i] = 1;
      } else {
        preds[i] = last_number(j["text"].get<std::string>());
        if (j.contains("meta_info") && j["meta_info"].contains("completion_tokens"))
          completion_tokens += j["meta_info"]["completion_tokens"].get<int64_t>();
      }
      if (isatty(2)) std::fprintf(stderr, "\rbench-accuracy: %d/%d", done, n);
      launch();
    };
    client.request("POST", "/generate", body.dump(), std::move(cb));
  };
  for (int k = 0; k < o.parallel && k < n; ++k) launch();
  client.run();
  if (isatty(2)) std::fprintf(stderr, "\n");
  AccuracyResult r;
  r.latency_s = std::chrono::duration<double>(Clock::now() - t0).count();
  r.num_questions = n;
  int64_t correct = 0, invalid = 0;
  for (int i = 0; i < n; ++i) {
    r.num_failed += failed[i];
    if (preds[i] == kInvalidAnswer) ++invalid;
    if (!failed[i] && preds[i] != kInvalidAnswer && preds[i] == last_number(items[i].answer)) ++correct;
  }
  r.accuracy = static_cast<double>(correct) / n;
  r.invalid = static_cast<double>(invalid) / n;
  r.output_throughput = completion_tokens / r.latency_s;
  std::printf("Accuracy: %.3f\n", r.accuracy);
  std::printf("Invalid: %.3f\n", r.invalid);
  std::printf("Latency: %.3f s\n", r.latency_s);
  std::printf("Output throughput: %.3f token/s\n", r.output_throughput);
  if (r.num_failed) std::printf("Failed requests: %lld\n", static_cast<long long>(r.num_failed));
  if (!o.result_file.empty()) {
    std::ofstream out(o.result_file, std::ios::app);
    nlohmann::json line = {{"task", "gsm8k"},          {"backend", "dserve"},       {"num_gpus", 1},
                           {"latency", r.latency_s},   {"accuracy", r.accuracy},    {"invalid", r.invalid},
                           {"num_requests", n},        {"other", {{"num_questions", n}, {"parallel", o.parallel}}},
                           {"output_throughput", r.output_throughput}};
    out << line.dump() << "\n";
  }
  return r;
}

}  // namespace ds::bench
