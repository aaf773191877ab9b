// WorkerPool: closures run off the caller's thread, the queue bound refuses, and the pool may be destroyed by a
// closure running on one of its own workers.
#include "core/worker_pool.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

namespace ds {
namespace {

// What a closure and the test share lives in a shared_ptr each closure holds: the pool joins nothing, so a closure
// may still be unlocking (or, after the pool is gone, waking) when the test returns.
struct Shared {
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  bool other_thread = true, started = false, release = false;
};

TEST(WorkerPool, RunsOffTheCallersThread) {
  WorkerPool pool(2, 16);
  auto sh = std::make_shared<Shared>();
  const auto caller = std::this_thread::get_id();
  for (int i = 0; i < 8; ++i)
    ASSERT_TRUE(pool.post([sh, caller] {
      std::lock_guard<std::mutex> lock(sh->mu);
      sh->other_thread = sh->other_thread && std::this_thread::get_id() != caller;
      ++sh->done;
      sh->cv.notify_all();
    }));
  std::unique_lock<std::mutex> lock(sh->mu);
  ASSERT_TRUE(sh->cv.wait_for(lock, std::chrono::seconds(10), [&] { return sh->done == 8; }));
  EXPECT_TRUE(sh->other_thread);
}

// One worker held by a closure that waits: the queue takes max_queued more, then refuses.
TEST(WorkerPool, RefusesPastItsQueueBound) {
  WorkerPool pool(1, 2);
  auto sh = std::make_shared<Shared>();
  ASSERT_TRUE(pool.post([sh] {
    std::unique_lock<std::mutex> lock(sh->mu);
    sh->started = true;
    sh->cv.notify_all();
    sh->cv.wait(lock, [&] { return sh->release; });
  }));
  {
    std::unique_lock<std::mutex> lock(sh->mu);
    ASSERT_TRUE(sh->cv.wait_for(lock, std::chrono::seconds(10), [&] { return sh->started; }));
  }
  EXPECT_TRUE(pool.post([] {}));
  EXPECT_TRUE(pool.post([] {}));
  EXPECT_FALSE(pool.post([] {}));
  {
    std::lock_guard<std::mutex> lock(sh->mu);
    sh->release = true;
  }
  sh->cv.notify_all();
}

// The pool's last owner is a closure on its worker: destroying it there neither deadlocks nor touches freed state.
TEST(WorkerPool, DestroyedFromItsOwnWorker) {
  auto pool = std::make_shared<std::unique_ptr<WorkerPool>>(std::make_unique<WorkerPool>(1, 4));
  std::atomic<bool> done{false};
  WorkerPool* raw = pool->get();
  ASSERT_TRUE(raw->post([pool, &done] {
    pool->reset();  // ~WorkerPool on its own worker thread
    done = true;
  }));
  pool.reset();
  for (int i = 0; i < 1000 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(done);
}

}  // namespace
}  // namespace ds
