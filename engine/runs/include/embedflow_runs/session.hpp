// The steps of `embedflow run` between the command line and the runtime, shared by the CLI and
// the Python module so both load plugins, apply overrides, plan caches, record and report a run
// the same way:
//
//   const LoadedPlugins& p = loaded_plugins(user_dirs, graph_plugin_dirs(graph));   // ConfigError
//   std::vector<Diagnostic> problems;
//   ResolvedGraph g = prepare_graph(load_graph_file(graph, problems), problems, sets, seed, p.registry);
//   if (problems.empty()) { RunOutcome o = execute_run(g, request); ...; runs::write_run_report(o.record_dir, quiet); }
//
// The functions print nothing except where the CLI always printed (the cache plan with
// --explain-cache, the dry-run summary, the report line): those go to RunRequest::messages.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "embedflow/error.hpp"
#include "embedflow/registry.hpp"
#include "embedflow_engine/graph.hpp"
#include "embedflow_engine/plugin_loader.hpp"
#include "embedflow_engine/runtime.hpp"
#include "embedflow_runs/plugins.hpp"

namespace embedflow::runs {

// Applies the seed override and the --set assignments in order, then resolves the graph.
// Problems are appended to `problems` (shape problems do not stop resolution, so one pass
// reports everything it can); the result is runnable only when `problems` stays empty. Logs the
// nodes left out by `enabled: false`.
engine::ResolvedGraph prepare_graph(engine::GraphSpec spec, std::vector<Diagnostic>& problems,
                                    const std::vector<std::string>& sets, std::optional<std::uint64_t> seed,
                                    const Registry& registry);

// What a run needs beyond its resolved graph: the run record's facts and the CLI's switches.
struct RunRequest {
  std::string graph_file;               // as given (the record names it; the cache keys on it)
  std::vector<std::string> command;     // argv, or the Python call, for the record
  std::vector<std::string> overrides;   // --set assignments, in order
  std::optional<std::uint64_t> seed_override;
  int threads = 0;                      // 0 = every core
  std::string out_option;               // --out; empty: the graph's own choice
  std::string cache_dir;                // empty: $EMBEDFLOW_CACHE_DIR, else ~/.cache/embedflow
  bool no_cache = false, rebuild_cache = false, explain_cache = false, dry_run = false;
  bool progress = false;                // the progress line on stderr
  std::string trace_path;
  std::string from_record, graph_sha256;  // --from: the record repeated, its graph's hash
  const std::atomic<bool>* stop = nullptr;
  std::vector<engine::LoadedPlugin> plugins;  // for the record's versions
  // Extra observers of node outputs, by node index (the Python module's stream taps). A tapped
  // node that the cache plan would skip (every consumer replays) is a ConfigError.
  std::map<std::size_t, std::shared_ptr<engine::OutputTap>> taps;
  // Consumers of node outputs from outside the graph, by node index (a stream's reader): the node
  // counts one as a consumer until it stops (engine::ExternalConsumer).
  std::map<std::size_t, std::shared_ptr<engine::ExternalConsumer>> consumers;
  std::ostream* messages = nullptr;     // --explain-cache and the dry-run line; null: std::cerr
  // Called just before and just after run_graph (the CLI installs and removes its signal
  // handlers there, and maps a drained SIGTERM to 143).
  std::function<void()> before_run;
  std::function<void(engine::RunResult&)> after_run;
};

struct RunOutcome {
  engine::RunResult result;
  bool dry_run = false;                  // nothing ran; result is empty
  std::filesystem::path record_dir;      // where run.json is (empty after a dry run)
};

// Plans the caches, writes the run record, runs the graph and finishes the record. Throws
// DataError when a cache entry cannot be planned and embedflow::Error when the output folder
// cannot be written (the CLI's exit code 1 for both); a failing node is a RunResult, not a throw.
RunOutcome execute_run(const engine::ResolvedGraph& graph, const RunRequest& request);

}  // namespace embedflow::runs
