// What the parts of `embedflow sweep` share (embedflow_runs/sweep.hpp is the interface): the
// variants and points a sweep plans (sweep_plan.cpp), how points run as child processes and what
// they leave (sweep_points.cpp); sweep.cpp schedules them and writes sweep.json, sweep_results.cpp
// aggregates their results tables across seeds.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "embedflow/registry.hpp"
#include "embedflow_engine/graph.hpp"
#include "embedflow_runs/sweep.hpp"

namespace embedflow::runs::sweep_detail {

using json = nlohmann::ordered_json;

std::string trim(const std::string& s);

using Assignments = std::vector<std::pair<std::string, std::string>>;

struct Variant {
  std::string name;
  Assignments values;
};

struct Point {
  std::size_t index = 0, variant = 0;
  std::uint64_t seed = 0;
  std::string name;
  std::filesystem::path dir;                        // as the child is given it
  std::vector<std::string> sets;       // the child's --set list (base, then the variant's)
  std::vector<std::string> entries;    // stage cache entries its cached nodes use
  std::string status = "pending";      // pending, running, ok, failed, interrupted
  int exit_code = -1;
  double seconds = 0;
  std::string error;
  bool resumed = false;
  json nodes = json::object();         // node id -> mode (run, replay, skip)
  pid_t pid = -1;
  std::chrono::steady_clock::time_point started;
};

// "(graph as written)", or "VAR=v, VAR2=w".
std::string variant_name(const Assignments& values);
// The variants of a sweep: the grid's cross product, or the listed points. Throws ConfigError.
std::vector<Variant> build_variants(const SweepOptions& o);
// "VAR=v" for each assignment, as --set takes them.
std::vector<std::string> assignment_sets(const Assignments& a);

struct Plan {
  std::vector<Variant> variants;
  std::vector<std::uint64_t> seeds;
  std::vector<Point> points;
  std::vector<engine::GraphSpec> variant_specs;  // each variant resolved with one placeholder out: for diffs
  std::vector<std::string> node_order;   // node ids in the first point's graph order
  std::set<std::string> cached_nodes;
  std::map<std::string, std::string> node_types;
};

// Resolves and validates every point; computes the stage cache entries each point's cached
// nodes use. Throws ConfigError listing every problem with the points it occurs at.
Plan plan_points(const SweepOptions& o, const std::filesystem::path& dir, const Registry& registry);

// The folder's lock: held for the sweep's life, released by the kernel if the process dies.
class FolderLock {
 public:
  explicit FolderLock(const std::filesystem::path& dir);
  ~FolderLock();
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

 private:
  int fd_ = -1;
};

// Reads what a finished child left: its run record's status, error, per-node modes.
void read_point_outcome(Point& p, int exit_code);
// A completed point from an earlier sweep into this folder is kept, unless the graph file has
// changed since it ran (it runs again); one that ran with other overrides means the folder holds
// a different sweep. Returns how many completed points run again for a changed graph.
std::size_t mark_resumed(std::vector<Point>& points, const std::string& graph);
// The command line that runs a point: `embedflow run` with its folder, seed, threads and overrides.
std::vector<std::string> point_argv(const SweepOptions& o, const Point& p, const std::filesystem::path& cache_dir,
                                    int threads);
// Starts a child in its own process group (a terminal's Ctrl-C reaches the sweep alone, which
// passes one SIGINT on, so a child drains instead of dying on a second signal), its output to
// `log`.
pid_t spawn(const std::vector<std::string>& argv, const std::filesystem::path& log);
// A waitpid status as a shell reports it (128 + the signal).
int exit_code_of(int status);

}  // namespace embedflow::runs::sweep_detail
