// One embedflow node on the oneTBB flow graph (runtime.hpp): the context its body sees, its
// wiring, and the handling of what arrives. The members are defined by concern:
//   node_runtime.cpp      the context, wiring, opening and closing, early stop, statistics;
//   node_inbox.cpp        the inbox: messages handled, outputs sent on and re-sequenced, the
//                         end-of-stream count, and a source's pump;
//   node_side_inputs.cpp  side inputs: their values, and the stream records that wait for them.
// Not part of the engine's interface.
#pragma once

#include <tbb/flow_graph.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "call_stats.hpp"
#include "embedflow/node.hpp"
#include "embedflow_engine/runtime.hpp"
#include "node_messages.hpp"
#include "run_state.hpp"

namespace embedflow::engine::exec {

class NodeRuntime final : public NodeContext {
 public:
  NodeRuntime(RunState& rt, std::size_t index, std::unique_ptr<Node> node, bool acts_as_source, bool replaying,
              std::shared_ptr<OutputTap> tap, std::shared_ptr<ExternalConsumer> external = nullptr);

  // --- NodeContext -------------------------------------------------------------------------
  const std::string& id() const override { return rn_.id(); }
  const Params& params() const override { return rn_.params; }
  std::uint64_t seed() const override { return rn_.seed; }
  Rng& rng() override { return rng_; }
  RecordPtr side(std::size_t port) const override;
  const PortSchema& input_schema(std::size_t port) const override { return rn_.input_schemas.at(port); }
  const PortSchema& output_schema(std::size_t port) const override { return rn_.output_schemas.at(port); }
  bool input_connected(std::size_t port) const override { return !rn_.in_edges.at(port).empty(); }
  bool output_connected(std::size_t port) const override { return !rn_.out_edges.at(port).empty(); }
  int threads() const override { return rt_.threads; }
  bool stop_requested() const override { return rt_.stop_requested(); }
  void set_expected_items(std::uint64_t n) override {
    if (source_) rt_.expected_records.fetch_add(n);
  }
  const std::string& graph_file() const override { return rt_.graph.spec.file; }
  const Registry& registry() const override { return *rt_.graph.registry; }
  std::unique_ptr<Component> make_component(const std::string& param) const override;
  void done_consuming() override { stop_consuming(false); }
  bool output_wanted() const override { return !unneeded_.load(std::memory_order_relaxed); }

  // --- wiring and start --------------------------------------------------------------------
  void build();
  // Registers an incoming edge; returns (logical edge index, via gate).
  std::pair<std::uint32_t, bool> add_in_edge(std::uint32_t port);
  void connect(std::size_t out_port, NodeRuntime* dst, std::uint32_t dst_port);
  void open();
  // Called once every node is open and every edge made.
  void activate();
  void deliver(const Message& m, bool via_gate) {
    if (via_gate) gate_->try_put(m);
    else inbox_->try_put(m);
  }

  // --- early stop: consumers done, producers stop -----------------------------------------
  // This node takes no more stream records; `cut_short`: because its own consumers are done (its
  // output is then incomplete), not by its own choice. Producers whose every stream consumer is
  // now done stop in turn.
  void stop_consuming(bool cut_short);
  void consumer_stopped();
  // The run has drained: a consumer from outside that stops from now on reaches no node.
  void detach_external() {
    if (external_) external_->detach();
  }

  // --- what the run reads ------------------------------------------------------------------
  void release_sources() { source_state_->done.store(true); }
  std::shared_ptr<SourceState> source_state() const { return source_state_; }
  bool finished() const { return finished_.load(); }
  bool closed() const { return closed_.load(); }  // close() has returned: the node has ended
  std::string unfinished_reason() const;
  NodeStats stats() const;
  std::int64_t busy_ns(std::int64_t now) const { return calls_.busy_ns(now); }
  bool parallel() const { return parallel_; }
  // Records a source (or a replayed node) has emitted.
  std::uint64_t source_records() const { return source_ ? records_out_.load(std::memory_order_relaxed) : 0; }

 private:
  // The emitter a node body's calls get: sends outputs on (a source numbers them), or captures a
  // parallel node's for re-sequencing.
  class Emit final : public Emitter {
   public:
    // `source`: the in-flight count the outputs join (that of the message being handled; a
    // source node's own for the records it produces).
    Emit(NodeRuntime& n, std::uint64_t seq, SourceState* source, std::vector<Output>* capture,
         HeldCount* held = nullptr)
        : node_(n), seq_(seq), source_(source), capture_(capture), held_(held) {}
    void emit(std::size_t port, RecordPtr record) override;
    std::uint64_t sequence() const override { return seq_; }

   private:
    NodeRuntime& node_;
    std::uint64_t seq_;
    SourceState* source_;
    std::vector<Output>* capture_;
    HeldCount* held_;
  };

  // The inbox (node_inbox.cpp).
  void make_flow_nodes();
  // `held`: the count of the message being handled, which the first message sent may take over.
  void dispatch(std::size_t port, RecordPtr record, SourceState* source, HeldCount* held = nullptr);
  void on_gate(const Message& in);
  void on_message(const Message& m);
  // `count` is the message's in-flight count: a parallel node's outputs held for re-sequencing
  // take it over.
  void process_stream(const Message& m, HeldCount& count);
  void resequence(std::uint64_t seq, std::vector<Output> outputs, SourceState* source, HeldCount& count);
  void try_finish();
  void pump();
  // Side inputs (node_side_inputs.cpp).
  void on_side_value(InEdge& e, const Message& m);
  void check_side_ended(const InEdge& e);
  // The end (node_runtime.cpp).
  void finish();
  void send_eos();

  RunState& rt_;
  std::size_t index_;
  const ResolvedNode& rn_;
  std::unique_ptr<Node> node_;
  bool source_;
  bool parallel_ = false;
  bool replaying_ = false;
  std::shared_ptr<OutputTap> tap_;
  Rng rng_;

  std::vector<std::unique_ptr<InEdge>> in_edges_;
  std::vector<std::vector<OutEdge>> outs_;
  std::unique_ptr<tbb::flow::function_node<Message, tbb::flow::continue_msg>> inbox_;
  std::unique_ptr<tbb::flow::function_node<Message, tbb::flow::continue_msg>> gate_;
  std::unique_ptr<tbb::flow::function_node<int, tbb::flow::continue_msg>> pump_;
  bool gated_ = false;
  std::size_t gate_edges_ = 0, gate_eos_ = 0;
  std::uint64_t gate_forwarded_ = 0;

  mutable std::mutex side_mutex_;
  std::vector<RecordPtr> side_values_;
  std::atomic<int> sides_missing_{0};
  std::vector<bool> side_released_;  // per input port: no longer counted in sides_missing_
  std::deque<Message> pending_;

  std::mutex reorder_mutex_;
  std::uint64_t next_seq_ = 0;
  std::map<std::uint64_t, std::pair<std::vector<Output>, SourceState*>> early_;

  std::shared_ptr<SourceState> source_state_ = std::make_shared<SourceState>();
  bool exhausted_ = false;
  std::uint64_t produced_ = 0;

  std::atomic<bool> finished_{false};
  // Early stop: the producers of this node's stream inputs; it takes no more stream records;
  // every stream consumer of its outputs is done; its output was cut short by that.
  std::vector<NodeRuntime*> producers_;
  std::shared_ptr<ExternalConsumer> external_;  // one more consumer of the output, outside the graph
  std::atomic<bool> consuming_done_{false}, unneeded_{false}, cut_short_{false};
  std::atomic<bool> closed_{false};  // close() has returned: the output is whole
  std::atomic<std::uint64_t> records_in_{0}, records_out_{0};
  CallStats calls_;
};

}  // namespace embedflow::engine::exec
