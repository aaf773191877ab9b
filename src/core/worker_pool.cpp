// Background worker threads over a bounded queue (worker_pool.h).
#include "core/worker_pool.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace ds {

struct WorkerPool::State {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  size_t max_queued = 0;
  bool stop = false;
};

namespace {

void work(std::shared_ptr<WorkerPool::State> st) {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> lock(st->mu);
      st->cv.wait(lock, [&] { return st->stop || !st->queue.empty(); });
      if (st->stop) return;
      fn = std::move(st->queue.front());
      st->queue.pop_front();
    }
    fn();
    fn = nullptr;  // what the closure held goes here, on this thread, before the next wait (it may end the pool)
  }
}

}  // namespace

WorkerPool::WorkerPool(int threads, size_t max_queued) : state_(std::make_shared<State>()) {
  state_->max_queued = max_queued;
  for (int i = 0; i < threads; ++i) std::thread(work, state_).detach();
}

WorkerPool::~WorkerPool() {
  std::deque<std::function<void()>> dropped;  // destroyed outside the lock: their owners may post again
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stop = true;
    dropped.swap(state_->queue);
  }
  state_->cv.notify_all();
}

bool WorkerPool::post(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->stop || state_->queue.size() >= state_->max_queued) return false;
    state_->queue.push_back(std::move(fn));
  }
  state_->cv.notify_one();
  return true;
}

}  // namespace ds
