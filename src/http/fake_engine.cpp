// FakeEngine: validation like the real engine (empty prompt, ids outside the vocabulary, context and
// capacity limits, duplicate rids) and a loop thread that emits tokens by the fixed recurrence.
#include "http/fake_engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>

namespace ds {

FakeEngine::FakeEngine(FakeEngineOptions options) : options_(std::move(options)) {
  config_.model_type = "fake";
  config_.vocab_size = options_.vocab_size;
  config_.max_position_embeddings = options_.context_length;
  if (!options_.eos_token_ids.empty()) config_.eos_token_id = options_.eos_token_ids[0];
  for (int32_t id : options_.eos_token_ids) config_.eos_token_ids.push_back(id);
  totals_.max_total_tokens = options_.max_total_tokens;
  totals_.max_running_requests = options_.max_running;  // 0: unbounded
  if (options_.expert_recorder) {
    recorder_ = std::make_unique<ExpertRecorder>(
        2, 4, options_.expert_recorder_dir.empty() ? expert_recorder_dir() : options_.expert_recorder_dir);
    expert_counts_.assign(8, 0);
  }
  thread_ = std::thread([this] { loop(); });
}

FakeEngine::~FakeEngine() { shutdown(); }

TokenLogprob FakeEngine::make_logprob(int32_t id, int32_t top_k, int64_t vocab) {
  TokenLogprob lp;
  lp.id = id;
  lp.logprob = token_logprob(id);
  for (int32_t j = 0; j < top_k; ++j) {
    const int32_t alt = static_cast<int32_t>((static_cast<int64_t>(id) + j) % vocab);
    lp.top.emplace_back(-0.01f - 0.5f * static_cast<float>(j), alt);
  }
  return lp;
}

Status FakeEngine::submit(EngineRequest req, Callback on_event) {
  if (req.input_ids.empty()) return error("the prompt is empty");
  for (size_t i = 0; i < req.input_ids.size(); ++i)
    if (req.input_ids[i] < 0 || req.input_ids[i] >= options_.vocab_size)
      return error("token id ", req.input_ids[i], " at index ", i, " is outside the vocabulary [0, ",
                   options_.vocab_size, ")");
  const int64_t total = static_cast<int64_t>(req.input_ids.size()) + req.sampling.max_new_tokens;
  if (req.sampling.max_new_tokens < 0) return error("max_new_tokens must be >= 0");
  if (total > options_.context_length)
    return error("the prompt (", req.input_ids.size(), " tokens) plus max_new_tokens (", req.sampling.max_new_tokens,
                 ") exceeds the context length ", options_.context_length);
  if (total > options_.max_total_tokens)
    return error("the request needs ", total, " KV slots but the capacity is ", options_.max_total_tokens);
  if (req.return_hidden_states && !options_.return_hidden_states) return error(kHiddenStatesOff);
  if (req.return_routed_experts && !options_.return_routed_experts) return error(kRoutedExpertsOff);
  if (req.logprob_start_len >= static_cast<int32_t>(req.input_ids.size()))
    return error("logprob_start_len ", req.logprob_start_len, " is not below the prompt length ", req.input_ids.size());
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return error("the engine is shutting down");
  if (req.rid.empty()) return error("the request id is empty");
  if (live_.count(req.rid)) return error("duplicate request id '", req.rid, "'");
  Live l;
  l.cb = std::move(on_event);
  last_sampling_ = req.sampling;
  std::string rid = req.rid;
  l.req = std::move(req);
  live_.emplace(rid, std::move(l));
  totals_.num_requests_total++;
  cv_.notify_all();
  return Status::ok();
}

void FakeEngine::abort(const std::string& rid) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(rid);
  if (it == live_.end()) return;
  it->second.abort = true;
  cv_.notify_all();
}

void FakeEngine::finish_with_stop(const std::string& rid, std::string matched_stop) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(rid);
  if (it == live_.end() || it->second.abort) return;
  it->second.stop = true;
  it->second.matched = std::move(matched_stop);
  cv_.notify_all();
}

void FakeEngine::abort_all() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [rid, l] : live_) l.abort = true;
  cv_.notify_all();
}

void FakeEngine::pause(PauseMode mode) {
  std::lock_guard<std::mutex> lock(mu_);
  if (mode == PauseMode::kAbort)
    for (auto& [rid, l] : live_) l.abort = true;
  paused_ = true;  // (no KV to retract: kRetract is kInPlace here)
  cv_.notify_all();
}

void FakeEngine::resume() {
  std::lock_guard<std::mutex> lock(mu_);
  paused_ = false;
  cv_.notify_all();
}

Status FakeEngine::flush_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!live_.empty()) return error("cannot flush the cache while ", live_.size(), " requests are running or waiting");
  return Status::ok();
}

EngineStats FakeEngine::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  EngineStats s = totals_;
  s.paused = paused_;
  const int32_t live = static_cast<int32_t>(live_.size());
  s.num_running = options_.max_running > 0 ? std::min(live, options_.max_running) : live;
  s.num_waiting = live - s.num_running;
  s.used_tokens = 0;
  for (const auto& [rid, l] : live_)
    s.used_tokens += static_cast<int64_t>(l.req.input_ids.size() + l.output.size());
  return s;
}

size_t FakeEngine::num_live() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_.size();
}

void FakeEngine::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

void FakeEngine::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !live_.empty(); });
    if (stopping_ && live_.empty()) return;
    std::vector<std::pair<Callback, EngineEvent>> out;
    int running = 0;
    StepSpan span;  // this step as a profile shows it: first tokens are "prefill", the others "decode"
    span.step_id = ++steps_;
    profiler_.step_planned(span.step_id);
    for (auto it = live_.begin(); it != live_.end();) {
      Live& l = it->second;
      if (paused_ && !l.abort && !l.stop && !stopping_) {  // paused: only endings go on
        ++it;
        continue;
      }
      if (options_.max_running > 0 && running >= options_.max_running && !l.abort && !stopping_) {
        ++it;  // waiting for a slot
        continue;
      }
      ++running;
      EngineEvent ev;
      ev.rid = it->first;
      const auto& req = l.req;
      span.num_seqs++;
      if (!l.first) {
        span.num_decode_seqs++;
        span.num_tokens++;
      } else {
        span.num_prefill_tokens += static_cast<int32_t>(req.input_ids.size());
        span.num_tokens += static_cast<int32_t>(req.input_ids.size());
        l.first = false;
        if (req.return_logprob && req.logprob_start_len >= 0) {
          for (size_t i = static_cast<size_t>(req.logprob_start_len); i < req.input_ids.size(); ++i) {
            TokenLogprob lp = make_logprob(req.input_ids[i], req.top_logprobs_num, options_.vocab_size);
            if (i == 0) lp.logprob = std::numeric_limits<float>::quiet_NaN();
            ev.input_logprobs.push_back(std::move(lp));
          }
        }
        totals_.prompt_tokens_total += req.input_ids.size();
        if (req.return_hidden_states)
          for (size_t i = 0; i < req.input_ids.size(); ++i)
            ev.hidden_prompt.push_back(fake_hidden(static_cast<int32_t>(i), req.input_ids[i]));
      }
      bool done = false;
      if (stopping_ || l.abort) {
        done = true;
        ev.reason.kind = FinishReason::Kind::kAbort;
        ev.reason.matched_text = stopping_ ? "the server is shutting down" : "aborted";
        if (!stopping_) num_aborts_++;
      } else if (l.stop) {
        done = true;
        ev.reason.kind = FinishReason::Kind::kStop;
        ev.reason.matched_text = l.matched;
        num_stop_finishes_++;
      } else if (static_cast<int32_t>(l.output.size()) >= req.sampling.max_new_tokens) {
        done = true;
        ev.reason.kind = FinishReason::Kind::kLength;
      } else {
        const int32_t last = l.output.empty() ? req.input_ids.back() : l.output.back();
        const size_t k = l.output.size();
        if (req.return_hidden_states && k > 0)  // the fed output token's row
          ev.hidden_output.push_back(fake_hidden(static_cast<int32_t>(req.input_ids.size() + k - 1), l.output[k - 1]));
        const int64_t modulus = options_.output_vocab > 0 ? options_.output_vocab : options_.vocab_size;
        const int32_t tok = k < options_.script.size() ? options_.script[k] : next_token(last, modulus);
        l.output.push_back(tok);
        totals_.generation_tokens_total++;
        if (recorder_)
          for (int layer = 0; layer < 2; ++layer) ++expert_counts_[static_cast<size_t>(layer * 4 + ((tok >> (2 * layer)) % 4))];
        ev.new_tokens.push_back(tok);
        if (req.return_logprob) {
          TokenLogprob lp = make_logprob(tok, req.top_logprobs_num, options_.vocab_size);
          // token_ids_logprob: the position's own token at its logprob, others at values that depend on the
          // context's last token too (so that different prompts give different lists).
          for (int32_t id : req.token_ids_logprob)
            lp.ids.emplace_back(id == tok ? lp.logprob : -1.0f - static_cast<float>((id * 7 + last) % 11) * 0.3f, id);
          ev.output_logprobs.push_back(std::move(lp));
        }
        const bool may_stop = static_cast<int32_t>(l.output.size()) >= req.sampling.min_new_tokens;
        bool is_stop = false;
        for (int32_t s : req.sampling.stop_token_ids) is_stop |= (s == tok);
        if (!req.sampling.ignore_eos)
          for (int32_t s : options_.eos_token_ids) is_stop |= (s == tok);
        if (may_stop && is_stop) {
          done = true;
          ev.reason.kind = FinishReason::Kind::kStop;
          ev.reason.matched_token = tok;
        } else if (static_cast<int32_t>(l.output.size()) >= req.sampling.max_new_tokens) {
          done = true;
          ev.reason.kind = FinishReason::Kind::kLength;
        }
      }
      ev.finished = done;
      if (done && req.return_routed_experts) {  // every fed token: the prompt, the output but its last token
        std::vector<int32_t> fed(req.input_ids.begin(), req.input_ids.end());
        fed.insert(fed.end(), l.output.begin(), l.output.end());
        fed.pop_back();
        for (int32_t t : fed)
          for (int layer = 0; layer < 2; ++layer) ev.routed_experts.push_back((t >> (2 * layer)) % 4);
      }
      ev.prompt_tokens = static_cast<int32_t>(req.input_ids.size());
      ev.completion_tokens = static_cast<int32_t>(l.output.size());
      ev.cached_tokens = 0;
      out.emplace_back(done ? std::move(l.cb) : l.cb, std::move(ev));
      if (done) {
        it = live_.erase(it);
      } else {
        ++it;
      }
    }
    if (out.empty() && paused_ && !stopping_) {  // until an abort, a stop, a resume or a shutdown
      cv_.wait(lock);
      continue;
    }
    // The step's span ends before its events go out, as in the batch engine: a client that saw its last token
    // finds the step in a profile stopped next.
    if (span.num_seqs > 0) profiler_.step_completed(span);
    // Callbacks run without the lock (they may call abort / finish_with_stop).
    lock.unlock();
    for (auto& [cb, ev] : out) cb(std::move(ev));
    if (options_.step_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(options_.step_us));
    lock.lock();
  }
}

Status FakeEngine::expert_distribution(ExpertRecordOp op, std::string* path) {
  if (!recorder_) return error(kNoExpertRecorder);
  std::lock_guard<std::mutex> lock(mu_);
  return recorder_->apply(
      op,
      [&] {
        std::vector<int64_t> v = expert_counts_;
        std::fill(expert_counts_.begin(), expert_counts_.end(), 0);
        return v;
      },
      path);
}

Status FakeEngine::update_weights_from_disk(const std::string& model_path, bool flush_cache, bool keep_pause) {
  (void)keep_pause;
  if (!std::filesystem::is_directory(model_path)) return error("model_path '", model_path, "' is not a directory");
  std::lock_guard<std::mutex> lock(mu_);
  weight_updates_.emplace_back(model_path, flush_cache);
  return Status::ok();
}

std::vector<std::pair<std::string, bool>> FakeEngine::weight_updates() const {
  std::lock_guard<std::mutex> lock(mu_);
  return weight_updates_;
}

SamplingParams FakeEngine::last_sampling() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_sampling_;
}

}  // namespace ds
