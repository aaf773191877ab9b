// FakeEngine: a deterministic stand-in for the batch engine (tests of the HTTP layer and `dserve serve
// --fake-engine`). Token t+1 = (t * 31 + 7) % vocab; honours max/min_new_tokens, stop ids, EOS, abort and
// finish_with_stop, and produces logprobs; one loop thread emits one token per live request per step.
// A script (fixed output ids) replaces the first tokens, to drive the chat output parsers in tests.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runner/engine.h"

namespace ds {

struct FakeEngineOptions {
  int64_t vocab_size = 32000;          // ids accepted in prompts
  int64_t output_vocab = 0;            // the recurrence's modulus (0: vocab_size); smaller keeps outputs in a range
  std::vector<int32_t> eos_token_ids = {1};
  int64_t context_length = 4096;
  int64_t max_total_tokens = 1 << 20;  // "KV capacity": a request whose prompt + max_new_tokens exceeds it is refused
  int step_us = 2000;                  // sleep per step while requests are live
  int max_running = 0;                 // > 0: requests beyond this many wait (counted in num_waiting)
  std::vector<int32_t> script;         // when set, output token k is script[k] (then the recurrence goes on)
  // An expert distribution recorder over a pretend MoE of 2 layers x 4 experts: each generated token t picks expert
  // (t >> 2l) % 4 in layer l.
  bool expert_recorder = false;
  // --enable-return-hidden-states: requests may ask for hidden states, each row fake_hidden(position, token).
  bool return_hidden_states = false;
  // --enable-return-routed-experts: the pretend MoE's picks (the recorder's rule: token t picks (t >> 2l) % 4 in
  // layer l, one a layer) of every fed token, in the final event.
  bool return_routed_experts = false;
  std::string expert_recorder_dir;  // its dumps' directory (empty: expert_recorder_dir())
};

class FakeEngine : public Engine {
 public:
  explicit FakeEngine(FakeEngineOptions options);
  ~FakeEngine() override;

  Status submit(EngineRequest req, Callback on_event) override;
  void abort(const std::string& rid) override;
  void finish_with_stop(const std::string& rid, std::string matched_stop) override;
  void abort_all() override;
  void pause(PauseMode mode) override;
  void resume() override;
  Status flush_cache() override;
  Status start_profile(const ProfileOptions& options) override { return profiler_.start(options); }
  Status stop_profile(std::vector<std::string>* paths) override { return profiler_.stop(paths); }
  Status expert_distribution(ExpertRecordOp op, std::string* path) override;
  // Takes any existing directory (counted, with the flush flags seen); others are an error, as a missing checkpoint.
  Status update_weights_from_disk(const std::string& model_path, bool flush_cache, bool keep_pause) override;
  std::vector<std::pair<std::string, bool>> weight_updates() const;
  EngineStats stats() const override;
  const ModelConfig& model_config() const override { return config_; }
  int64_t context_length() const override { return options_.context_length; }
  void shutdown() override;

  // The deterministic model: next token after `last`, its logprob, and the top-k alternatives.
  static int32_t next_token(int32_t last, int64_t vocab) {
    return static_cast<int32_t>((static_cast<int64_t>(last) * 31 + 7) % vocab);
  }
  static std::vector<float> fake_hidden(int32_t position, int32_t token) {
    return {static_cast<float>(position), static_cast<float>(token), 0.5f};
  }
  static float token_logprob(int32_t id) { return -0.05f - static_cast<float>(id % 13) * 0.25f; }
  static TokenLogprob make_logprob(int32_t id, int32_t top_k, int64_t vocab);

  // Test observability.
  uint64_t num_aborts() const { return num_aborts_.load(); }
  uint64_t num_stop_finishes() const { return num_stop_finishes_.load(); }
  size_t num_live() const;
  SamplingParams last_sampling() const;  // of the last request accepted (what the API layer resolved)

 private:
  struct Live {
    EngineRequest req;
    Callback cb;
    std::vector<int32_t> output;
    bool first = true;
    bool abort = false;
    bool stop = false;
    std::string matched;
  };
  void loop();

  FakeEngineOptions options_;
  ModelConfig config_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Live> live_;
  std::unique_ptr<ExpertRecorder> recorder_;  // options_.expert_recorder
  std::vector<int64_t> expert_counts_;          // its pretend device counts [2 * 4], guarded by mu_
  std::vector<std::pair<std::string, bool>> weight_updates_;  // guarded by mu_
  bool stopping_ = false;
  bool paused_ = false;
  uint64_t steps_ = 0;
  StepProfiler profiler_;
  std::thread thread_;
  std::atomic<uint64_t> num_aborts_{0};
  std::atomic<uint64_t> num_stop_finishes_{0};
  EngineStats totals_;  // cumulative counters (under mu_)
  SamplingParams last_sampling_;  // under mu_
};

}  // namespace ds
