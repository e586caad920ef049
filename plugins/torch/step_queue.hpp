// torch.train's prefetch (prefetch > 0): the steps run on a training thread of the node's own,
// so the engine's thread goes back to the upstream nodes and makes the next batches while a step
// runs. Batches are trained on in the order they arrive, so the losses are those of prefetch 0;
// what a step emits is held and handed to the engine's emitter on the engine's own thread
// (docs/torch.md, "Threads and prefetch"). Torch-free.
#pragma once

#include <embedflow/embedflow.hpp>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace embedflow::torchfam {

// What a step emits while it runs on the training thread, handed to the engine's emitter by the
// engine's own thread (process and close) in the order it was emitted.
class Outbox final : public Emitter {
 public:
  void emit(std::size_t port, RecordPtr record) override;
  std::uint64_t sequence() const override { return 0; }  // the trainer derives no seeds from it
  void deliver(Emitter& out);

 private:
  std::mutex mutex_;
  std::vector<std::pair<std::size_t, RecordPtr>> records_;
};

class StepQueue {
 public:
  // Trains on one batch, emitting into `out`; runs on the training thread.
  using Step = std::function<void(const RecordPtr& batch, Emitter& out)>;
  // Up to `depth` batches may arrive ahead of the step in progress.
  StepQueue(std::int64_t depth, Step step);
  // Lets the training thread finish the batches that arrived, then joins it.
  ~StepQueue();
  StepQueue(const StepQueue&) = delete;
  StepQueue& operator=(const StepQueue&) = delete;

  // Queues `batch` for the training thread (started at the first batch), blocking while `depth`
  // batches are ahead of the step in progress; then hands what the steps emitted so far to `out`
  // and rethrows a step's failure.
  void push(const RecordPtr& batch, Emitter& out);
  // At the end of the stream: lets the training thread finish the batches that arrived and joins
  // it; then hands on what they emitted and rethrows a step's failure.
  void finish(Emitter& out);

 private:
  void train_arrivals();
  void stop();
  void rethrow_failure();

  std::int64_t depth_;
  Step step_;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<RecordPtr> arrivals_;  // front: the batch in training, then those waiting
  bool stopping_ = false;
  std::exception_ptr failure_;      // the training thread's, rethrown on the engine's
  Outbox outbox_;
};

}  // namespace embedflow::torchfam
