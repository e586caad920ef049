// torch.train's prefetch: the training thread and the records its steps emit (step_queue.hpp).

#include "step_queue.hpp"

namespace embedflow::torchfam {

void Outbox::emit(std::size_t port, RecordPtr record) {
  std::lock_guard<std::mutex> lock(mutex_);
  records_.emplace_back(port, std::move(record));
}

void Outbox::deliver(Emitter& out) {
  std::vector<std::pair<std::size_t, RecordPtr>> ready;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ready.swap(records_);
  }
  for (auto& [port, record] : ready) out.emit(port, std::move(record));
}

StepQueue::StepQueue(std::int64_t depth, Step step) : depth_(depth), step_(std::move(step)) {}

StepQueue::~StepQueue() { stop(); }

void StepQueue::push(const RecordPtr& batch, Emitter& out) {
  if (!thread_.joinable()) thread_ = std::thread([this] { train_arrivals(); });
  {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return arrivals_.size() < static_cast<std::size_t>(depth_) || failure_; });
    if (!failure_) arrivals_.push_back(batch);
  }
  changed_.notify_all();
  outbox_.deliver(out);
  rethrow_failure();
}

void StepQueue::finish(Emitter& out) {
  stop();
  outbox_.deliver(out);
  rethrow_failure();
}

// The training thread: steps on the arrived batches in order until stop().
void StepQueue::train_arrivals() {
  for (;;) {
    RecordPtr batch;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [this] { return !arrivals_.empty() || stopping_; });
      if (arrivals_.empty()) return;
      batch = arrivals_.front();
    }
    try {
      step_(batch, outbox_);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      failure_ = std::current_exception();
    }
    {
      // Popped after the step: the batch in training counts against the depth, so with depth k
      // the engine thread makes k batches ahead of the step in progress, the last of them held
      // in push() until this step ends.
      std::lock_guard<std::mutex> lock(mutex_);
      arrivals_.pop_front();
      if (failure_) arrivals_.clear();
    }
    changed_.notify_all();
    if (failure_) return;
  }
}

// Lets the training thread finish the batches that arrived, then joins it.
void StepQueue::stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void StepQueue::rethrow_failure() {
  std::exception_ptr e;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    e = failure_;
  }
  if (e) std::rethrow_exception(e);
}

}  // namespace embedflow::torchfam
