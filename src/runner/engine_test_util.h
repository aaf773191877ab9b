// Test helper (header only): runs requests through a fresh batch engine and collects what a client sees.
#pragma once
#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "model/safetensors.h"
#include "runner/batch_engine.h"

namespace ds::test {

// An empty directory of its own under the system's temporary one (name + the pid), removed with its contents when
// the test ends, an early failed ASSERT included.
struct ScopedTempDir {
  explicit ScopedTempDir(const std::string& name)
      : path(std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~ScopedTempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;
  std::filesystem::path path;
};

struct EngineRun {
  std::map<std::string, std::vector<int32_t>> tokens;
  std::map<std::string, std::vector<TokenLogprob>> lps;  // output logprobs
  std::map<std::string, EngineEvent> final_event;
  // return_hidden_states: the events' rows in order (the prompt's, then the fed outputs'), and the events carrying
  // prompt rows (one expected).
  std::map<std::string, std::vector<std::vector<float>>> hidden;
  std::map<std::string, int> hidden_prompt_events;
  EngineStats stats;  // after the last request finished
};

// Submits every request to `engine` and waits for all to finish (a submit refused or a wait past 300 s is a test
// failure).
inline EngineRun run_requests(Engine& engine, const std::vector<EngineRequest>& reqs) {
  std::mutex mu;
  std::condition_variable cv;
  EngineRun out;
  auto on_event = [&](EngineEvent e) {
    std::lock_guard<std::mutex> lock(mu);
    auto& t = out.tokens[e.rid];
    t.insert(t.end(), e.new_tokens.begin(), e.new_tokens.end());
    auto& l = out.lps[e.rid];
    l.insert(l.end(), e.output_logprobs.begin(), e.output_logprobs.end());
    if (!e.hidden_prompt.empty()) ++out.hidden_prompt_events[e.rid];
    auto& h = out.hidden[e.rid];
    h.insert(h.end(), e.hidden_prompt.begin(), e.hidden_prompt.end());
    h.insert(h.end(), e.hidden_output.begin(), e.hidden_output.end());
    if (e.finished) out.final_event[e.rid] = e;
    cv.notify_all();
  };
  for (const auto& r : reqs) EXPECT_TRUE(engine.submit(r, on_event).is_ok()) << r.rid;
  std::unique_lock<std::mutex> lock(mu);
  EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(300), [&] { return out.final_event.size() == reqs.size(); }));
  out.stats = engine.stats();
  return out;
}

// return_hidden_states' rows of one request in two runs: as many, each as wide, and each within `tol` relative L2
// of the other's.
inline void expect_same_hidden_rows(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b,
                                    double tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t p = 0; p < a.size(); ++p) {
    ASSERT_EQ(a[p].size(), b[p].size()) << p;
    double num = 0, den = 0;
    for (size_t k = 0; k < a[p].size(); ++k) {
      num += std::pow(a[p][k] - b[p][k], 2);
      den += std::pow(b[p][k], 2);
    }
    EXPECT_LT(std::sqrt(num / std::max(den, 1e-30)), tol) << "row " << p;
  }
}

// Makes the engine (a failure is a test failure: an empty result), then run_requests.
inline EngineRun run_engine(const BatchEngineOptions& o, const std::vector<EngineRequest>& reqs) {
  auto engine = make_batch_engine(o);
  EXPECT_TRUE(engine.is_ok()) << engine.status().message();
  if (!engine.is_ok()) return {};
  return run_requests(**engine, reqs);
}

// A constraint over a synthetic vocabulary for the engine's grammar tests: ids 2..599 spell one letter each
// ('a' + id % 26), the others nothing (id 1 is the fixtures' EOS); the regex (ab|c){2,4}(x|yz).
struct LetterGrammar {
  std::vector<std::string> bytes;  // by token id
  ByteDfa dfa;
  std::shared_ptr<const TokenFsm> fsm;
  // The text of `toks` before its last token (the EOS).
  std::string text_before_eos(const std::vector<int32_t>& toks) const {
    std::string text;
    for (size_t k = 0; k + 1 < toks.size(); ++k) text += bytes[static_cast<size_t>(toks[k])];
    return text;
  }
};
inline LetterGrammar letter_grammar(int32_t vocab) {
  std::vector<std::string> bytes(static_cast<size_t>(vocab));
  for (int32_t id = 2; id < 600 && id < vocab; ++id) bytes[static_cast<size_t>(id)] = std::string(1, static_cast<char>('a' + id % 26));
  ByteDfa dfa = ByteDfa::compile("(ab|c){2,4}(x|yz)").value();
  auto fsm = std::make_shared<const TokenFsm>(dfa, std::make_shared<const VocabTrie>(bytes));
  return LetterGrammar{std::move(bytes), std::move(dfa), std::move(fsm)};
}

// Another checkpoint of fixture `src_dir`'s config (for weight updates): its config.json, and every tensor of its
// model.safetensors with its elements in reverse order (same names, shapes, dtypes and value sets; another model).
// False (a test failure) when the fixture cannot be read or the copy written.
inline bool write_reversed_checkpoint(const std::string& src_dir, const std::filesystem::path& dst_dir) {
  std::filesystem::create_directories(dst_dir);
  std::filesystem::copy_file(src_dir + "/config.json", dst_dir / "config.json",
                             std::filesystem::copy_options::overwrite_existing);
  auto f = SafetensorsFile::open(src_dir + "/model.safetensors");
  EXPECT_TRUE(f.is_ok()) << f.status().message();
  if (!f.is_ok()) return false;
  std::vector<std::pair<std::string, Tensor>> out;
  for (const TensorInfo& info : (*f)->tensors()) {
    auto t = (*f)->get(info.name);
    EXPECT_TRUE(t.is_ok()) << t.status().message();
    if (!t.is_ok()) return false;
    Tensor r = Tensor::empty(t->shape(), t->dtype());
    const int64_t n = t->numel();
    const size_t elem = n > 0 ? t->nbytes() / static_cast<size_t>(n) : 0;
    const auto* from = static_cast<const uint8_t*>(t->data());
    auto* to = static_cast<uint8_t*>(r.data());
    for (int64_t i = 0; i < n; ++i) std::memcpy(to + static_cast<size_t>(i) * elem, from + static_cast<size_t>(n - 1 - i) * elem, elem);
    out.emplace_back(info.name, r);
  }
  const Status st = save_safetensors((dst_dir / "model.safetensors").string(), out);
  EXPECT_TRUE(st.is_ok()) << st.message();
  return st.is_ok();
}

}  // namespace ds::test
