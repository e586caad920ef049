// `embedflow run`: a graph file (or a recorded run, --from) prepared, run and recorded through
// the runs library's session (embedflow_runs/session.hpp), then the run report.
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "embedflow/log.hpp"
#include "embedflow_engine/graph_file.hpp"
#include "embedflow_runs/report.hpp"
#include "embedflow_runs/run_record.hpp"
#include "embedflow_runs/session.hpp"

namespace embedflow::cli {
using namespace engine;
using namespace runs;
namespace fs = std::filesystem;

namespace {

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

// The command line of `embedflow run`.
struct RunArgs {
  Common c;
  std::string graph, trace, cache_dir, out_option, from;
  int threads = 0;
  std::int64_t seed = -1;
  bool explain_cache = false, no_cache = false, rebuild_cache = false, dry_run = false, no_report = false,
       progress_always = false, share = false;
  std::optional<std::uint64_t> seed_override;
};

void add_run_options(po::options_description& desc, RunArgs& a) {
  desc.add_options()("help,h", "this help")
      ("threads,j", po::value(&a.threads), "worker threads (default: every core; with --from: the recorded count)")
      ("seed", po::value(&a.seed), "graph seed (overrides the file's)")
      ("out,o", po::value(&a.out_option), "output folder for run.json, graph.resolved.yaml, metrics.jsonl and report.html "
                                          "(default: the graph's out:, else its variable out, else out/<graph name>); "
                                          "also sets the variable out when the graph has one")
      ("from", po::value(&a.from), "run a recorded run again: its run.json (the resolved graph it ran, its threads)")
      ("no-report", po::bool_switch(&a.no_report), "do not write report.html at the end")
      ("share", po::bool_switch(&a.share), "write report.html for sharing: without the host name and absolute paths")
      ("progress", po::bool_switch(&a.progress_always), "draw the progress line even when stderr is not a terminal")
      ("trace", po::value(&a.trace), "write Chrome trace events (Perfetto) to this file")
      ("cache-dir", po::value(&a.cache_dir), "stage cache directory (default: $EMBEDFLOW_CACHE_DIR, else ~/.cache/embedflow)")
      ("explain-cache", po::bool_switch(&a.explain_cache), "say for every node whether it replays, runs or is skipped, and why")
      ("dry-run", po::bool_switch(&a.dry_run), "resolve the graph and plan its caches (see --explain-cache), run nothing")
      ("no-cache", po::bool_switch(&a.no_cache), "ignore cache: settings (read nothing, write nothing)")
      ("rebuild-cache", po::bool_switch(&a.rebuild_cache), "run cached nodes and overwrite their entries");
}

// Parses and checks the options. Returns an exit code to stop with, or -1 to go on.
int parse_run_args(const std::vector<std::string>& args, RunArgs& a) {
  po::options_description desc("embedflow run GRAPH [options]\nembedflow run --from OUT/run.json [options]");
  add_run_options(desc, a);
  if (int r = parse_graph_command("run", desc, args, a.c, a.graph, &a.from); r >= 0) return r;
  if (a.threads < 0) {
    std::cerr << "embedflow run: --threads must be positive\n";
    return kExitInvalid;
  }
  if (a.seed < -1 || (a.seed == -1 && std::find(args.begin(), args.end(), "--seed") != args.end())) {
    std::cerr << "embedflow run: --seed must be a non-negative integer\n";
    return kExitInvalid;
  }
  if (a.seed >= 0) a.seed_override = static_cast<std::uint64_t>(a.seed);
  return -1;
}

// --from: reads the record and takes its graph, overrides, threads and output folder (the
// command line's --threads and --out win), in its working directory. Returns an exit code to
// stop with, or -1 to go on.
int take_recorded_run(const std::vector<std::string>& args, RunArgs& a, std::optional<Rerun>& rerun) {
  if (!a.graph.empty() || !a.c.sets.empty() || a.seed_override) {
    std::cerr << "embedflow run: --from runs the recorded graph as it was; it takes no GRAPH, --set or --seed "
                 "(edit a copy of its graph.resolved.yaml and run that instead)\n";
    return kExitInvalid;
  }
  try {
    rerun = Rerun{read_run_record(a.from), ""};
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
      std::cerr << "embedflow run: " << a.from << ": the recorded working directory " << cwd << " no longer exists\n";
      return kExitInvalid;
    }
    fs::path abs_from = fs::absolute(a.from);
    fs::current_path(cwd, ec);
    a.from = abs_from.string();
    log_info("run", "working directory ", cwd, ", as recorded");
  }
  a.graph = rec["graph"].value("path", "");
  for (const auto& s : rec.value("overrides", nlohmann::ordered_json::array())) a.c.sets.push_back(s.get<std::string>());
  if (!args_has(args, "--threads") && !args_has(args, "-j")) a.threads = rec.value("threads", 0);
  if (a.out_option.empty()) a.out_option = rec.value("out", "");
  rerun->resolved_path = (fs::path(a.from).parent_path() / kResolvedGraphFile).string();
  return -1;
}

// The recorded graph as it ran (its overrides applied already), warning about what changed.
bool prepare_recorded(RunArgs& a, const Rerun& rerun, ResolvedGraph& g) {
  std::vector<Diagnostic> problems;
  GraphSpec spec = parse_graph_text(rerun.record["graph"]["resolved_yaml"].get<std::string>(), rerun.resolved_path, problems);
  std::vector<std::string> extra;
  const LoadedPlugins* plugins = nullptr;
  if (!spec_plugin_dirs(spec, a.graph, extra) ||
      !(plugins = load_cli_plugins(a.c, extra, types_text(rerun.record["graph"]["resolved_yaml"].get<std::string>(), a.c))))
    return false;
  Common no_sets = a.c;
  no_sets.sets.clear();  // the recorded graph has them applied already
  if (!prepare_spec(std::move(spec), std::move(problems), no_sets, std::nullopt, plugins->registry, g)) return false;
  warn_about_changes(rerun, a.graph, a.c, g, plugins->registry);
  return true;
}

// The graph file with the command line's overrides.
bool prepare_file(RunArgs& a, ResolvedGraph& g) {
  std::vector<std::string> extra;
  const LoadedPlugins* plugins = nullptr;
  const std::string text = graph_file_text(a.graph);
  if (!graph_plugin_dirs(a.graph, extra) || !(plugins = load_cli_plugins(a.c, extra, text.empty() ? "" : types_text(text, a.c))))
    return false;
  std::vector<Diagnostic> problems;
  GraphSpec spec = load_graph_file(a.graph, problems);
  // --out moves the whole run: the record, and every output a graph puts under its `out` variable.
  if (!a.out_option.empty() && std::any_of(spec.vars.begin(), spec.vars.end(), [](const auto& v) { return v.first == "out"; }))
    a.c.sets.insert(a.c.sets.begin(), "out=" + a.out_option);
  return prepare_spec(std::move(spec), std::move(problems), a.c, a.seed_override, plugins->registry, g);
}

RunRequest run_request(const RunArgs& a, const std::optional<Rerun>& rerun, const ResolvedGraph& g) {
  RunRequest request;
  request.graph_file = a.graph;
  request.command = g_command;
  request.overrides = a.c.sets;
  request.seed_override = a.seed_override;
  if (rerun && rerun->record.value("seed_from_command_line", false)) request.seed_override = g.spec.seed;
  request.threads = a.threads;
  request.out_option = a.out_option;
  request.cache_dir = a.cache_dir;
  request.no_cache = a.no_cache;
  request.rebuild_cache = a.rebuild_cache;
  request.explain_cache = a.explain_cache;
  request.dry_run = a.dry_run;
  request.progress = !a.c.quiet && (a.progress_always || isatty(STDERR_FILENO));
  request.trace_path = a.trace;
  request.stop = &g_stop;
  if (rerun) {
    request.from_record = a.from;
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
  return request;
}

// What the run ended with, the record's path and the report; the exit code.
int finish_run(const RunArgs& a, const RunOutcome& outcome) {
  if (outcome.dry_run) return kExitOk;
  const RunResult& r = outcome.result;
  const fs::path record_path = outcome.record_dir / kRunRecordFile;
  if (r.exit_code != 0 && r.exit_code != 130 && r.exit_code != 128 + SIGTERM) {
    std::cerr << "embedflow: " << r.error << "\n";
    std::cerr << "run record: " << record_path.string() << "\n";
    return r.exit_code;
  }
  if (!a.c.quiet)
    std::cerr << (r.exit_code == 0 ? "done" : g_signal.load() == SIGTERM ? "terminated" : "interrupted") << ": "
              << r.source_records << " source records in "
              << r.seconds << " s\n";
  if (!a.trace.empty() && !a.c.quiet) std::cerr << "trace written to " << a.trace << "\n";
  if (!a.c.quiet) std::cerr << "run record: " << record_path.string() << "\n";
  if (!a.no_report) write_run_report(outcome.record_dir, a.c.quiet, a.share);
  return r.exit_code;
}

}  // namespace

int cmd_run(const std::vector<std::string>& args) {
  RunArgs a;
  if (int r = parse_run_args(args, a); r >= 0) return r;
  std::optional<Rerun> rerun;
  if (!a.from.empty())
    if (int r = take_recorded_run(args, a, rerun); r >= 0) return r;
  ResolvedGraph g;
  if (!(rerun ? prepare_recorded(a, *rerun, g) : prepare_file(a, g))) return kExitInvalid;
  RunOutcome outcome;
  try {
    outcome = execute_run(g, run_request(a, rerun, g));
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
  return finish_run(a, outcome);
}

}  // namespace embedflow::cli
