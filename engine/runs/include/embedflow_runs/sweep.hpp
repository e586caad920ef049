// `embedflow sweep`: one graph run over a grid of variable overrides and a list of seeds, each
// point a run of its own (its own output folder and run record) under one sweep folder:
//
//   SWEEP/sweep.json            the points, their status, per-stage compute/replay counts, every
//                               results table aggregated across seeds (mean, sd, 95% t-interval)
//                               with paired t-tests between variants, the graph differences
//                               between variants, and the selection by a validation metric
//   SWEEP/points/NNN-VAR=V-...-seed=S/   one run folder per point (run.json, its outputs, log.txt)
//   SWEEP/selected/             the best point's final run (--select ... --then ...)
//   SWEEP/table.md              every results table as mean [95% interval] over seeds, and each
//                               row's paired t-tests against the --baseline rows
//   SWEEP/report.html           the comparison page
//
// Points run as child processes of the `embedflow` executable, `jobs` at a time, with one stage
// cache directory between them: a cached stage whose fingerprint is the same at several points
// is computed by the first point that needs it and replayed by the others (a point waits while
// another point is computing an entry it needs). Every point is resolved and validated before
// any runs, so a bad value is reported with its point and nothing starts. A sweep folder is
// locked while a sweep runs in it; run again, a sweep skips the points that completed.
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace embedflow::runs {

inline constexpr const char* kSweepFile = "sweep.json";
inline constexpr const char* kSweepFormat = "embedflow-sweep/1";

// One --grid axis: a variable (or node.param) and its values, as --set would take them.
struct SweepAxis {
  std::string variable;
  std::vector<std::string> values;
};

// Parses "VAR=v1,v2,...": values split at commas outside brackets, braces and quotes, so
// "model={type: a, dim: 2},{type: b, dim: 3}" gives two values. Throws ConfigError.
SweepAxis parse_grid_axis(const std::string& text);
// Parses "--seeds N" (the graph's seed and the N-1 after it; `base`) or "--seeds 1,2,3".
std::vector<std::uint64_t> parse_seeds(const std::string& text, std::uint64_t base);
// Parses a listed point "VAR=v;VAR2=w" into its assignments. Throws ConfigError.
std::vector<std::pair<std::string, std::string>> parse_point(const std::string& text);

// "--against METRIC:ROW": chart every results metric against METRIC of the row whose label starts
// with ROW, one x per variant (e.g. label_precision:pair set). Throws ConfigError.
struct AgainstSpec {
  std::string metric, row;
};
AgainstSpec parse_against(const std::string& text);

struct SweepOptions {
  std::string graph;                      // the graph file
  std::vector<SweepAxis> grid;            // cross product of these ...
  std::vector<std::vector<std::pair<std::string, std::string>>> points;  // ... or these points
  std::string seeds;                      // "N" or "a,b,c"; empty: the graph's seed alone
  std::vector<std::string> sets;          // --set applied to every point (before the point's own)
  int jobs = 1;                           // points at a time (at most the machine's cores)
  int threads = 0;                        // each point's --threads; 0: cores / jobs
  std::filesystem::path out;              // the sweep folder; empty: out/<graph stem>-sweep
  std::string cache_dir;                  // empty: the default stage cache
  std::vector<std::string> plugin_path;   // --plugin-path for the points
  std::string executable;                 // the embedflow CLI that runs points
  std::string select;                     // validation metric: "[node/][label/]metric"
  std::vector<std::string> then;          // overrides for the selected point's final run
  std::vector<std::string> baselines;     // row labels table.md compares every row with
  std::vector<std::string> against;       // "METRIC:ROW": the report's charts against a row's metric
  bool report = true;                     // points' report.html and the sweep's
  std::vector<std::string> command;       // argv, for sweep.json
  std::ostream* messages = nullptr;       // progress lines; null: std::cerr
  const std::atomic<bool>* stop = nullptr;  // set by a signal handler: stop starting points, drain
};

struct SweepResult {
  int exit_code = 0;            // 0 every point ran, 1 a point failed, 130 interrupted
  std::filesystem::path dir;    // the sweep folder
  nlohmann::ordered_json record;  // what sweep.json holds
};

// Runs the sweep. Throws embedflow::ConfigError (exit 2) for bad input found before any point
// runs: an empty grid, an unknown variable, a value that fails validation at some point (named),
// a sweep folder locked by another sweep or holding a different sweep.
SweepResult run_sweep(const SweepOptions& options);

// sweep.json's results as Markdown: per table, rows x columns of "mean [lo, hi]" in each column's
// unit, then for each baseline label the difference of every row from it, with the paired test's p.
std::string results_markdown(const nlohmann::ordered_json& sweep, const std::vector<std::string>& baselines);

// Aggregates the results tables of finished points (their run.json "results") across seeds:
// per (table, variant, label, metric) the values by seed and their summary; paired t-tests
// between rows; the best row per metric. `points` and `variants` are sweep.json's arrays.
nlohmann::ordered_json aggregate_results(const std::filesystem::path& sweep_dir, const nlohmann::ordered_json& points,
                                         const nlohmann::ordered_json& variants, const std::vector<std::uint64_t>& seeds);

}  // namespace embedflow::runs
