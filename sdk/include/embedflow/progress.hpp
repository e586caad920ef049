// What a running node says about itself while it works, and what the run is called.
//
// Progress: a node that knows how far along it is (a trainer at step 45 of 600, an evaluator at
// query 3000 of 10000) reports it, with whatever scalars describe the moment (loss, learning
// rate, samples/s). The engine shows the report of the stage that bounds the run on the
// terminal's progress line and appends every report that carries metrics to the run's
// metrics.jsonl, so a node never formats a progress bar or opens a metrics file itself:
//
//   embedflow::ProgressReport p;
//   p.done = step; p.total = steps; p.unit = "steps";
//   p.metrics = {{"loss", loss}, {"lr", lr}, {"samples_per_s", rate}};
//   embedflow::report_progress(ctx, p);
//
// Reporting is cheap when nobody listens (one atomic load), and safe from any thread.
//
// Run id: the engine names each run (UTC start time and a random suffix) before any node opens.
// Every top-level JSON object written through JsonWriter (report_files.hpp) carries it as its
// first key, "run_id", so a metrics file can always be traced to the run.json that made it.
//
// Status line: the one line a terminal shows below the log (the progress line). Log lines
// (log.hpp) clear it, print, and draw it again, as tqdm.write does, so neither garbles the other.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace embedflow {

class NodeContext;

struct ProgressReport {
  std::uint64_t done = 0;   // units finished so far
  std::uint64_t total = 0;  // 0 when unknown
  std::string unit;         // "steps", "queries", "epochs"; empty: "items"
  std::vector<std::pair<std::string, double>> metrics;  // in the order they should be shown
};

// Reports the progress of the node `ctx` belongs to.
void report_progress(const NodeContext& ctx, const ProgressReport& report);
// The same by node id (for code that holds the id but not the context).
void report_progress(std::string_view node_id, const ProgressReport& report);

// Where reports go (the engine installs one per run). An empty sink drops them. Returns the
// sink it replaces. The sink is called on the reporting thread and must be thread-safe.
using ProgressSink = std::function<void(std::string_view node_id, const ProgressReport& report)>;
ProgressSink set_progress_sink(ProgressSink sink);

// The current run's id; empty outside a run (tests running single nodes, inspect, validate).
std::string run_id();
void set_run_id(std::string id);
// A new id: "20261125T145000Z-3fa9c2" (UTC start, 24 random bits), sortable by time.
std::string make_run_id();

// The line drawn below the log on a terminal; empty removes it. Drawn on stderr with "\r\033[K",
// so only set it when stderr is a terminal.
void set_status_line(std::string line);

}  // namespace embedflow
