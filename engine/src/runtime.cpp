// run_graph (runtime.hpp): the run's sequence. Nodes are made and wired, opened in topological
// order, shown by the live view while the sources run and the graph drains, and then read for
// the run's result. The nodes themselves are node_runtime.hpp's.
#include "embedflow_engine/runtime.hpp"

#include <tbb/global_control.h>

#include <chrono>
#include <thread>

#include "embedflow/atomic_file.hpp"
#include "embedflow/log.hpp"
#include "embedflow_engine/log_summary.hpp"
#include "embedflow_engine/trace.hpp"
#include "node_runtime.hpp"
#include "run_state.hpp"

namespace embedflow::engine {
namespace {

using exec::NodeRuntime;
using exec::RunState;
using Nodes = std::vector<std::unique_ptr<NodeRuntime>>;

// The running graph as RunOptions::live_view reads it.
class LiveRun final : public RunningGraph {
 public:
  LiveRun(const RunState& rt, const Nodes& nodes) : rt_(rt), nodes_(nodes) {}
  const ResolvedGraph& graph() const override { return rt_.graph; }
  int threads() const override { return rt_.threads; }
  std::vector<NodeActivity> activity(std::int64_t now_ns) const override {
    std::vector<NodeActivity> out(nodes_.size());
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      if (!nodes_[i]) continue;
      out[i].runs = true;
      out[i].parallel = nodes_[i]->parallel();
      out[i].busy_ns = nodes_[i]->busy_ns(now_ns);
      out[i].closed = nodes_[i]->closed();
      out[i].source_records = nodes_[i]->source_records();
    }
    std::lock_guard<std::mutex> lock(rt_.progress_mutex);
    for (std::size_t i = 0; i < nodes_.size(); ++i) out[i].progress = rt_.progress[i];
    return out;
  }

 private:
  const RunState& rt_;
  const Nodes& nodes_;
};

// Output files committed while the run drains after SIGINT/SIGTERM go to `<path>.partial`
// (atomic_file.hpp), so an interrupted run never replaces a complete file.
struct InterruptScope {
  explicit InterruptScope(const std::atomic<bool>* stop) { set_output_interrupt_flag(stop); }
  ~InterruptScope() { set_output_interrupt_flag(nullptr); }
};

const NodePlan* plan_of(const RunOptions& options, std::size_t node) {
  return options.plans ? &(*options.plans)[node] : nullptr;
}

// One runtime per node that runs (a replayed node's stands in for it as a source); a skipped
// node has none. Stops at the first node whose body cannot be made.
Nodes make_nodes(RunState& rt, std::vector<std::shared_ptr<exec::SourceState>>& source_states) {
  const RunOptions& options = rt.options;
  Nodes nodes(rt.graph.nodes.size());
  for (std::size_t i = 0; i < rt.graph.nodes.size(); ++i) {
    NodePlan* plan = options.plans ? &(*options.plans)[i] : nullptr;
    if (plan && plan->mode == NodePlan::Mode::skip) continue;
    const ResolvedNode& rn = rt.graph.nodes[i];
    std::unique_ptr<Node> body;
    bool acts_as_source = rn.type->source;
    bool replaying = plan && plan->mode == NodePlan::Mode::replay;
    if (replaying) {
      body = std::move(plan->replay);
      acts_as_source = true;
    } else {
      try {
        body = rn.type->create();
      } catch (...) {
        rt.fail(i, "create", std::current_exception());
        break;
      }
    }
    nodes[i] = std::make_unique<NodeRuntime>(rt, i, std::move(body), acts_as_source, replaying,
                                              plan ? plan->tap : nullptr, plan ? plan->consumer : nullptr);
    nodes[i]->build();
    source_states.push_back(nodes[i]->source_state());
  }
  return nodes;
}

// Wires the edges between nodes that run, then opens them in topological order so a node may
// rely on its producers being ready. What the nodes log meanwhile is held and printed when all
// are open, an info line that several logged word for word printed once naming them
// (log_summary.hpp).
void wire_and_open(RunState& rt, const Nodes& nodes) {
  for (const ResolvedEdge& e : rt.graph.edges) {
    if (!nodes[e.from.node] || !nodes[e.to.node]) continue;  // an edge into a skipped or replayed part
    // A replayed node has no inputs: its upstream edges are not wired.
    const NodePlan* plan = plan_of(rt.options, e.to.node);
    if (plan && plan->mode == NodePlan::Mode::replay) continue;
    nodes[e.from.node]->connect(e.from.port, nodes[e.to.node].get(), static_cast<std::uint32_t>(e.to.port));
  }
  LogSummaryScope summary;
  for (std::size_t i : rt.graph.order) {
    if (!nodes[i] || rt.cancelled) continue;
    nodes[i]->open();
  }
}

// Starts the sources and waits until the graph has drained, with the live view shown meanwhile.
void run_to_end(RunState& rt, const Nodes& nodes) {
  const LiveRun live(rt, nodes);
  std::unique_ptr<LiveView> view;
  if (rt.options.progress && rt.options.live_view && !rt.cancelled) view = rt.options.live_view(live);
  try {
    rt.running.store(true);
    if (!rt.cancelled)
      for (std::size_t i : rt.graph.order)
        if (nodes[i]) nodes[i]->activate();
    rt.tbb_graph.wait_for_all();
    // An outside consumer stopping just before it was detached may have woken a source's pump:
    // drain that too before the nodes go.
    for (const auto& n : nodes)
      if (n) n->detach_external();
    rt.tbb_graph.wait_for_all();
  } catch (...) {
    rt.fail(0, "run", std::current_exception());
  }
}

// Each node's statistics and last progress, and how the run ended.
void collect_result(const RunState& rt, const Nodes& nodes, RunResult& result) {
  const ResolvedGraph& graph = rt.graph;
  for (const auto& n : nodes)
    if (n) result.source_records += n->source_records();
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    NodeStats st;
    if (nodes[i]) {
      st = nodes[i]->stats();
    } else {
      st.id = graph.nodes[i].id();
      st.mode = "skip";
    }
    st.reported_progress = rt.progress[i].reported;
    st.last_progress = rt.progress[i].latest;
    result.stats.push_back(std::move(st));
  }
  if (rt.cancelled) {
    result.exit_code = rt.error_code ? rt.error_code : 1;
    result.error = rt.error;
  } else {
    for (std::size_t i = 0; i < nodes.size(); ++i)
      if (nodes[i] && !nodes[i]->finished()) {
        result.exit_code = 1;
        result.error = cat(node_origin(graph, i), " never reached end of stream:", nodes[i]->unfinished_reason());
        break;
      }
    if (result.exit_code == 0 && rt.stop_requested()) result.exit_code = 130;
  }
}

void write_trace(const RunState& rt) {
  std::vector<std::string> names, types;
  for (const auto& n : rt.graph.nodes) {
    names.push_back(n.id());
    types.push_back(n.type ? n.type->name : "");
  }
  rt.trace->write(rt.options.trace_path, names, types);
  if (rt.trace->dropped()) log_warning("trace", rt.trace->dropped(), " events past the first 4M were not recorded");
}

}  // namespace

RunResult run_graph(const ResolvedGraph& graph, const RunOptions& options) {
  tune_process_allocator();
  RunResult result;
  InterruptScope interrupt_scope(options.stop);
  int threads = options.threads > 0 ? options.threads : static_cast<int>(std::thread::hardware_concurrency());
  if (threads < 1) threads = 1;
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
  auto t_start = std::chrono::steady_clock::now();

  RunState rt(graph, options);
  rt.threads = threads;
  rt.progress.resize(graph.nodes.size());
  for (std::size_t i = 0; i < graph.nodes.size(); ++i) rt.index_of[graph.nodes[i].id()] = i;
  // Nodes report progress through the SDK (progress.hpp); this run listens until it ends.
  ProgressSink previous_sink =
      set_progress_sink([&rt](std::string_view id, const ProgressReport& r) { rt.note_progress(id, r); });
  if (!options.trace_path.empty()) rt.trace = std::make_unique<TraceRecorder>();

  // Messages may outlive the node that sent them (left in queues of a cancelled graph), so
  // source states are kept until every node is gone.
  std::vector<std::shared_ptr<exec::SourceState>> source_states;
  Nodes nodes = make_nodes(rt, source_states);
  if (!rt.cancelled) wire_and_open(rt, nodes);
  run_to_end(rt, nodes);
  for (auto& n : nodes)
    if (n) n->release_sources();
  set_progress_sink(std::move(previous_sink));

  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  collect_result(rt, nodes, result);
  if (rt.trace) write_trace(rt);
  nodes.clear();
  return result;
}

}  // namespace embedflow::engine
