// A node's context, its wiring, opening and closing, early stop and statistics (node_runtime.hpp).
#include "node_runtime.hpp"

#include <algorithm>

#include "embedflow/log.hpp"

namespace embedflow::engine::exec {

NodeRuntime::NodeRuntime(RunState& rt, std::size_t index, std::unique_ptr<Node> node, bool acts_as_source,
                         bool replaying, std::shared_ptr<OutputTap> tap, std::shared_ptr<ExternalConsumer> external)
    : rt_(rt), index_(index), rn_(rt.graph.nodes[index]), node_(std::move(node)), source_(acts_as_source),
      parallel_(rn_.type->concurrency == Concurrency::parallel && !source_), replaying_(replaying),
      tap_(std::move(tap)), rng_(rn_.seed), external_(std::move(external)), calls_(parallel_) {}

RecordPtr NodeRuntime::side(std::size_t port) const {
  std::lock_guard<std::mutex> lock(side_mutex_);
  return port < side_values_.size() ? side_values_[port] : nullptr;
}

std::unique_ptr<Component> NodeRuntime::make_component(const std::string& param) const {
  if (!rn_.params.has(param)) return nullptr;
  return rt_.graph.registry->instantiate(rn_.params.value(param), derive_seed(rn_.seed, param),
                                         cat("node '", id(), "' param '", param, "'"));
}

void NodeRuntime::build() {
  const std::size_t inputs = rn_.type->inputs.size();
  side_values_.resize(inputs);
  outs_.resize(rn_.type->outputs.size());
  // Stream records wait for the first value of every connected side input, optional ones too
  // (an optional side input may be left unconnected, but once connected the node expects its
  // value, e.g. a photo table to look ids up in); an optional one that ends without a value
  // releases them. A node replayed from its cache has no inputs wired, so it waits for none.
  side_released_.assign(inputs, false);
  for (std::size_t p = 0; p < inputs && !replaying_; ++p)
    if (rn_.type->inputs[p].side && !rn_.in_edges[p].empty()) ++sides_missing_;
  std::size_t stream_edges = 0;
  for (std::size_t p = 0; p < inputs; ++p)
    if (!rn_.type->inputs[p].side) stream_edges += rn_.in_edges[p].size();
  // A parallel node fed by several stream edges gets a serial gate that merges them into one
  // numbered stream, so its outputs can be re-sequenced.
  gated_ = parallel_ && stream_edges > 1;
  if (gated_) {
    in_edges_.push_back(std::make_unique<InEdge>());  // logical edge 0: the gate's output
    gate_edges_ = stream_edges;
  }
  if (source_) {
    source_state_->cap = rn_.spec->in_flight > 0 ? rn_.spec->in_flight : rt_.graph.spec.max_in_flight;
    source_state_->low = source_state_->cap / 2;
  }
  make_flow_nodes();
}

std::pair<std::uint32_t, bool> NodeRuntime::add_in_edge(std::uint32_t port) {
  bool side = rn_.type->inputs[port].side;
  if (gated_ && !side) return {0, true};
  auto e = std::make_unique<InEdge>();
  e->port = port;
  e->side = side;
  in_edges_.push_back(std::move(e));
  return {static_cast<std::uint32_t>(in_edges_.size() - 1), false};
}

void NodeRuntime::connect(std::size_t out_port, NodeRuntime* dst, std::uint32_t dst_port) {
  auto [edge, via_gate] = dst->add_in_edge(dst_port);
  OutEdge oe;
  oe.dst = dst;
  oe.dst_port = dst_port;
  oe.dst_edge = edge;
  oe.via_gate = via_gate;
  oe.side = dst->rn_.type->inputs[dst_port].side;
  outs_[out_port].push_back(oe);
  if (!oe.side && std::find(dst->producers_.begin(), dst->producers_.end(), this) == dst->producers_.end())
    dst->producers_.push_back(this);
}

void NodeRuntime::stop_consuming(bool cut_short) {
  if (cut_short) cut_short_.store(true);
  if (consuming_done_.exchange(true)) return;
  for (NodeRuntime* p : producers_) p->consumer_stopped();
}

void NodeRuntime::consumer_stopped() {
  if (unneeded_.load() || closed_.load()) return;  // a node that has closed gave its whole output
  if (external_ && !external_->stopped()) return;
  std::size_t stream_edges = external_ ? 1 : 0;
  for (const auto& port : outs_)
    for (const OutEdge& oe : port) {
      if (oe.side) continue;
      if (!oe.dst->consuming_done_.load()) return;
      ++stream_edges;
    }
  if (stream_edges == 0 || unneeded_.exchange(true)) return;
  if (source_) {
    log_info(id(), "every consumer is done: stopping after ", records_out_.load(), " records");
    // A parked pump wakes to finish; before the run starts, its first turn finishes instead.
    if (rt_.running.load()) pump_->try_put(0);
  } else {
    log_debug(id(), "every consumer is done: dropping its remaining input");
    stop_consuming(true);
  }
}

void NodeRuntime::open() {
  auto t0 = TraceRecorder::now_ns();
  try {
    CallTimer timed(calls_, CallTimer::every_call);
    node_->open(*this);
  } catch (...) {
    rt_.fail(index_, "open", std::current_exception());
  }
  if (rt_.trace) rt_.trace->span(static_cast<std::uint32_t>(index_), "open", t0, TraceRecorder::now_ns());
}

void NodeRuntime::activate() {
  if (external_) {
    external_->attach([this] { consumer_stopped(); });
    if (external_->stopped()) consumer_stopped();  // it stopped before the run started
  }
  if (source_) {
    if (sides_missing_ == 0) pump_->try_put(0);
  } else if (in_edges_.empty()) {
    // Nothing can ever arrive: close right away (a node whose inputs are all optional).
    Message activation;
    activation.eos = true;
    inbox_->try_put(activation);
  }
}

void NodeRuntime::finish() {
  auto t0 = rt_.trace ? TraceRecorder::now_ns() : 0;
  {
    Emit out(*this, 0, nullptr, nullptr);
    CallTimer timed(calls_, CallTimer::every_call);
    node_->close(out);
  }
  if (rt_.trace) rt_.trace->span(static_cast<std::uint32_t>(index_), "close", t0, TraceRecorder::now_ns());
  if (tap_) tap_->on_finish(!cut_short_.load() && !unneeded_.load());
  closed_.store(true);
  send_eos();
}

void NodeRuntime::send_eos() {
  for (auto& port : outs_)
    for (OutEdge& oe : port) {
      Message m;
      m.eos = true;
      m.count = oe.sent;
      m.port = oe.dst_port;
      m.edge = oe.dst_edge;
      oe.dst->deliver(m, oe.via_gate);
    }
}

std::string NodeRuntime::unfinished_reason() const {
  std::string s;
  for (std::size_t i = 0; i < in_edges_.size(); ++i) {
    const InEdge& e = *in_edges_[i];
    s += cat(" [input '", rn_.type->inputs.empty() ? "" : rn_.type->inputs[e.port].name, "': ",
             e.eos.load() ? "ended" : "open", ", ", e.processed.load(), "/", e.expected.load(), "]");
  }
  return s;
}

NodeStats NodeRuntime::stats() const {
  NodeStats st;
  st.id = id();
  st.records_in = records_in_.load();
  st.records_out = records_out_.load();
  calls_.report(st);
  st.mode = replaying_ ? "replay" : "run";
  st.stopped_early = cut_short_.load() || unneeded_.load();
  st.cache_write = tap_ != nullptr;
  return st;
}

}  // namespace embedflow::engine::exec
