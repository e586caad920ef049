// embedflow: run, validate, inspect and draw dataflow graphs.
//
//   embedflow run G.yaml [--set node.param=value]... [--threads N] [--seed N] [--trace t.json] [--out DIR]
//   embedflow run --from OUT/run.json  the recorded run again (its resolved graph, seed, threads)
//   embedflow validate G.yaml          every problem at once, as FILE:LINE:COL: node 'x': ...
//   embedflow inspect [TYPE] [--json]  node and component types, like gst-inspect
//   embedflow dot G.yaml [-o g.dot]    Graphviz drawing with port schemas
//   embedflow cache ls|info|rm|gc      stage cache entries
//   embedflow report OUT [OUT2 ...]    one self-contained HTML page about runs, comparing several
//   embedflow sweep G.yaml --grid VAR=a,b [--seeds N] [--jobs J]   runs over a grid and seeds
//   embedflow export CHECKPOINT -o OUT.pt   a torch.train checkpoint as a TorchScript module
//
// Exit codes: 0 done, 1 runtime failure, 2 invalid usage or graph, 130 interrupted (SIGINT), 143 terminated (SIGTERM).
#include <boost/program_options.hpp>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "embedflow/hdf5/stream_file.hpp"
#include "embedflow/log.hpp"
#include "embedflow/progress.hpp"
#include "embedflow/version.hpp"
#include "embedflow/suggest.hpp"
#include "embedflow_engine/cache.hpp"
#include "embedflow_engine/describe.hpp"
#include "embedflow_engine/graph.hpp"
#include "embedflow_engine/plugin_loader.hpp"
#include "embedflow_runs/plugins.hpp"
#include "embedflow_runs/run_record.hpp"
#include "embedflow_engine/runtime.hpp"
#include "embedflow_runs/session.hpp"
#include "embedflow_runs/report.hpp"
#include "embedflow_runs/sweep.hpp"

namespace po = boost::program_options;
using namespace embedflow;
using namespace embedflow::engine;
using namespace embedflow::runs;
namespace fs = std::filesystem;

namespace {

std::atomic<bool> g_stop{false};
std::vector<std::string> g_command;  // argv, for the run record
std::atomic<int> g_signal{0};

void on_stop_signal(int sig) {
  // The first Ctrl-C (SIGINT) or SIGTERM (kill, a job scheduler's stop) drains the graph, closes
  // outputs and removes temporaries; a second one gets the default behaviour (terminate).
  g_signal.store(sig);
  g_stop.store(true);
  std::signal(sig, SIG_DFL);
}

constexpr int kExitOk = 0, kExitFailure = 1, kExitInvalid = 2;

const char* kUsage =
    "usage: embedflow <command> [options]\n\n"
    "commands:\n"
    "  run GRAPH        run a graph file\n"
    "  validate GRAPH   check a graph file and list every problem\n"
    "  inspect [TYPE]   list node and component types, or describe one\n"
    "  dot GRAPH        print the resolved graph as Graphviz\n"
    "  cache ls|info|rm|gc   list, describe and remove stage cache entries\n"
    "  report OUT [OUT2...]  one offline HTML page about runs (run record, graph, metrics, charts,\n"
    "                   images), comparing them when several are named\n"
    "  sweep GRAPH      run a graph over a grid of variables and seeds, sharing stage caches;\n"
    "                   compare the points with intervals and paired tests\n"
    "  export CHECKPOINT -o OUT.pt   write a torch.train checkpoint's model as a TorchScript\n"
    "                   module (the torch plugin's torch.export node, run as a one-node graph)\n"
    "  version          print versions\n\n"
    "Run 'embedflow <command> --help' for its options.\n";

struct Common {
  std::vector<std::string> plugin_path;
  std::vector<std::string> sets;
  bool quiet = false;
  bool verbose = false;
};

void add_common(po::options_description& d, Common& c) {
  d.add_options()
      ("plugin-path", po::value(&c.plugin_path)->composing(), "directory to load plugins from (repeatable; before EMBEDFLOW_PLUGIN_PATH)")
      ("quiet,q", po::bool_switch(&c.quiet), "only errors")
      ("verbose,v", po::bool_switch(&c.verbose), "debug logging");
}

void add_graph_options(po::options_description& d, Common& c) {
  d.add_options()("set", po::value(&c.sets)->composing(), "override a parameter: node.param=value (repeatable)");
}

void configure_logging(const Common& c) {
  if (c.quiet) set_log_level(LogLevel::warning);
  if (c.verbose) set_log_level(LogLevel::debug);
}

// `plugin_dirs:` of a graph, relative to the graph file's folder, checked to exist.
bool spec_plugin_dirs(const GraphSpec& spec, const std::string& graph, std::vector<std::string>& dirs) {
  try {
    auto found = runs::spec_plugin_dirs(spec, graph);
    dirs.insert(dirs.end(), found.begin(), found.end());
  } catch (const ConfigError& e) {
    std::cerr << "embedflow: " << e.what() << "\n";
    return false;
  }
  return true;
}

bool graph_plugin_dirs(const std::string& graph, std::vector<std::string>& dirs) {
  std::vector<Diagnostic> ignored;  // the real parse reports them
  return spec_plugin_dirs(load_graph_file(graph, ignored), graph, dirs);
}

const LoadedPlugins* g_plugins = nullptr;

// What names the types a run needs: the graph's text and the --set values ("" when the file
// cannot be read: then every plugin loads, and the parse reports the file).
std::string types_text(const std::string& graph_text, const Common& c) {
  std::string text = graph_text;
  for (const auto& s : c.sets) text += "\n" + s;
  return text;
}
std::string graph_file_text(const std::string& graph) {
  std::ifstream in(graph, std::ios::binary);
  if (!in) return "";
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The process's plugins (runs::loaded_plugins: the libraries stay resident until exit), or null
// after printing why they could not be loaded. `graph_text`: load only the plugins the graph's
// text names (runs::load_plugins_for); empty: every plugin.
const LoadedPlugins* load_cli_plugins(const Common& c, const std::vector<std::string>& extra_dirs = {},
                                      const std::string& graph_text = "") {
  try {
    g_plugins = &loaded_plugins(c.plugin_path, extra_dirs, graph_text);
  } catch (const ConfigError& e) {
    std::cerr << "embedflow: " << e.what() << "\n";
    return nullptr;
  }
  return g_plugins;
}

void print_problems(const std::vector<Diagnostic>& problems) {
  for (const auto& d : problems) std::cerr << d.str() << "\n";
  std::cerr << problems.size() << (problems.size() == 1 ? " problem" : " problems") << " found\n";
}

// Overrides and resolves a parsed graph; prints every problem. Returns false when invalid.
bool prepare_spec(GraphSpec spec, std::vector<Diagnostic> problems, const Common& c, std::optional<std::uint64_t> seed,
                  const Registry& registry, ResolvedGraph& out) {
  out = prepare_graph(std::move(spec), problems, c.sets, seed, registry);
  if (!problems.empty()) {
    print_problems(problems);
    return false;
  }
  return true;
}

bool prepare(const std::string& file, const Common& c, std::optional<std::uint64_t> seed, const Registry& registry,
             ResolvedGraph& out) {
  std::vector<Diagnostic> problems;
  GraphSpec spec = load_graph_file(file, problems);
  return prepare_spec(std::move(spec), std::move(problems), c, seed, registry, out);
}

bool args_has(const std::vector<std::string>& args, const std::string& flag) {
  return std::any_of(args.begin(), args.end(), [&](const std::string& a) { return a == flag || a.rfind(flag + "=", 0) == 0; });
}

int parse_or_usage(po::options_description& desc, po::positional_options_description& pos,
                   const std::vector<std::string>& args, po::variables_map& vm, const char* command) {
  try {
    po::store(po::command_line_parser(args).options(desc).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "embedflow " << command << ": " << e.what() << "\n\n" << desc << "\n";
    return kExitInvalid;
  }
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return kExitOk;
  }
  return -1;
}

// The shared preamble of commands that take a graph file: parse the options (GRAPH is the
// positional argument), then load plugins and resolve the graph. Returns an exit code to stop
// with, or -1 to go on.
int parse_graph_command(const char* command, po::options_description& desc, const std::vector<std::string>& args,
                        Common& c, std::string& graph, const std::string* instead_of_graph = nullptr) {
  desc.add_options()("graph", po::value(&graph), "graph file");
  add_graph_options(desc, c);
  add_common(desc, c);
  po::positional_options_description pos;
  pos.add("graph", 1);
  po::variables_map vm;
  if (int r = parse_or_usage(desc, pos, args, vm, command); r >= 0) return r;
  if (graph.empty() && !(instead_of_graph && !instead_of_graph->empty())) {
    std::cerr << "embedflow " << command << ": no graph file given\n";
    return kExitInvalid;
  }
  configure_logging(c);
  return -1;
}

bool load_graph(const std::string& graph, const Common& c, std::optional<std::uint64_t> seed, ResolvedGraph& out) {
  std::vector<std::string> extra;
  if (!graph_plugin_dirs(graph, extra)) return false;
  const LoadedPlugins* plugins = load_cli_plugins(c, extra);
  return plugins && prepare(graph, c, seed, plugins->registry, out);
}

// What `--from OUT/run.json` takes from the record, and how the graph file differs from it now.
struct Rerun {
  nlohmann::ordered_json record;
  std::string resolved_path;  // OUT/graph.resolved.yaml: where the recorded graph's locations point
};

// Warns, naming each difference, when the graph file (with the recorded overrides) no longer
// resolves to the recorded graph, or the plugins' versions changed. The recorded graph runs.
void warn_about_changes(const Rerun& rerun, const std::string& graph, const Common& recorded_sets,
                        const ResolvedGraph& recorded, const Registry& registry) {
  const std::string id = rerun.record.value("run_id", "");
  std::error_code ec;
  if (!fs::exists(graph, ec)) {
    log_warning("run", "graph file ", graph, " of run ", id, " no longer exists; running the recorded graph");
    return;
  }
  std::string old_sha = rerun.record["graph"].value("sha256", ""), new_sha = sha256_file(graph);
  std::vector<Diagnostic> problems;
  GraphSpec spec = load_graph_file(graph, problems);
  // The recorded command line applies to the file as it is now, --seed included.
  if (rerun.record.value("seed_from_command_line", false)) spec.seed = rerun.record.value("seed", spec.seed);
  for (const auto& s : recorded_sets.sets) apply_override(spec, s, problems);
  ResolvedGraph now = resolve(std::move(spec), registry, problems);
  std::vector<std::string> diffs;
  if (!problems.empty()) diffs.push_back("it no longer validates: " + problems.front().str());
  else diffs = graph_differences(recorded.spec, now.spec);
  if (!diffs.empty()) {
    std::string list;
    for (const auto& d : diffs) list += "\n  " + d;
    log_warning("run", graph, " has changed since run ", id, " (sha256 ", old_sha.substr(0, 12), " -> ",
                new_sha.substr(0, 12), "); running the recorded graph, which differs from the file in:", list);
  } else if (old_sha != new_sha) {
    log_info("run", graph, " was edited since run ", id, " but resolves to the same graph");
  }
  std::map<std::string, std::string> before;
  for (const auto& p : rerun.record["versions"].value("plugins", nlohmann::ordered_json::array()))
    before[p.value("name", "")] = p.value("version", "");
  if (g_plugins)
    for (const auto& p : g_plugins->loader->plugins()) {
      auto it = before.find(p.name);
      if (it != before.end() && it->second != p.version)
        log_warning("run", "plugin ", p.name, " is version ", p.version, "; run ", id, " used ", it->second);
    }
}

int cmd_run(const std::vector<std::string>& args) {
  Common c;
  std::string graph, trace, cache_dir, out_option, from;
  int threads = 0;
  std::int64_t seed = -1;
  bool explain_cache = false, no_cache = false, rebuild_cache = false, dry_run = false, no_report = false,
       progress_always = false, share = false;
  po::options_description desc("embedflow run GRAPH [options]\nembedflow run --from OUT/run.json [options]");
  desc.add_options()("help,h", "this help")
      ("threads,j", po::value(&threads), "worker threads (default: every core; with --from: the recorded count)")
      ("seed", po::value(&seed), "graph seed (overrides the file's)")
      ("out,o", po::value(&out_option), "output folder for run.json, graph.resolved.yaml, metrics.jsonl and report.html "
                                        "(default: the graph's out:, else its variable out, else out/<graph name>); "
                                        "also sets the variable out when the graph has one")
      ("from", po::value(&from), "run a recorded run again: its run.json (the resolved graph it ran, its threads)")
      ("no-report", po::bool_switch(&no_report), "do not write report.html at the end")
      ("share", po::bool_switch(&share), "write report.html for sharing: without the host name and absolute paths")
      ("progress", po::bool_switch(&progress_always), "draw the progress line even when stderr is not a terminal")
      ("trace", po::value(&trace), "write Chrome trace events (Perfetto) to this file")
      ("cache-dir", po::value(&cache_dir), "stage cache directory (default: $EMBEDFLOW_CACHE_DIR, else ~/.cache/embedflow)")
      ("explain-cache", po::bool_switch(&explain_cache), "say for every node whether it replays, runs or is skipped, and why")
      ("dry-run", po::bool_switch(&dry_run), "resolve the graph and plan its caches (see --explain-cache), run nothing")
      ("no-cache", po::bool_switch(&no_cache), "ignore cache: settings (read nothing, write nothing)")
      ("rebuild-cache", po::bool_switch(&rebuild_cache), "run cached nodes and overwrite their entries");
  if (int r = parse_graph_command("run", desc, args, c, graph, &from); r >= 0) return r;
  if (threads < 0) {
    std::cerr << "embedflow run: --threads must be positive\n";
    return kExitInvalid;
  }
  ResolvedGraph g;
  if (seed < -1 || (seed == -1 && std::find(args.begin(), args.end(), "--seed") != args.end())) {
    std::cerr << "embedflow run: --seed must be a non-negative integer\n";
    return kExitInvalid;
  }
  std::optional<std::uint64_t> seed_override;
  if (seed >= 0) seed_override = static_cast<std::uint64_t>(seed);

  std::optional<Rerun> rerun;
  if (!from.empty()) {
    if (!graph.empty() || !c.sets.empty() || seed_override) {
      std::cerr << "embedflow run: --from runs the recorded graph as it was; it takes no GRAPH, --set or --seed "
                   "(edit a copy of its graph.resolved.yaml and run that instead)\n";
      return kExitInvalid;
    }
    try {
      rerun = Rerun{read_run_record(from), ""};
    } catch (const ConfigError& e) {
      std::cerr << "embedflow run: " << e.what() << "\n";
      return kExitInvalid;
    }
    const auto& rec = rerun->record;
    // Relative paths in the graph (data files, outputs) meant what they meant in the recorded
    // working directory.
    std::string cwd = rec.value("cwd", "");
    std::error_code ec;
    if (!cwd.empty() && fs::current_path(ec) != fs::path(cwd)) {
      if (!fs::is_directory(cwd, ec)) {
        std::cerr << "embedflow run: " << from << ": the recorded working directory " << cwd << " no longer exists\n";
        return kExitInvalid;
      }
      fs::path abs_from = fs::absolute(from);
      fs::current_path(cwd, ec);
      from = abs_from.string();
      log_info("run", "working directory ", cwd, ", as recorded");
    }
    graph = rec["graph"].value("path", "");
    for (const auto& s : rec.value("overrides", nlohmann::ordered_json::array())) c.sets.push_back(s.get<std::string>());
    if (!args_has(args, "--threads") && !args_has(args, "-j")) threads = rec.value("threads", 0);
    if (out_option.empty()) out_option = rec.value("out", "");
    rerun->resolved_path = (fs::path(from).parent_path() / kResolvedGraphFile).string();
  }

  if (rerun) {
    std::vector<Diagnostic> problems;
    GraphSpec spec = parse_graph_text(rerun->record["graph"]["resolved_yaml"].get<std::string>(), rerun->resolved_path, problems);
    std::vector<std::string> extra;
    const LoadedPlugins* plugins = nullptr;
    if (!spec_plugin_dirs(spec, graph, extra) ||
        !(plugins = load_cli_plugins(c, extra, types_text(rerun->record["graph"]["resolved_yaml"].get<std::string>(), c))))
      return kExitInvalid;
    Common no_sets = c;
    no_sets.sets.clear();  // the recorded graph has them applied already
    if (!prepare_spec(std::move(spec), std::move(problems), no_sets, std::nullopt, plugins->registry, g))
      return kExitInvalid;
    warn_about_changes(*rerun, graph, c, g, plugins->registry);
  } else {
    std::vector<std::string> extra;
    const LoadedPlugins* plugins = nullptr;
    const std::string text = graph_file_text(graph);
    if (!graph_plugin_dirs(graph, extra) || !(plugins = load_cli_plugins(c, extra, text.empty() ? "" : types_text(text, c))))
      return kExitInvalid;
    std::vector<Diagnostic> problems;
    GraphSpec spec = load_graph_file(graph, problems);
    // --out moves the whole run: the record, and every output a graph puts under its `out` variable.
    if (!out_option.empty() && std::any_of(spec.vars.begin(), spec.vars.end(), [](const auto& v) { return v.first == "out"; }))
      c.sets.insert(c.sets.begin(), "out=" + out_option);
    if (!prepare_spec(std::move(spec), std::move(problems), c, seed_override, plugins->registry, g)) return kExitInvalid;
  }

  RunRequest request;
  request.graph_file = graph;
  request.command = g_command;
  request.overrides = c.sets;
  request.seed_override = seed_override;
  if (rerun && rerun->record.value("seed_from_command_line", false)) request.seed_override = g.spec.seed;
  request.threads = threads;
  request.out_option = out_option;
  request.cache_dir = cache_dir;
  request.no_cache = no_cache;
  request.rebuild_cache = rebuild_cache;
  request.explain_cache = explain_cache;
  request.dry_run = dry_run;
  request.progress = !c.quiet && (progress_always || isatty(STDERR_FILENO));
  request.trace_path = trace;
  request.stop = &g_stop;
  if (rerun) {
    request.from_record = from;
    request.graph_sha256 = rerun->record["graph"].value("sha256", "");
  }
  if (g_plugins) request.plugins = g_plugins->loader->plugins();
  request.before_run = [] {
    std::signal(SIGINT, on_stop_signal);
    std::signal(SIGTERM, on_stop_signal);
  };
  request.after_run = [](RunResult& r) {
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    // A drained stop exits as the shell reports the signal: 130 for SIGINT, 143 for SIGTERM.
    if (r.exit_code == 130 && g_signal.load() == SIGTERM) r.exit_code = 128 + SIGTERM;
  };
  RunOutcome outcome;
  try {
    outcome = execute_run(g, request);
  } catch (const DataError& e) {  // a cache entry that cannot be planned
    std::cerr << "embedflow: " << e.what() << "\n";
    return kExitFailure;
  } catch (const ConfigError& e) {
    std::cerr << "embedflow: " << e.what() << "\n";
    return kExitInvalid;
  } catch (const Error& e) {  // the output folder cannot be written
    std::cerr << "embedflow: " << e.what() << "\n";
    return kExitFailure;
  }
  if (outcome.dry_run) return kExitOk;
  const RunResult& r = outcome.result;
  const fs::path record_path = outcome.record_dir / kRunRecordFile;
  if (r.exit_code != 0 && r.exit_code != 130 && r.exit_code != 128 + SIGTERM) {
    std::cerr << "embedflow: " << r.error << "\n";
    std::cerr << "run record: " << record_path.string() << "\n";
    return r.exit_code;
  }
  if (!c.quiet)
    std::cerr << (r.exit_code == 0 ? "done" : g_signal.load() == SIGTERM ? "terminated" : "interrupted") << ": "
              << r.source_records << " source records in "
              << r.seconds << " s\n";
  if (!trace.empty() && !c.quiet) std::cerr << "trace written to " << trace << "\n";
  if (!c.quiet) std::cerr << "run record: " << record_path.string() << "\n";
  if (!no_report) write_run_report(outcome.record_dir, c.quiet, share);
  return r.exit_code;
}

int cmd_report(const std::vector<std::string>& args) {
  std::vector<std::string> runs;
  std::string output;
  bool share = false;
  po::options_description desc("embedflow report OUT [OUT2 ...] [options]");
  desc.add_options()("help,h", "this help")
      ("output,o", po::value(&output), "the HTML file (default: OUT/report.html for one run, report.html for several)")
      ("share", po::bool_switch(&share), "for sharing: leave the host name and absolute paths out (folders become "
                                         "<run folder>, <working directory>, ~; other absolute paths their file name)")
      ("run", po::value(&runs)->composing(), "run output folders (each holds a run.json)");
  po::positional_options_description pos;
  pos.add("run", -1);
  po::variables_map vm;
  if (int r = parse_or_usage(desc, pos, args, vm, "report"); r >= 0) return r;
  if (runs.empty()) {
    std::cerr << "embedflow report: name a run's output folder (it holds run.json)\n";
    return kExitInvalid;
  }
  ReportOptions o;
  for (const auto& r : runs) o.runs.push_back(r);
  o.output = !output.empty() ? fs::path(output) : runs.size() == 1 ? fs::path(runs[0]) / "report.html" : fs::path("report.html");
  o.assets = find_report_assets();
  o.share = share;
  try {
    write_report(o);
  } catch (const ConfigError& e) {
    std::cerr << "embedflow report: " << e.what() << "\n";
    return kExitInvalid;
  } catch (const std::exception& e) {
    std::cerr << "embedflow report: " << e.what() << "\n";
    return kExitFailure;
  }
  std::cout << o.output.string() << "\n";
  return kExitOk;
}

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

int cmd_validate(const std::vector<std::string>& args) {
  Common c;
  std::string graph;
  po::options_description desc("embedflow validate GRAPH [options]");
  desc.add_options()("help,h", "this help");
  if (int r = parse_graph_command("validate", desc, args, c, graph); r >= 0) return r;
  ResolvedGraph g;
  if (!load_graph(graph, c, std::nullopt, g)) return kExitInvalid;
  std::cout << graph << ": valid (" << g.nodes.size() << " nodes, " << g.edges.size() << " edges)\n";
  return kExitOk;
}

int cmd_inspect(const std::vector<std::string>& args) {
  Common c;
  std::string type;
  bool json = false;
  po::options_description desc("embedflow inspect [TYPE|PLUGIN] [options]");
  desc.add_options()("help,h", "this help")("type", po::value(&type), "node or component type, or a plugin name")
      ("json", po::bool_switch(&json), "schemas as JSON (every type, or the one named, or the plugin's)");
  add_common(desc, c);
  po::positional_options_description pos;
  pos.add("type", 1);
  po::variables_map vm;
  if (int r = parse_or_usage(desc, pos, args, vm, "inspect"); r >= 0) return r;
  configure_logging(c);
  const LoadedPlugins* plugins = load_cli_plugins(c);
  if (!plugins) return kExitInvalid;
  const Registry& registry = plugins->registry;
  const PluginLoader* loader = plugins->loader.get();
  const LoadedPlugin* plugin = nullptr;
  for (const auto& p : loader->plugins())
    if (p.name == type) plugin = &p;
  const bool known_type = registry.node_type(type) || registry.component_type(type);
  if (json && (type.empty() || known_type || plugin)) {
    write_schema_json(std::cout, registry, type);
    return kExitOk;
  }
  if (type.empty()) {
    print_type_list(std::cout, registry, loader->plugins());
    return kExitOk;
  }
  if (plugin && !known_type) {
    // The plugin's own types only, in the list's format.
    Registry mine;
    for (const NodeType* t : registry.node_types())
      if (t->plugin == type) mine.add(*t);
    for (const ComponentType* t : registry.component_types())
      if (t->plugin == type) mine.add(*t);
    print_type_list(std::cout, mine, {*plugin});
    return kExitOk;
  }
  if (const NodeType* t = registry.node_type(type)) {
    print_node_type(std::cout, *t);
    return kExitOk;
  }
  if (const ComponentType* t = registry.component_type(type)) {
    print_component_type(std::cout, *t);
    return kExitOk;
  }
  std::vector<std::string> names = registry.node_type_names();
  for (const auto& n : registry.component_type_names()) names.push_back(n);
  for (const auto& p : loader->plugins()) names.push_back(p.name);
  std::cerr << "embedflow inspect: no node or component type or plugin '" << type << "'" << did_you_mean(type, names)
            << "\n";
  return kExitInvalid;
}

int cmd_dot(const std::vector<std::string>& args) {
  Common c;
  std::string graph, output;
  DotOptions dot;
  po::options_description desc("embedflow dot GRAPH [options]");
  desc.add_options()("help,h", "this help")("output,o", po::value(&output), "write to this file instead of stdout")
      ("all-params", po::bool_switch(&dot.all_params), "show every parameter, defaults included");
  if (int r = parse_graph_command("dot", desc, args, c, graph); r >= 0) return r;
  ResolvedGraph g;
  if (!load_graph(graph, c, std::nullopt, g)) return kExitInvalid;
  if (output.empty()) {
    write_dot(std::cout, g, dot);
  } else {
    std::ofstream f(output);
    write_dot(f, g, dot);
    if (!f) {
      std::cerr << "embedflow dot: cannot write " << output << "\n";
      return kExitFailure;
    }
  }
  return kExitOk;
}


// --- embedflow cache -----------------------------------------------------------------------

double age_seconds(const CacheEntry& e) {
  return std::chrono::duration<double>(fs::file_time_type::clock::now() - e.modified).count();
}

std::string human_age(double s) {
  if (s < 120) return cat(static_cast<long>(s), "s");
  if (s < 7200) return cat(static_cast<long>(s / 60), "m");
  if (s < 172800) return cat(static_cast<long>(s / 3600), "h");
  return cat(static_cast<long>(s / 86400), "d");
}

// "90s", "30m", "12h", "7d" (a bare number is days).
std::optional<double> parse_duration(const std::string& text) {
  try {
    std::size_t used = 0;
    double v = std::stod(text, &used);
    std::string unit = text.substr(used);
    double scale = unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : (unit == "d" || unit.empty()) ? 86400 : -1;
    if (scale < 0 || v < 0) return std::nullopt;
    return v * scale;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// "500M", "10G", "2048" (bytes), binary units.
std::optional<std::uintmax_t> parse_size(const std::string& text) {
  try {
    std::size_t used = 0;
    double v = std::stod(text, &used);
    std::string unit = text.substr(used);
    if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
    if (!unit.empty() && unit.back() == 'i') unit.pop_back();
    double scale = unit.empty() ? 1 : unit == "K" || unit == "k" ? 1024.0 : unit == "M" ? 1048576.0
                 : unit == "G" ? 1073741824.0 : unit == "T" ? 1099511627776.0 : -1;
    if (scale < 0 || v < 0) return std::nullopt;
    return static_cast<std::uintmax_t>(v * scale);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void print_entry_line(std::ostream& out, const CacheEntry& e) {
  std::string state = e.temporary ? cat("temporary of pid ", e.owner_pid.value_or(0), e.owner_alive ? " (running)" : " (gone)")
                      : !e.problem.empty() ? "corrupt: " + e.problem
                                           : e.node_type;
  char line[512];
  std::snprintf(line, sizeof line, "%-20s %-24s %9s %6s  %-12s %s", e.node.c_str(), state.c_str(),
                human_bytes(e.bytes).c_str(), human_age(age_seconds(e)).c_str(), e.fingerprint.substr(0, 12).c_str(),
                e.graph.c_str());
  out << line << "\n";
}

int cache_ls(const fs::path& dir, bool json) {
  auto entries = list_cache(dir);
  if (json) {
    using ordered_json = nlohmann::ordered_json;
    ordered_json list = ordered_json::array();
    for (const auto& e : entries)
      list.push_back({{"file", e.file.string()}, {"node", e.node}, {"node_type", e.node_type}, {"bytes", e.bytes},
                      {"age_s", static_cast<long>(age_seconds(e))}, {"fingerprint", e.fingerprint}, {"graph", e.graph},
                      {"created", e.created}, {"temporary", e.temporary}, {"ok", e.problem.empty() && !e.temporary}});
    // One entry per line; names read from cache files may hold invalid UTF-8 (U+FFFD then).
    std::cout << "[";
    for (std::size_t i = 0; i < list.size(); ++i)
      std::cout << (i ? ",\n " : "\n ") << list[i].dump(-1, ' ', false, ordered_json::error_handler_t::replace);
    std::cout << "\n]\n";
    return kExitOk;
  }
  if (entries.empty()) {
    std::cout << "no cache entries in " << dir.string() << "\n";
    return kExitOk;
  }
  char head[256];
  std::snprintf(head, sizeof head, "%-20s %-24s %9s %6s  %-12s %s", "NODE", "TYPE", "SIZE", "AGE", "FINGERPRINT", "GRAPH");
  std::cout << head << "\n";
  std::uintmax_t total = 0;
  for (const auto& e : entries) {
    print_entry_line(std::cout, e);
    total += e.bytes;
  }
  std::cout << entries.size() << (entries.size() == 1 ? " entry, " : " entries, ") << human_bytes(total) << " in "
            << dir.string() << "\n";
  return kExitOk;
}

int cache_info(const fs::path& dir, const std::vector<std::string>& keys) {
  if (keys.empty()) {
    std::cerr << "embedflow cache info: name an entry (file name, node id or fingerprint prefix)\n";
    return kExitInvalid;
  }
  int rc = kExitOk;
  for (const auto& key : keys) {
    auto entries = find_cache_entries(dir, key);
    if (entries.empty()) {
      std::cerr << "embedflow cache info: no entry matches '" << key << "' in " << dir.string() << "\n";
      rc = kExitInvalid;
      continue;
    }
    for (const auto& e : entries) {
      std::cout << e.file.string() << "\n";
      std::cout << "  node:        " << e.node << " (" << e.node_type << ", plugin " << e.plugin << ")\n"
                << "  graph:       " << e.graph << "\n"
                << "  created:     " << e.created << "\n"
                << "  last used:   " << human_age(age_seconds(e)) << " ago\n"
                << "  size:        " << human_bytes(e.bytes) << "\n"
                << "  fingerprint: " << e.fingerprint << "\n";
      if (!e.problem.empty()) {
        std::cout << "  problem:     " << e.problem << "\n";
        continue;
      }
      try {
        hdf5::StreamFileReader r(e.file);
        for (const auto& port : r.ports()) {
          const auto& t = r.port(port);
          std::cout << "  port " << port << ": " << t.records() << " records, " << t.rows() << " rows ("
                    << hdf5::layout_name(t.layout()) << ")\n";
          for (const auto& f : t.fields())
            std::cout << "    " << f.name << ": " << dtype_name(f.dtype) << shape_str(f.inner) << "\n";
        }
        if (auto manifest = r.attribute("manifest")) std::cout << "  manifest (JSON):\n" << *manifest;
      } catch (const std::exception& ex) {
        std::cout << "  problem:     " << ex.what() << "\n";
      }
    }
  }
  return rc;
}

bool remove_entry(const CacheEntry& e, bool dry_run, const std::string& why) {
  std::error_code ec;
  if (!dry_run) fs::remove(e.file, ec);
  if (ec) {
    std::cerr << "embedflow cache: cannot remove " << e.file.string() << ": " << ec.message() << "\n";
    return false;
  }
  std::cout << (dry_run ? "would remove " : "removed ") << e.file.filename().string() << " (" << human_bytes(e.bytes)
            << ", " << why << ")\n";
  return true;
}

int cache_rm(const fs::path& dir, const std::vector<std::string>& keys, bool all) {
  if (keys.empty() && !all) {
    std::cerr << "embedflow cache rm: name entries (file name, node id or fingerprint prefix) or give --all\n";
    return kExitInvalid;
  }
  int rc = kExitOk;
  if (all) {
    for (const auto& e : list_cache(dir, false))
      if (!e.temporary || !e.owner_alive)
        if (!remove_entry(e, false, "--all")) rc = kExitFailure;
    return rc;
  }
  for (const auto& key : keys) {
    auto entries = find_cache_entries(dir, key);
    if (entries.empty()) {
      std::cerr << "embedflow cache rm: no entry matches '" << key << "' in " << dir.string() << "\n";
      rc = kExitInvalid;
    }
    for (const auto& e : entries)
      if (!remove_entry(e, false, "matches '" + key + "'")) rc = kExitFailure;
  }
  return rc;
}

int cache_gc(const fs::path& dir, const std::string& older_than, const std::string& max_size, bool dry_run) {
  std::optional<double> max_age;
  std::optional<std::uintmax_t> max_bytes;
  if (!older_than.empty() && !(max_age = parse_duration(older_than))) {
    std::cerr << "embedflow cache gc: --older-than takes a duration like 90s, 30m, 12h or 7d, got '" << older_than << "'\n";
    return kExitInvalid;
  }
  if (!max_size.empty() && !(max_bytes = parse_size(max_size))) {
    std::cerr << "embedflow cache gc: --max-size takes a size like 500M or 10G, got '" << max_size << "'\n";
    return kExitInvalid;
  }
  auto entries = list_cache(dir);  // newest first
  std::uintmax_t kept = 0, freed = 0;
  int rc = kExitOk;
  for (const auto& e : entries) {
    std::string why;
    if (e.temporary && !e.owner_alive) why = "left by a run that is gone";
    else if (e.temporary) continue;  // a run is writing it right now
    else if (!e.problem.empty()) why = "corrupt: " + e.problem;
    else if (max_age && age_seconds(e) > *max_age) why = "unused for " + human_age(age_seconds(e));
    else if (max_bytes && kept + e.bytes > *max_bytes) why = "over --max-size " + max_size;
    if (why.empty()) {
      kept += e.bytes;
      continue;
    }
    if (remove_entry(e, dry_run, why)) freed += e.bytes;
    else rc = kExitFailure;
  }
  std::cout << (dry_run ? "would free " : "freed ") << human_bytes(freed) << "; " << human_bytes(kept) << " kept in "
            << dir.string() << "\n";
  return rc;
}

// A YAML double-quoted scalar.
std::string yaml_quoted(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += std::string("\\") + ch;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

// `embedflow export`: the torch plugin's torch.export node as a one-node graph, resolved and run
// as `run` does (without a run record), so the CLI needs no LibTorch of its own.
int cmd_export(const std::vector<std::string>& args) {
  Common c;
  std::string checkpoint, output, input_size, mean, std_dev;
  int threads = 0;
  po::options_description desc(
      "embedflow export CHECKPOINT -o OUT.pt [options]\n"
      "Writes a torch.train checkpoint's model (a step-*.pt file, or a checkpoint folder: its newest)\n"
      "as a TorchScript module: forward(images f32[N,C,H,W] in [0,1]) gives the embeddings torch.embed\n"
      "computes; input size, channel order, mean/std and embedding_dim are in the file (docs/torch.md)");
  desc.add_options()("help,h", "this help")
      ("checkpoint", po::value(&checkpoint), "the checkpoint")
      ("output,o", po::value(&output), "the TorchScript file to write")
      ("input-size", po::value(&input_size), "C,H,W of the images, for checkpoints that do not record it")
      ("mean", po::value(&mean), "per-channel mean the module subtracts first, e.g. 0.485,0.456,0.406 (with --std)")
      ("std", po::value(&std_dev), "per-channel std the module divides by (with --mean)")
      ("threads", po::value(&threads)->default_value(0), "LibTorch threads (0: every core)");
  add_common(desc, c);
  po::positional_options_description pos;
  pos.add("checkpoint", 1);
  po::variables_map vm;
  if (int r = parse_or_usage(desc, pos, args, vm, "export"); r >= 0) return r;
  if (checkpoint.empty() || output.empty()) {
    std::cerr << "embedflow export: give a checkpoint and -o OUT.pt\n\n" << desc << "\n";
    return kExitInvalid;
  }
  if (threads < 0) {
    std::cerr << "embedflow export: --threads must be non-negative\n";
    return kExitInvalid;
  }
  configure_logging(c);
  for (const std::string* path : {&checkpoint, &output})
    if (path->find("${") != std::string::npos) {
      std::cerr << "embedflow export: '" << *path << "': a path with ${ would be read as a graph variable\n";
      return kExitInvalid;
    }
  // Lists given as "a,b,c" become YAML flow lists; the node's schema checks the numbers.
  auto flow_list = [](const std::string& s) { return "[" + s + "]"; };
  std::string params = "checkpoint: " + yaml_quoted(fs::absolute(checkpoint).string()) +
                       ", out: " + yaml_quoted(fs::absolute(output).string());
  for (const auto& [name, value] : {std::pair<const char*, const std::string*>{"input_size", &input_size},
                                    {"mean", &mean}, {"std", &std_dev}}) {
    if (value->empty()) continue;
    if (value->find_first_not_of("0123456789.eE+-, ") != std::string::npos) {
      std::cerr << "embedflow export: --" << (std::string(name) == "input_size" ? "input-size" : name)
                << " takes numbers separated by commas, got '" << *value << "'\n";
      return kExitInvalid;
    }
    params += cat(", ", name, ": ", flow_list(*value));
  }
  const std::string text = "seed: 1\nnodes:\n  export: {type: torch.export, params: {" + params + "}}\nedges: []\n";
  const LoadedPlugins* plugins = load_cli_plugins(c);
  if (!plugins) return kExitInvalid;
  const Registry& registry = plugins->registry;
  if (!registry.node_type("torch.export")) {
    std::cerr << "embedflow export: the torch plugin (torch.export) is not loaded; built with EMBEDFLOW_WITH_TORCH=OFF, "
                 "or give --plugin-path\n";
    return kExitInvalid;
  }
  std::vector<Diagnostic> problems;
  GraphSpec spec = parse_graph_text(text, "<embedflow export>", problems);
  ResolvedGraph g;
  Common no_sets = c;
  no_sets.sets.clear();
  if (!prepare_spec(std::move(spec), std::move(problems), no_sets, std::nullopt, registry, g)) return kExitInvalid;
  RunOptions options;
  options.threads = threads;
  options.stop = &g_stop;
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  RunResult r = run_graph(g, options);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  if (r.exit_code != 0) {
    if (!r.error.empty()) std::cerr << "embedflow export: " << r.error << "\n";
    return r.exit_code;
  }
  if (!c.quiet) std::cerr << "wrote " << output << "\n";
  return kExitOk;
}

int cmd_cache(const std::vector<std::string>& args) {
  const char* usage =
      "usage: embedflow cache <ls|info|rm|gc> [options]\n"
      "  ls                      entries with node, type, size, age since last use, fingerprint, graph\n"
      "  info ENTRY...           attributes, ports, fields and manifest of entries\n"
      "  rm ENTRY... | --all     remove entries (ENTRY: file name, node id or fingerprint prefix)\n"
      "  gc [--older-than 7d] [--max-size 10G] [--dry-run]\n"
      "                          remove temporaries of runs that are gone, corrupt entries, entries\n"
      "                          unused for longer than --older-than, then the least recently used\n"
      "                          until the cache fits --max-size\n";
  if (args.empty()) {
    std::cerr << usage;
    return kExitInvalid;
  }
  if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::cout << usage;
    return kExitOk;
  }
  std::string sub = args[0];
  std::vector<std::string> rest(args.begin() + 1, args.end());
  Common c;
  std::string cache_dir, older_than, max_size;
  std::vector<std::string> keys;
  bool json = false, all = false, dry_run = false;
  po::options_description desc(cat("embedflow cache ", sub, " [options]"));
  desc.add_options()("help,h", "this help")
      ("cache-dir", po::value(&cache_dir), "cache directory (default: $EMBEDFLOW_CACHE_DIR, else ~/.cache/embedflow)")
      ("entry", po::value(&keys)->composing(), "entries");
  if (sub == "ls") desc.add_options()("json", po::bool_switch(&json), "machine-readable list");
  else if (sub == "rm") desc.add_options()("all", po::bool_switch(&all), "remove every entry");
  else if (sub == "gc")
    desc.add_options()("older-than", po::value(&older_than), "remove entries unused for longer (90s, 30m, 12h, 7d)")
        ("max-size", po::value(&max_size), "then remove least recently used entries beyond this total (500M, 10G)")
        ("dry-run", po::bool_switch(&dry_run), "only say what would be removed");
  else if (sub != "info") {
    std::cerr << "embedflow cache: unknown subcommand '" << sub << "'\n" << usage;
    return kExitInvalid;
  }
  po::positional_options_description pos;
  pos.add("entry", -1);
  po::variables_map vm;
  if (int r = parse_or_usage(desc, pos, rest, vm, "cache"); r >= 0) return r;
  fs::path dir = cache_dir.empty() ? default_cache_dir() : fs::path(cache_dir);
  if (sub == "ls") return cache_ls(dir, json);
  if (sub == "info") return cache_info(dir, keys);
  if (sub == "rm") return cache_rm(dir, keys, all);
  if (!keys.empty()) {
    std::cerr << "embedflow cache gc: takes no entries (use cache rm)\n";
    return kExitInvalid;
  }
  return cache_gc(dir, older_than, max_size, dry_run);
}

}  // namespace

int main(int argc, char** argv) {
  g_command.assign(argv, argv + argc);
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" || std::string(argv[1]) == "help") {
    std::cout << kUsage;
    return argc < 2 ? kExitInvalid : kExitOk;
  }
  std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  try {
    if (command == "run") return cmd_run(args);
    if (command == "validate") return cmd_validate(args);
    if (command == "inspect") return cmd_inspect(args);
    if (command == "dot") return cmd_dot(args);
    if (command == "cache") return cmd_cache(args);
    if (command == "report") return cmd_report(args);
    if (command == "sweep") return cmd_sweep(args);
    if (command == "export") return cmd_export(args);
    if (command == "version" || command == "--version") {
      std::cout << "embedflow " << kVersion << " (ABI " << kAbiVersion << ", " << kToolchain << ")\n";
      return kExitOk;
    }
  } catch (const ConfigError& e) {
    std::cerr << "embedflow: " << e.what() << "\n";
    return kExitInvalid;
  } catch (const std::exception& e) {
    std::cerr << "embedflow: " << e.what() << "\n";
    return kExitFailure;
  }
  std::cerr << "embedflow: unknown command '" << command << "'\n\n" << kUsage;
  return kExitInvalid;
}
