// Prometheus text rendering of ServerMetrics (see metrics.h).
#include "http/metrics.h"

#include <algorithm>
#include <cstdio>

namespace ds {

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  const size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  std::lock_guard<std::mutex> lock(mu_);
  counts_[i]++;
  sum_ += v;
  n_++;
}

uint64_t Histogram::count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return n_;
}

namespace {
std::string fmt_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}
std::string join_labels(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + "," + b;
}
void line(std::string& out, const std::string& name, const std::string& labels, const std::string& value) {
  out += name;
  if (!labels.empty()) out += "{" + labels + "}";
  out += " " + value + "\n";
}
void head(std::string& out, const std::string& name, const std::string& help, const char* type) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}
}  // namespace

void Histogram::render(std::string& out, const std::string& name, const std::string& help,
                       const std::string& labels) const {
  std::vector<uint64_t> counts;
  double sum;
  uint64_t n;
  {
    std::lock_guard<std::mutex> lock(mu_);
    counts = counts_;
    sum = sum_;
    n = n_;
  }
  head(out, name, help, "histogram");
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts[i];
    line(out, name + "_bucket", join_labels(labels, "le=\"" + fmt_double(bounds_[i]) + "\""), std::to_string(cum));
  }
  line(out, name + "_bucket", join_labels(labels, "le=\"+Inf\""), std::to_string(n));
  line(out, name + "_sum", labels, fmt_double(sum));
  line(out, name + "_count", labels, std::to_string(n));
}

ServerMetrics::ServerMetrics()
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 15, 20, 30, 60, 120}),
      itl_({0.001, 0.002, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
            1, 2.5, 5}),
      e2e_({0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200}) {}

void ServerMetrics::on_http_request(const std::string& route, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  http_[{route, status}]++;
}

void ServerMetrics::on_request_finished(const std::string& finish_kind, int64_t prompt_tokens, int64_t completion_tokens,
                                        int64_t cached_tokens, double e2e_seconds) {
  prompt_tokens_ += static_cast<uint64_t>(std::max<int64_t>(prompt_tokens, 0));
  generation_tokens_ += static_cast<uint64_t>(std::max<int64_t>(completion_tokens, 0));
  cached_tokens_ += static_cast<uint64_t>(std::max<int64_t>(cached_tokens, 0));
  e2e_.observe(e2e_seconds);
  std::lock_guard<std::mutex> lock(mu_);
  finished_[finish_kind]++;
}

std::string ServerMetrics::render(const EngineStats& s, const std::string& model_name) const {
  const std::string ml = "model_name=\"" + model_name + "\"";
  std::string out;
  auto counter = [&](const std::string& name, const std::string& help, uint64_t v) {
    head(out, name, help, "counter");
    line(out, name, ml, std::to_string(v));
  };
  auto gauge = [&](const std::string& name, const std::string& help, double v) {
    head(out, name, help, "gauge");
    line(out, name, ml, fmt_double(v));
  };
  counter("sglang:prompt_tokens_total", "Number of prefill tokens processed (finished requests).", prompt_tokens_.load());
  counter("sglang:generation_tokens_total", "Number of generation tokens processed (finished requests).",
          generation_tokens_.load());
  counter("sglang:cached_tokens_total", "Number of prompt tokens served from the prefix cache (finished requests).",
          cached_tokens_.load());
  {
    std::lock_guard<std::mutex> lock(mu_);
    head(out, "sglang:num_requests_total", "Number of finished generation requests by finish reason.", "counter");
    for (const auto& [kind, n] : finished_)
      line(out, "sglang:num_requests_total", ml + ",finish_reason=\"" + kind + "\"", std::to_string(n));
    head(out, "dserve:http_requests_total", "HTTP requests by route and status code.", "counter");
    for (const auto& [key, n] : http_)
      line(out, "dserve:http_requests_total", "route=\"" + key.first + "\",code=\"" + std::to_string(key.second) + "\"",
           std::to_string(n));
  }
  ttft_.render(out, "sglang:time_to_first_token_seconds", "Time to first token in seconds.", ml);
  itl_.render(out, "sglang:inter_token_latency_seconds", "Time between generated tokens in seconds.", ml);
  e2e_.render(out, "sglang:e2e_request_latency_seconds", "End-to-end request latency in seconds.", ml);
  gauge("sglang:num_running_reqs", "Requests running in the engine.", s.num_running);
  gauge("sglang:num_queue_reqs", "Requests waiting in the engine's queue.", s.num_waiting);
  gauge("dserve:num_api_requests", "Generation sequences the HTTP layer is waiting on.",
        static_cast<double>(api_running_.load()));
  gauge("sglang:token_usage", "Fraction of the KV cache in use.",
        s.max_total_tokens > 0 ? static_cast<double>(s.used_tokens) / static_cast<double>(s.max_total_tokens) : 0.0);
  gauge("sglang:max_total_num_tokens", "KV cache capacity in tokens.", static_cast<double>(s.max_total_tokens));
  gauge("sglang:cache_hit_rate", "Fraction of admitted prompt tokens served from the prefix cache.",
        s.prompt_tokens_total > 0 ? static_cast<double>(s.cached_tokens_total) / static_cast<double>(s.prompt_tokens_total)
                                  : 0.0);
  counter("dserve:engine_retractions_total", "Requests retracted to free KV cache.", s.num_retractions);
  counter("dserve:engine_steps_total", "Engine steps run.", s.num_steps);
  counter("dserve:engine_graph_steps_total", "Engine steps replayed from CUDA graphs.", s.num_graph_steps);
  if (s.speculative_num_steps > 0) {  // SGLang's speculative gauges, over the server's life
    const double verify = static_cast<double>(s.spec_verify_steps);
    gauge("sglang:spec_accept_length", "Average tokens a verify step produced (accepted drafts + 1).",
          verify > 0 ? (verify + static_cast<double>(s.spec_accepted_tokens)) / verify : 0.0);
    gauge("sglang:spec_accept_rate", "Fraction of the drafts fed that were accepted.",
          s.spec_draft_tokens > 0 ? static_cast<double>(s.spec_accepted_tokens) / static_cast<double>(s.spec_draft_tokens)
                                  : 0.0);
    counter("dserve:spec_verify_steps_total", "Decode steps that verified drafts (per request).", s.spec_verify_steps);
  }
  return out;
}

}  // namespace ds
