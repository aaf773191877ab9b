// The data-parallel-attention controller: N batch engines (one a rank, each with its own scheduler, pool and loop
// thread, stepping in lockstep over one LocalGroup; on CUDA one GPU a rank, their collectives over NCCL); a new
// request goes to the least loaded rank, and everything about a request afterwards to the rank that has it.
#include <algorithm>
#include <cstdio>
#include <mutex>
#include <unordered_map>

#include "runner/batch_engine.h"
#ifdef DSERVE_WITH_CUDA
#include "dist/cuda/nccl_group.h"
#include "ops/cuda/cuda_runtime.h"
#endif

namespace ds {
namespace {

class DpEngine final : public Engine {
 public:
  Status init(const BatchEngineOptions& o) {
    if (o.dp_size < 2 || o.dp_size > 64) return error("--dp-size must be in [1, 64], got ", o.dp_size);
    auto group = std::make_shared<LocalGroup>(o.dp_size);
    std::vector<std::shared_ptr<Collective>> members;  // CUDA: the ranks' NCCL members (one GPU a rank)
    std::function<void(const std::string&)> nccl_abort;
    if (o.device == "cuda") {
#ifdef DSERVE_WITH_CUDA
      DS_ASSIGN_OR_RETURN(const std::vector<int> devices, rank_gpus(o, 0, o.dp_size));
      for (int g : devices) {
        DS_RETURN_IF_ERROR(check_cuda_device(g));
        init_cuda_device(g);
      }
      bind_cuda_device(devices[0]);
      DS_ASSIGN_OR_RETURN(std::shared_ptr<NcclGroup> nccl, NcclGroup::create(devices));
      for (int r = 0; r < o.dp_size; ++r) members.push_back(nccl->member(r));
      nccl_abort = [nccl](const std::string& why) { nccl->abort(why); };
#endif
    }
    for (int r = 0; r < o.dp_size; ++r) {
      BatchEngineOptions ro = o;
      ro.dp_size = 1;
      ro.dp_rank = r;
      // Each rank's MLPs run over every rank's tokens (ModelOptions::dp_attention), so rank 0's counts are the
      // group's: only it records.
      if (r > 0) ro.expert_recorder_mode.clear();
      ro.dp_group = group;
      if (!members.empty()) {
        ro.dp_collective = members[r];
        ro.dp_abort = nccl_abort;
      }
      ro.verbose = o.verbose && r == 0;
      auto e = make_batch_engine(ro);
      if (!e) {
        group->abort("rank " + std::to_string(r) + " failed to start");  // ranks already looping stop
        if (nccl_abort) nccl_abort("rank " + std::to_string(r) + " failed to start");
        return e.status();
      }
      ranks_.push_back(std::move(e.value()));
    }
    return Status::ok();
  }
  ~DpEngine() override { shutdown(); }

  Status submit(EngineRequest req, Callback on_event) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (owner_.count(req.rid)) return error("duplicate request id '", req.rid, "'");
    // Least loaded: fewest running + waiting requests (lowest rank on ties).
    size_t best = 0;
    int64_t best_load = INT64_MAX;
    for (size_t r = 0; r < ranks_.size(); ++r) {
      const EngineStats s = ranks_[r]->stats();
      const int64_t load = static_cast<int64_t>(s.num_running) + s.num_waiting;
      if (load < best_load) best = r, best_load = load;
    }
    const std::string rid = req.rid;
    Callback wrapped = [this, rid, cb = std::move(on_event)](EngineEvent e) {
      const bool done = e.finished;
      cb(std::move(e));
      if (done) {
        std::lock_guard<std::mutex> l(mu_);
        owner_.erase(rid);
      }
    };
    owner_[rid] = best;  // before submit: the rank's loop may finish the request at once
    Status st = ranks_[best]->submit(std::move(req), std::move(wrapped));
    if (!st) owner_.erase(rid);
    return st;
  }

  void abort(const std::string& rid) override {
    if (Engine* e = rank_of(rid)) e->abort(rid);
  }
  void finish_with_stop(const std::string& rid, std::string matched) override {
    if (Engine* e = rank_of(rid)) e->finish_with_stop(rid, std::move(matched));
  }
  void abort_all() override {
    for (auto& e : ranks_) e->abort_all();
  }
  void pause(PauseMode mode) override {
    for (auto& e : ranks_) e->pause(mode);
  }
  void resume() override {
    for (auto& e : ranks_) e->resume();
  }
  Status flush_cache() override {
    for (auto& e : ranks_) DS_RETURN_IF_ERROR(e->flush_cache());
    return Status::ok();
  }
  // Every rank profiles its own steps into its own file (<ms>-DP-<rank>.trace.json); all or none start.
  Status start_profile(const ProfileOptions& options) override {
    for (size_t r = 0; r < ranks_.size(); ++r) {
      ProfileOptions o = options;
      o.tag = "DP-" + std::to_string(r);
      if (Status s = ranks_[r]->start_profile(o); !s.is_ok()) {
        for (size_t q = 0; q < r; ++q) {
          std::vector<std::string> dropped;
          if (ranks_[q]->stop_profile(&dropped).is_ok())
            for (const std::string& f : dropped) std::remove(f.c_str());
        }
        return s;
      }
    }
    return Status::ok();
  }
  Status stop_profile(std::vector<std::string>* paths) override {
    Status first;
    for (auto& e : ranks_)
      if (Status s = e->stop_profile(paths); !s.is_ok() && first.is_ok()) first = s;
    return first;
  }
  Status update_weights_from_disk(const std::string& model_path, bool flush_cache, bool keep_pause) override {
    (void)model_path;
    (void)flush_cache;
    (void)keep_pause;
    return error("/update_weights_from_disk with several ranks (--dp-size) is not supported yet");
  }
  Status expert_distribution(ExpertRecordOp op, std::string* path) override {
    return ranks_[0]->expert_distribution(op, path);
  }
  EngineStats stats() const override {
    EngineStats t;
    for (const auto& e : ranks_) {
      const EngineStats s = e->stats();
      t.num_running += s.num_running;
      t.num_waiting += s.num_waiting;
      t.max_total_tokens += s.max_total_tokens;
      t.max_running_requests += s.max_running_requests;
      t.used_tokens += s.used_tokens;
      t.cached_tokens += s.cached_tokens;
      t.prompt_tokens_total += s.prompt_tokens_total;
      t.cached_tokens_total += s.cached_tokens_total;
      t.generation_tokens_total += s.generation_tokens_total;
      t.num_requests_total += s.num_requests_total;
      t.num_retractions += s.num_retractions;
      t.paused = t.paused || s.paused;
      t.num_steps = std::max(t.num_steps, s.num_steps);  // lockstep: the ranks' step counts agree
      t.num_graph_steps += s.num_graph_steps;
      t.speculative_num_steps = s.speculative_num_steps;
      t.spec_verify_steps += s.spec_verify_steps;
      t.spec_draft_tokens += s.spec_draft_tokens;
      t.spec_accepted_tokens += s.spec_accepted_tokens;
    }
    return t;
  }
  const ModelConfig& model_config() const override { return ranks_[0]->model_config(); }
  int64_t context_length() const override { return ranks_[0]->context_length(); }
  void shutdown() override {
    for (auto& e : ranks_) e->shutdown();  // the first to stop makes the others stop at their next agreement
  }

 private:
  Engine* rank_of(const std::string& rid) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = owner_.find(rid);
    return it == owner_.end() ? nullptr : ranks_[it->second].get();
  }

  std::vector<std::unique_ptr<Engine>> ranks_;
  std::mutex mu_;  // guards owner_
  std::unordered_map<std::string, size_t> owner_;  // live request -> its rank
};

}  // namespace

Result<std::unique_ptr<Engine>> make_dp_engine(const BatchEngineOptions& opts) {
  auto e = std::make_unique<DpEngine>();
  DS_RETURN_IF_ERROR(e->init(opts));
  return std::unique_ptr<Engine>(std::move(e));
}

}  // namespace ds
