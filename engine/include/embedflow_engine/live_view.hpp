// What a live view of a running graph reads. The engine draws nothing on the terminal itself:
// a caller of run_graph passes a view in RunOptions::live_view (the runs library's progress
// line, embedflow_runs/progress_line.hpp), and the runtime shows it while the graph runs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "embedflow/progress.hpp"
#include "embedflow_engine/graph.hpp"

namespace embedflow::engine {

// A node's progress reports (progress.hpp) as the runtime has seen them. `first_*` is the first
// report, or the one where the node started over (done below the latest), for rates; times are
// on TraceRecorder's clock (TraceRecorder::now_ns).
struct ReportedProgress {
  bool reported = false;
  ProgressReport latest;  // a report without metrics keeps the last metrics reported
  std::uint64_t first_done = 0;
  std::int64_t first_ns = 0, latest_ns = 0;
};

// One node of a running graph, at one moment.
struct NodeActivity {
  bool runs = false;         // false: not run (every consumer replays from its cache)
  bool parallel = false;     // its calls may use every worker thread, not one
  bool closed = false;       // close() has returned: the node has ended
  std::int64_t busy_ns = 0;  // time inside its calls so far, those under way included
  std::uint64_t source_records = 0;  // records emitted by a source or a replayed node; else 0
  ReportedProgress progress;
};

// A graph while run_graph runs it. Read from the view's own thread.
class RunningGraph {
 public:
  virtual ~RunningGraph() = default;
  virtual const ResolvedGraph& graph() const = 0;
  virtual int threads() const = 0;  // the run's worker threads
  // Every node, indexed like graph().nodes; busy times up to `now_ns` (TraceRecorder::now_ns).
  virtual std::vector<NodeActivity> activity(std::int64_t now_ns) const = 0;
};

// Shown from when every node is open until the graph has drained: made just before the sources
// start and destroyed before run_graph gathers the run's statistics.
class LiveView {
 public:
  virtual ~LiveView() = default;
};

using LiveViewFactory = std::function<std::unique_ptr<LiveView>(const RunningGraph&)>;

}  // namespace embedflow::engine
