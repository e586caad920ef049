// A consumer of a node's output from outside the graph (runtime.hpp): the flag and the call
// into the runtime, kept under one mutex so the run can detach before its nodes go.
#include "embedflow_engine/runtime.hpp"

namespace embedflow::engine {

void ExternalConsumer::stop() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopped_.exchange(true)) return;
  if (on_stop_) on_stop_();
}

bool ExternalConsumer::stopped() const { return stopped_.load(); }

void ExternalConsumer::attach(std::function<void()> on_stop) {
  std::lock_guard<std::mutex> lock(mutex_);
  on_stop_ = std::move(on_stop);
}

void ExternalConsumer::detach() {
  std::lock_guard<std::mutex> lock(mutex_);
  on_stop_ = nullptr;
}

}  // namespace embedflow::engine
