// `embedflow sweep`: a graph over a grid of variables and seeds (embedflow_runs/sweep.hpp).
#include <csignal>
#include <filesystem>
#include <iostream>

#include "cli.hpp"
#include "embedflow_runs/sweep.hpp"

namespace embedflow::cli {
using namespace engine;
using namespace runs;
namespace fs = std::filesystem;

int cmd_sweep(const std::vector<std::string>& args) {
  Common c;
  runs::SweepOptions o;
  std::vector<std::string> grid, points;
  std::string out;
  bool no_report = false;
  po::options_description desc(
      "embedflow sweep GRAPH --grid VAR=v1,v2 [--grid ...] [--seeds N|a,b,c] [--jobs J] [options]\n\n"
      "Runs GRAPH once per point of the grid's cross product (or per --point) and per seed, each point a\n"
      "run folder under the sweep folder; stages whose cache fingerprint is the same at several points are\n"
      "computed once and replayed. Writes SWEEP/sweep.json (points, per-stage compute/replay counts, every\n"
      "results table as mean and 95% t-interval across seeds, paired t-tests) and SWEEP/report.html. Run\n"
      "again, it skips the points that completed");
  desc.add_options()("help,h", "this help")
      ("grid", po::value(&grid)->composing(), "VAR=v1,v2,...: an axis of the grid (a variable or node.param; repeatable)")
      ("point", po::value(&points)->composing(), "VAR=v;VAR2=w: one listed point (repeatable; instead of --grid)")
      ("seeds", po::value(&o.seeds), "N seeds (the graph's seed and the N-1 after it) or a list 1,2,3")
      ("jobs,J", po::value(&o.jobs)->default_value(1), "points run at a time (at most the machine's cores)")
      ("threads,j", po::value(&o.threads)->default_value(0), "each point's worker threads (default: cores / jobs)")
      ("out,o", po::value(&out), "the sweep folder (default: out/<graph name>-sweep)")
      ("cache-dir", po::value(&o.cache_dir), "stage cache directory shared by the points (default: $EMBEDFLOW_CACHE_DIR, else ~/.cache/embedflow)")
      ("select", po::value(&o.select), "validation metric that picks the best variant: [node/][label/]metric (e.g. val/LMNN/map)")
      ("then", po::value(&o.then)->composing(), "override for the selected variant's one final run, e.g. split=test (repeatable)")
      ("baseline", po::value(&o.baselines)->composing(), "a row label table.md compares every row with by paired t-tests (repeatable)")
      ("against", po::value(&o.against)->composing(),
       "METRIC:ROW: the report also charts every metric against METRIC of each variant's row whose label starts with ROW, "
       "e.g. label_precision:pair set (repeatable)")
      ("no-report", po::bool_switch(&no_report), "write no report.html (the points' nor the sweep's)");
  std::string graph;
  if (int r = parse_graph_command("sweep", desc, args, c, graph); r >= 0) return r;
  o.graph = graph;
  o.sets = c.sets;
  o.plugin_path = c.plugin_path;
  o.out = out;
  o.report = !no_report;
  o.command = g_command;
  std::error_code ec;
  o.executable = fs::read_symlink("/proc/self/exe", ec).string();
  for (const auto& g : grid) o.grid.push_back(runs::parse_grid_axis(g));
  for (const auto& p : points) o.points.push_back(runs::parse_point(p));
  o.stop = &g_stop;
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  runs::SweepResult r = runs::run_sweep(o);
  std::cerr << "sweep " << r.record.value("status", "") << ": " << (r.dir / runs::kSweepFile).string() << "\n";
  if (r.exit_code == 130 && g_signal.load() == SIGTERM) return 128 + SIGTERM;
  return r.exit_code;
}

}  // namespace embedflow::cli
