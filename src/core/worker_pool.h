// WorkerPool: a few background threads running posted closures in order (the HTTP server's constraint compiles, so a
// slow one never holds an I/O thread). The threads are detached and share the queue's state with the pool, so the
// pool may be destroyed by a closure running on one of them (the last owner of what owns the pool let go there):
// destruction stops the workers after their current closure and drops what is still queued, joining nothing.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>

namespace ds {

class WorkerPool {
 public:
  WorkerPool(int threads, size_t max_queued);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Queues fn for a worker; false (fn dropped) when max_queued closures are already waiting or the pool is stopping.
  bool post(std::function<void()> fn);

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace ds
