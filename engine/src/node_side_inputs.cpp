// A node's side inputs (node_runtime.hpp): the latest value of each, handed to on_side, and the
// stream records held until every connected side input has its first value (or has ended
// without one, when it is optional).
#include "node_runtime.hpp"

namespace embedflow::engine::exec {

void NodeRuntime::on_side_value(InEdge& e, const Message& m) {
  std::deque<Message> ready;
  {
    std::lock_guard<std::mutex> lock(side_mutex_);
    bool first = !side_values_[e.port];
    side_values_[e.port] = m.record;
    if (first && !side_released_[e.port] && sides_missing_.fetch_sub(1) == 1) ready.swap(pending_);
    side_released_[e.port] = true;
  }
  Emit out(*this, m.seq, m.source, nullptr);  // on_side's outputs count afresh
  auto t0 = rt_.trace ? TraceRecorder::now_ns() : 0;
  {
    CallTimer timed(calls_, CallTimer::every_call);
    node_->on_side(e.port, m.record, out);
  }
  if (rt_.trace) rt_.trace->span(static_cast<std::uint32_t>(index_), "side", t0, TraceRecorder::now_ns());
  if (source_ && sides_missing_.load() == 0) pump_->try_put(0);
  // Stream records that waited for this value run now, in arrival order (unless this node is
  // done consuming).
  for (Message& p : ready) {
    if (consuming_done_.load()) {
      bump(in_edges_[p.edge]->processed, parallel_);
      continue;
    }
    HeldCount none(nullptr);  // held records gave their counts back when they were held
    process_stream(p, none);
    bump(in_edges_[p.edge]->processed, parallel_);
  }
}

void NodeRuntime::check_side_ended(const InEdge& e) {
  std::size_t waiting = 0;
  std::deque<Message> ready;
  {
    std::lock_guard<std::mutex> lock(side_mutex_);
    if (side_values_[e.port]) return;
    if (rn_.type->inputs[e.port].optional) {
      // Released once every edge into the port has ended empty: the records go on without it.
      for (const auto& other : in_edges_)
        if (other->port == e.port && (!other->eos.load() || other->expected.load() != 0)) return;
      if (side_released_[e.port]) return;
      side_released_[e.port] = true;
      if (sides_missing_.fetch_sub(1) == 1) ready.swap(pending_);
    } else {
      waiting = pending_.size();
    }
  }
  if (rn_.type->inputs[e.port].optional) {
    if (source_ && sides_missing_.load() == 0) pump_->try_put(0);
    for (Message& p : ready) {
      HeldCount none(nullptr);
      if (!consuming_done_.load()) process_stream(p, none);
      bump(in_edges_[p.edge]->processed, parallel_);
    }
    return;
  }
  throw Error(cat("side input '", rn_.type->inputs[e.port].name, "' ended without a value", 
                  waiting ? cat("; ", waiting, " records waited for it") : ""));
}

}  // namespace embedflow::engine::exec
