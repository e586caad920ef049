// What every node of one run shares: the graph and options, the oneTBB graph, cancellation and
// the first error, and the progress the nodes report. Not part of the engine's interface.
#pragma once

#include <tbb/flow_graph.h>

#include <atomic>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "embedflow_engine/live_view.hpp"
#include "embedflow_engine/runtime.hpp"
#include "embedflow_engine/trace.hpp"

namespace embedflow::engine::exec {

class RunState {
 public:
  RunState(const ResolvedGraph& g, const RunOptions& o) : graph(g), options(o) {}
  const ResolvedGraph& graph;
  const RunOptions& options;
  tbb::flow::graph tbb_graph;
  std::unique_ptr<TraceRecorder> trace;
  std::atomic<bool> cancelled{false};
  std::atomic<bool> running{false};  // every node open, sources activated
  std::mutex error_mutex;
  std::string error;
  int error_code = 0;
  std::atomic<std::uint64_t> expected_records{0};
  int threads = 1;
  std::unordered_map<std::string, std::size_t> index_of;  // node id -> index
  mutable std::mutex progress_mutex;
  std::vector<ReportedProgress> progress;  // per node, guarded by progress_mutex

  // Notes a node's report for the live view and the run's statistics, then passes it on to
  // RunOptions::on_progress.
  void note_progress(std::string_view id, const ProgressReport& report);

  bool stop_requested() const { return options.stop && options.stop->load(std::memory_order_relaxed); }

  // Records the first failure (located at `node`, in `phase`) and cancels the run.
  void fail(std::size_t node, const char* phase, std::exception_ptr ex);
};

}  // namespace embedflow::engine::exec
