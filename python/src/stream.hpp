// stream(): one port's records, in order, through a bounded queue, while the graph runs on a
// thread of its own.
#pragma once

#include <pybind11/pybind11.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "embedflow_engine/runtime.hpp"
#include "graph_session.hpp"

namespace embedflow::python {

// The tap on the streamed node. The engine calls it serially, on a worker; a full queue blocks
// that worker, and the message it is handling keeps counting against its sources, so a consumer
// that stops reading stops the sources at their in_flight cap. Once the consumer has gone, records are
// dropped so the graph drains.
class StreamQueue final : public engine::OutputTap {
 public:
  StreamQueue(std::size_t port, std::size_t capacity) : port_(port), capacity_(capacity) {}
  void on_record(std::size_t port, const RecordPtr& record) override {
    if (port != port_) return;
    std::unique_lock<std::mutex> lock(mutex);
    not_full_.wait(lock, [&] { return queue_.size() < capacity_ || abandoned_; });
    if (abandoned_) return;
    queue_.push_back(record);
    changed.notify_all();
  }
  void on_finish(bool) override {}
  // The graph thread has ended.
  void finish(runs::RunOutcome outcome, std::exception_ptr failure) {
    std::lock_guard<std::mutex> lock(mutex);
    outcome_ = std::move(outcome);
    failure_ = failure;
    finished_ = true;
    changed.notify_all();
  }
  void abandon() {
    std::lock_guard<std::mutex> lock(mutex);
    abandoned_ = true;
    queue_.clear();
    not_full_.notify_all();
  }
  bool ready() const { return !queue_.empty() || finished_; }  // call with the mutex held
  RecordPtr pop() {  // call with the mutex held; null at the end
    if (queue_.empty()) return nullptr;
    RecordPtr r = std::move(queue_.front());
    queue_.pop_front();
    not_full_.notify_all();
    return r;
  }
  bool finished() const { return finished_; }
  const runs::RunOutcome& outcome() const { return outcome_; }
  std::exception_ptr failure() const { return failure_; }
  std::size_t size() const { return queue_.size(); }

  std::mutex mutex;
  std::condition_variable changed;

 private:
  std::size_t port_, capacity_;
  std::condition_variable not_full_;
  std::deque<RecordPtr> queue_;
  bool abandoned_ = false, finished_ = false;
  runs::RunOutcome outcome_;
  std::exception_ptr failure_;
};

class Stream {
 public:
  // Prepares the graph, checks `output` ("node" or "node.port") and starts the run. Problems
  // raise GraphError.
  Stream(const GraphArgs& a, const std::string& output, std::size_t capacity, bool as_torch, int threads,
         const std::string& cache_dir, bool no_cache);
  ~Stream();

  // The next record as a dict; StopIteration at the end; the run's failure as NodeError.
  py::dict next();
  // Stops reading (the streamed node and what feeds only it stop; the rest runs to its end) and
  // waits for the run; `interrupt`: stops the whole run instead, as Ctrl-C does.
  void close(bool interrupt = false);

  py::object result() const {
    if (!queue_ || !queue_->finished()) return py::none();
    return outcome_to_python(queue_->outcome());
  }
  const std::string& port() const { return port_name_; }
  std::uint64_t delivered() const { return delivered_; }
  // Closed before the graph ended (or interrupted).
  bool stopped() const { return left_early_ || stop_.load(); }

 private:
  // A run that failed (a node threw, or the cache or output folder could not be used) raises
  // once its records before the failure have been delivered.
  void raise_failure();

  bool as_torch_;
  std::unique_ptr<Prepared> prepared_;
  std::shared_ptr<StreamQueue> queue_;
  std::atomic<bool> stop_{false};
  bool left_early_ = false;
  // The stream's reader as a consumer of the streamed node: leaving the loop stops it.
  std::shared_ptr<engine::ExternalConsumer> reader_ = std::make_shared<engine::ExternalConsumer>();
  std::thread runner_;
  std::string port_name_;
  bool closed_ = false;
  std::uint64_t delivered_ = 0;
};

}  // namespace embedflow::python
