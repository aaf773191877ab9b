// TpRanks: ranks 1..n-1 of a tensor-parallel engine, each a thread with its own BatchRunner (model shard, latent
// cache, sampler states); rank 0's runner is the engine's own. Every step runs on all ranks at once (the model's
// all-reduces meet there); each rank samples the same tokens (the same logits bit for bit, the same seeds), so
// rank 0's outputs are the step's and the others are checked against them.
#pragma once
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "runner/batch_runner.h"

namespace ds {

class TpRanks {
 public:
  // on_failure(why): a rank's step threw; breaks the ranks' collectives (LocalGroup::abort) so that the others,
  // waiting in an all-reduce for it, throw too instead of hanging.
  TpRanks(std::vector<BatchRunner*> others, std::function<void(const std::string&)> on_failure);
  ~TpRanks();
  TpRanks(const TpRanks&) = delete;
  TpRanks& operator=(const TpRanks&) = delete;

  // Runs `plan` on every other rank while the caller runs it on rank 0; returns rank 0's outputs. A rank whose
  // step threw, or whose tokens differ from rank 0's, fails the step (the exception is rethrown here).
  std::vector<SeqOutput> execute(BatchRunner& rank0, const StepPlan& plan,
                                 const std::unordered_map<std::string, RunnerRequestInfo>& info);
  // Forgets a finished request on every other rank (between steps).
  void release(const std::string& rid);
  // Runs job(r) for every rank r at once, rank 0 on the calling thread and rank i on its own (whose runner's
  // device it is bound to: multi-GPU set-up work such as capturing each rank's CUDA graphs, whose warm-up forwards
  // meet in the all-reduces). A rank's exception fails the group (on_failure) and is rethrown here.
  void run_all(const std::function<void(int rank)>& job);

 private:
  void worker(size_t i);

  std::vector<BatchRunner*> runners_;
  std::function<void(const std::string&)> on_failure_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t job_ = 0;     // the step being run (workers run each job once)
  size_t done_ = 0;      // workers finished with job_
  bool stop_ = false;
  const std::function<void(int rank)>* job_fn_ = nullptr;  // job_'s work (ranks 1..n-1 run it on their threads)
  std::vector<std::string> errors_;
};

}  // namespace ds
