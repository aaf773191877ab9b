// Server metrics for GET /metrics (Prometheus text format, SGLang's metric names): request and token
// counters, TTFT / inter-token / end-to-end latency histograms, and gauges read from the engine's stats.
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "runner/engine.h"

namespace ds {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  // Appends the _bucket / _sum / _count lines of metric `name` with `labels` ("k=\"v\"" or "").
  void render(std::string& out, const std::string& name, const std::string& help, const std::string& labels) const;
  uint64_t count() const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); last = +Inf
  double sum_ = 0;
  uint64_t n_ = 0;
};

class ServerMetrics {
 public:
  ServerMetrics();

  void on_http_request(const std::string& route, int status);
  void on_request_finished(const std::string& finish_kind, int64_t prompt_tokens, int64_t completion_tokens,
                           int64_t cached_tokens, double e2e_seconds);
  void observe_ttft(double seconds) { ttft_.observe(seconds); }
  void observe_itl(double seconds) { itl_.observe(seconds); }
  void add_running(int delta) { api_running_ += delta; }

  std::string render(const EngineStats& stats, const std::string& model_name) const;

 private:
  Histogram ttft_;
  Histogram itl_;
  Histogram e2e_;
  std::atomic<uint64_t> prompt_tokens_{0};
  std::atomic<uint64_t> generation_tokens_{0};
  std::atomic<uint64_t> cached_tokens_{0};
  std::atomic<int64_t> api_running_{0};
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> http_;   // (route, status) -> count
  std::map<std::string, uint64_t> finished_;                // finish reason -> count
};

}  // namespace ds
