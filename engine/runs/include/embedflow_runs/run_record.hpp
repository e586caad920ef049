// The run record: what a run leaves in its output folder so its results can be trusted and
// reproduced from the folder alone.
//
//   OUT/run.json             graph path and sha256, command line, seed, overrides, versions
//                            (embedflow, git commit, plugins and the libraries they declare, the
//                            shared libraries actually loaded: which BLAS), host, start, end, exit
//                            status, and per node: busy and CPU time, records in and out, cache
//                            hit or miss, the node's last progress report; "results": every
//                            table a node published (embedflow/results.hpp), by node and title
//   OUT/graph.resolved.yaml  the graph as it ran (variables, --set and merge keys applied): a graph
//                            file `embedflow run` accepts as is
//   OUT/metrics.jsonl        one JSON line per progress report that carries metrics, written
//                            while the run goes
//
// run.json is written when the run starts (status "running") and rewritten when it ends, each
// time through a temporary file and a rename, so a crash leaves the start record, never half a
// file. `embedflow run --from OUT/run.json` reruns the recorded graph.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "embedflow/results.hpp"
#include "embedflow_engine/graph.hpp"
#include "embedflow_engine/plugin_loader.hpp"
#include "embedflow_engine/runtime.hpp"

namespace embedflow::runs {

inline constexpr const char* kRunRecordFile = "run.json";
inline constexpr const char* kResolvedGraphFile = "graph.resolved.yaml";
inline constexpr const char* kMetricsFile = "metrics.jsonl";
inline constexpr const char* kRunRecordFormat = "embedflow-run/1";

struct RunRecordInfo {
  std::string run_id;
  std::vector<std::string> command;   // argv as given
  std::string graph_file;             // the graph file as given on the command line
  std::vector<std::string> overrides; // --set assignments, in order
  std::optional<std::uint64_t> seed_override;
  int threads = 0;
  std::string cache_dir;              // empty when no node is cached or --no-cache
  bool no_cache = false;
  std::string from_record;            // --from: the record this run repeats
  std::string graph_sha256;           // --from: the recorded file's hash (the file may have changed)
};

class RunRecorder {
 public:
  // Creates `out_dir`, writes graph.resolved.yaml and the start record, and truncates
  // metrics.jsonl. Throws embedflow::Error naming the path when the folder cannot be written.
  RunRecorder(std::filesystem::path out_dir, RunRecordInfo info, const engine::ResolvedGraph& graph,
              const std::vector<engine::LoadedPlugin>& plugins);
  // Appends one line to metrics.jsonl (thread-safe; reports without metrics are not written).
  void on_progress(std::string_view node, const ProgressReport& report);
  // Keeps a results table a node published (embedflow/results.hpp) for run.json's "results";
  // a node publishing the same title again replaces its table. Thread-safe.
  void on_results(std::string_view node, const ResultTable& table, bool headline = false);
  void on_chart(std::string_view node, const ResultChart& chart);
  void on_figure(std::string_view node, const ResultFigure& figure);
  void on_text(std::string_view node, const std::string& title, const std::string& text);
  // Rewrites run.json with the end time, exit status and per-node figures.
  void finish(const engine::RunResult& result);
  const std::filesystem::path& dir() const { return dir_; }
  const nlohmann::ordered_json& record() const { return record_; }

 private:
  void write_record();
  std::filesystem::path dir_;
  const engine::ResolvedGraph& graph_;
  nlohmann::ordered_json record_;
  std::chrono::steady_clock::time_point start_;
  std::mutex metrics_mutex_;
  std::mutex results_mutex_;
  nlohmann::ordered_json results_ = nlohmann::ordered_json::array();
  nlohmann::ordered_json charts_ = nlohmann::ordered_json::array();
  nlohmann::ordered_json figures_ = nlohmann::ordered_json::array();
  nlohmann::ordered_json texts_ = nlohmann::ordered_json::array();
  std::ofstream metrics_;
};

// The run's output folder: --out, else the graph's `out:`, else its variable `out`, else
// out/<graph file stem>.
std::filesystem::path run_output_dir(const engine::GraphSpec& spec, const std::string& out_option);

// Lower-case hex SHA-256 of a file's bytes. Throws embedflow::Error naming the file.
std::string sha256_file(const std::string& path);

// Reads and checks a run.json. Throws ConfigError naming the file and what is wrong.
nlohmann::ordered_json read_run_record(const std::string& path);

// What differs between two graphs, one line each ("node 'scaled' param 'scale': 2.0 -> 3.0",
// "edge added: a.out -> b.in", "seed: 7 -> 8"); empty when they are the same graph.
std::vector<std::string> graph_differences(const engine::GraphSpec& recorded, const engine::GraphSpec& current);

// Writes `text` to `path` all or nothing (embedflow/atomic_file.hpp): a temporary named after
// this process and a counter, written, flushed, checked and fsynced, then renamed over `path`
// and the folder fsynced; any failure removes the temporary, leaves `path` as it was and throws
// embedflow::Error naming it. Runs of one graph started at once never trip over each other's
// temporary. Unlike a node's output, an interrupted run's record replaces `path`: it says how the
// run ended.
void write_file_replacing(const std::filesystem::path& path, const std::string& text);

// UTC ISO 8601 with milliseconds.
std::string utc_timestamp(std::chrono::system_clock::time_point t);

}  // namespace embedflow::runs
