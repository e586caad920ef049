// A node's inbox (node_runtime.hpp): the flow-graph nodes that receive its messages, the
// handling of each, its outputs sent on (a parallel node's in input order), the count that says
// when its inputs have ended, and a source's pump. The path every record takes: kept in one
// file so the compiler sees it whole.
#include "node_runtime.hpp"

namespace embedflow::engine::exec {

namespace flow = tbb::flow;

void NodeRuntime::make_flow_nodes() {
  auto concurrency = parallel_ ? flow::unlimited : flow::serial;
  inbox_ = std::make_unique<flow::function_node<Message, flow::continue_msg>>(
      rt_.tbb_graph, concurrency, [this](const Message& m) {
        on_message(m);
        return flow::continue_msg();
      });
  if (gated_)
    gate_ = std::make_unique<flow::function_node<Message, flow::continue_msg>>(
        rt_.tbb_graph, flow::serial, [this](const Message& m) {
          on_gate(m);
          return flow::continue_msg();
        });
  if (source_) {
    pump_ = std::make_unique<flow::function_node<int, flow::continue_msg>>(rt_.tbb_graph, flow::serial, [this](int) {
      pump();
      return flow::continue_msg();
    });
    source_state_->wake = [this] { pump_->try_put(0); };
  }
}

void NodeRuntime::Emit::emit(std::size_t port, RecordPtr record) {
  if (port >= node_.outs_.size())
    throw Error(cat("emitted on output ", port, " but ", node_.rn_.type->name, " has ", node_.outs_.size(), " outputs"));
  if (!record) throw Error("emitted a null record");
  if (capture_) {
    capture_->push_back(Output{port, std::move(record)});
    return;
  }
  if (node_.source_) ++seq_;
  node_.dispatch(port, std::move(record), source_, held_);
}

void NodeRuntime::dispatch(std::size_t port, RecordPtr record, SourceState* source, HeldCount* held) {
  bump(records_out_, source_ || parallel_);
  if (tap_) tap_->on_record(port, record);
  std::vector<OutEdge>& edges = outs_[port];
  for (std::size_t i = 0; i < edges.size(); ++i) {
    OutEdge& oe = edges[i];
    if (!oe.side && oe.dst->consuming_done_.load(std::memory_order_relaxed)) continue;  // not wanted
    if (source) {
      if (held) held->count_send(source);
      else source->acquire();
    }
    Message m;  // delivering it hands its record over (node_messages.hpp)
    m.record = i + 1 == edges.size() ? std::move(record) : record;
    m.source = source;
    m.seq = oe.sent++;
    m.port = oe.dst_port;
    m.edge = oe.dst_edge;
    oe.dst->deliver(m, oe.via_gate);
  }
}

void NodeRuntime::on_gate(const Message& in) {
  HeldCount count(in.source);  // the forwarded copy takes the count over
  if (rt_.cancelled.load(std::memory_order_relaxed)) return;
  if (in.eos) {
    if (++gate_eos_ == gate_edges_) {
      Message e;
      e.eos = true;
      e.count = gate_forwarded_;
      inbox_->try_put(e);
    }
    return;
  }
  Message m = in;
  m.seq = gate_forwarded_++;
  m.edge = 0;
  count.take();
  inbox_->try_put(m);
}

void NodeRuntime::on_message(const Message& m) {
  HeldCount count(m.source);
  if (rt_.cancelled.load(std::memory_order_relaxed)) return;
  try {
    if (in_edges_.empty()) {  // the activation message of an input-less node
      try_finish();
      return;
    }
    InEdge& e = *in_edges_[m.edge];
    if (m.eos) {
      e.expected.store(m.count);
      e.eos.store(true);
      // On a parallel node the side value may still be in flight on another task when its
      // EOS is handled: only an edge that carried nothing is known to have ended empty.
      if (e.side && m.count == 0) check_side_ended(e);
      try_finish();
      return;
    }
    if (e.side) {
      on_side_value(e, m);
    } else if (consuming_done_.load(std::memory_order_relaxed)) {
      // Counted as handled, unprocessed: end of stream still arrives when the producers stop.
    } else {
      if (sides_missing_.load() > 0) {
        std::lock_guard<std::mutex> lock(side_mutex_);
        if (sides_missing_.load() > 0) {
          // Held until the side value arrives, the record no longer counts as in flight for
          // its source: the source may be what the side value waits for (a trainer needing
          // all of a stream that also feeds this node), and counting it would stall it.
          pending_.push_back(m);
          pending_.back().source = nullptr;
          return;
        }
      }
      process_stream(m, count);
    }
    bump(e.processed, parallel_);
    try_finish();
  } catch (...) {
    rt_.fail(index_, m.eos ? "close" : "process", std::current_exception());
  }
}

void NodeRuntime::process_stream(const Message& m, HeldCount& count) {
  bump(records_in_, parallel_);
  auto t0 = rt_.trace ? TraceRecorder::now_ns() : 0;
  if (!parallel_) {
    Emit out(*this, m.seq, m.source, nullptr, &count);
    CallTimer timed(calls_, CallTimer::sampled);
    node_->process(m.port, m.record, out);
  } else {
    std::vector<Output> captured;
    Emit out(*this, m.seq, m.source, &captured);
    {
      CallTimer timed(calls_, CallTimer::sampled);
      node_->process(m.port, m.record, out);
    }
    resequence(m.seq, std::move(captured), m.source, count);
  }
  if (rt_.trace) rt_.trace->span(static_cast<std::uint32_t>(index_), "process", t0, TraceRecorder::now_ns());
}

// Emits a parallel node's outputs in input order: results that arrive early wait in a map,
// keeping their message's in-flight count until they are sent.
void NodeRuntime::resequence(std::uint64_t seq, std::vector<Output> outputs, SourceState* source, HeldCount& count) {
  std::lock_guard<std::mutex> lock(reorder_mutex_);
  if (seq != next_seq_) {
    early_.emplace(seq, std::make_pair(std::move(outputs), count.take()));
    return;
  }
  for (auto& o : outputs) dispatch(o.port, std::move(o.record), source, &count);
  ++next_seq_;
  for (auto it = early_.find(next_seq_); it != early_.end(); it = early_.find(next_seq_)) {
    HeldCount held(it->second.second);
    for (auto& o : it->second.first) dispatch(o.port, std::move(o.record), it->second.second, &held);
    early_.erase(it);
    ++next_seq_;
  }
}

// A node has ended its inputs once every edge's EOS has come and all its messages are handled.
void NodeRuntime::try_finish() {
  if (source_) return;  // sources finish from their pump
  for (const auto& e : in_edges_)
    if (!e->eos.load() || e->processed.load() != e->expected.load()) return;
  if (finished_.exchange(true)) return;
  finish();
}

void NodeRuntime::pump() {
  if (rt_.cancelled.load(std::memory_order_relaxed) || finished_.load()) return;
  try {
    // A bounded quantum, then requeue: other sources sharing the pool get their turn.
    for (int quantum = 0; quantum < 256; ++quantum) {
      if (rt_.stop_requested() || exhausted_ || unneeded_.load(std::memory_order_relaxed)) break;
      if (source_state_->in_flight.load(std::memory_order_acquire) >= source_state_->cap) {
        source_state_->parked.store(true);  // sequentially consistent: see SourceState::release
        // Re-check: messages handled between the test and the park would not wake us.
        if (source_state_->in_flight.load() >= source_state_->cap) return;
        if (!source_state_->parked.exchange(false)) return;  // a release already re-queued us
        continue;
      }
      auto t0 = rt_.trace ? TraceRecorder::now_ns() : 0;
      Emit out(*this, produced_, source_state_.get(), nullptr);
      bool more;
      {
        CallTimer timed(calls_, CallTimer::sampled);
        more = node_->produce(out);
      }
      produced_ = out.sequence();
      if (rt_.trace) rt_.trace->span(static_cast<std::uint32_t>(index_), "produce", t0, TraceRecorder::now_ns());
      if (!more) exhausted_ = true;
    }
    if (rt_.stop_requested() || exhausted_ || unneeded_.load()) {
      if (!finished_.exchange(true)) finish();
      return;
    }
    pump_->try_put(0);
  } catch (...) {
    rt_.fail(index_, "produce", std::current_exception());
  }
}

}  // namespace embedflow::engine::exec
