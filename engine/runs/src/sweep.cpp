#include "embedflow_runs/sweep.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include "embedflow/atomic_file.hpp"
#include "embedflow/error.hpp"
#include "embedflow/log.hpp"
#include "embedflow/params.hpp"
#include "embedflow/suggest.hpp"
#include "embedflow_engine/cache.hpp"
#include "embedflow_engine/graph_file.hpp"
#include "embedflow_runs/report.hpp"
#include "embedflow_runs/run_record.hpp"
#include "embedflow_runs/session.hpp"
#include "embedflow_runs/stats.hpp"
#include "embedflow_runs/sweep_report.hpp"

extern char** environ;

namespace embedflow::runs {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using namespace engine;

namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\n") - b + 1);
}

// Splits at `sep` outside (), [], {} and quotes: YAML flow values keep their commas. Inside
// double quotes a backslash escapes the next character ("a \"b, c\"" is one value).
std::vector<std::string> split_top_level(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  char quote = 0;
  bool escaped = false;
  for (char c : text) {
    if (quote) {
      if (escaped) escaped = false;
      else if (quote == '"' && c == '\\') escaped = true;
      else if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '(' || c == '[' || c == '{') {
      ++depth;
    } else if ((c == ')' || c == ']' || c == '}') && depth > 0) {
      --depth;
    } else if (c == sep && depth == 0) {
      out.push_back(trim(cur));
      cur.clear();
      continue;
    }
    cur += c;
  }
  out.push_back(trim(cur));
  return out;
}

bool parse_u64(const std::string& s, std::uint64_t& v) {
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, v);
  return ec == std::errc() && p == end && !s.empty();
}

void check_variable_name(const std::string& var, const std::string& option) {
  if (var.empty()) throw ConfigError(cat(option, ": expected VAR=value"));
  if (var == "seed") throw ConfigError(cat(option, ": the seed is its own axis: use --seeds N or --seeds 1,2,3"));
  if (var == "out") throw ConfigError(cat(option, ": `out` is set per point by the sweep (SWEEP/points/NAME); sweep other variables"));
}

}  // namespace

SweepAxis parse_grid_axis(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos) throw ConfigError(cat("--grid '", text, "': expected VAR=v1,v2,..."));
  SweepAxis axis;
  axis.variable = trim(text.substr(0, eq));
  check_variable_name(axis.variable, cat("--grid '", text, "'"));
  axis.values = split_top_level(text.substr(eq + 1), ',');
  for (const auto& v : axis.values)
    if (v.empty()) throw ConfigError(cat("--grid ", axis.variable, ": empty value in '", text, "' (values are comma-separated)"));
  std::set<std::string> seen;
  for (const auto& v : axis.values)
    if (!seen.insert(v).second) throw ConfigError(cat("--grid ", axis.variable, ": value '", v, "' is listed twice"));
  return axis;
}

std::vector<std::uint64_t> parse_seeds(const std::string& text, std::uint64_t base) {
  std::vector<std::uint64_t> seeds;
  if (text.find(',') == std::string::npos) {
    std::uint64_t n = 0;
    if (!parse_u64(trim(text), n) || n == 0 || n > 10000)
      throw ConfigError(cat("--seeds '", text, "': expected a count from 1 to 10000, or a list like 1,2,3"));
    for (std::uint64_t i = 0; i < n; ++i) seeds.push_back(base + i);
    return seeds;
  }
  for (const auto& part : split_top_level(text, ',')) {
    std::uint64_t s = 0;
    if (!parse_u64(part, s)) throw ConfigError(cat("--seeds '", text, "': '", part, "' is not a non-negative integer"));
    if (std::find(seeds.begin(), seeds.end(), s) != seeds.end())
      throw ConfigError(cat("--seeds '", text, "': seed ", s, " is listed twice"));
    seeds.push_back(s);
  }
  return seeds;
}

std::vector<std::pair<std::string, std::string>> parse_point(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& part : split_top_level(text, ';')) {
    const auto eq = part.find('=');
    if (eq == std::string::npos || trim(part.substr(eq + 1)).empty())
      throw ConfigError(cat("--point '", text, "': expected VAR=value;VAR2=value"));
    std::string var = trim(part.substr(0, eq));
    check_variable_name(var, cat("--point '", text, "'"));
    for (const auto& [k, v] : out)
      if (k == var) throw ConfigError(cat("--point '", text, "': ", var, " is set twice"));
    out.emplace_back(var, trim(part.substr(eq + 1)));
  }
  return out;
}

namespace {

using Assignments = std::vector<std::pair<std::string, std::string>>;

struct Variant {
  std::string name;
  Assignments values;
};

struct Point {
  std::size_t index = 0, variant = 0;
  std::uint64_t seed = 0;
  std::string name;
  fs::path dir;                        // as the child is given it
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

std::string variant_name(const Assignments& values) {
  if (values.empty()) return "(graph as written)";
  std::string s;
  for (const auto& [k, v] : values) s += (s.empty() ? "" : ", ") + k + "=" + v;
  return s;
}

// A file-name-safe rendering of a value: letters, digits and ._+- kept, the rest '_', 24 at most.
std::string safe(const std::string& v) {
  std::string s;
  for (char c : v) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '+' || c == '-') ? c : '_';
  return s.size() > 24 ? s.substr(0, 24) : s;
}

}  // namespace

AgainstSpec parse_against(const std::string& text) {
  const std::size_t colon = text.find(':');
  AgainstSpec a;
  if (colon != std::string::npos) a = {trim(text.substr(0, colon)), trim(text.substr(colon + 1))};
  if (a.metric.empty() || a.row.empty())
    throw ConfigError(cat("--against '", text, "': expected METRIC:ROW, e.g. label_precision:pair set (the metric of the row "
                          "whose label starts with ROW)"));
  return a;
}

namespace {

std::vector<Variant> build_variants(const SweepOptions& o) {
  if (!o.grid.empty() && !o.points.empty()) throw ConfigError("give either --grid axes or --point lists, not both");
  std::vector<Variant> variants;
  if (!o.points.empty()) {
    for (const auto& p : o.points) variants.push_back({variant_name(p), p});
  } else {
    std::vector<Assignments> combos{{}};
    for (const auto& axis : o.grid) {
      if (axis.values.empty()) throw ConfigError(cat("--grid ", axis.variable, ": no values"));
      for (const auto& other : o.grid)
        if (&other != &axis && other.variable == axis.variable)
          throw ConfigError(cat("--grid ", axis.variable, " is given twice; list its values in one --grid"));
      std::vector<Assignments> next;
      for (const auto& c : combos)
        for (const auto& v : axis.values) {
          Assignments a = c;
          a.emplace_back(axis.variable, v);
          next.push_back(std::move(a));
        }
      combos = std::move(next);
    }
    for (auto& c : combos) variants.push_back({variant_name(c), std::move(c)});
  }
  std::set<std::string> names;
  for (const auto& v : variants)
    if (!names.insert(v.name).second) throw ConfigError(cat("--point ", v.name, " is listed twice"));
  return variants;
}

std::vector<std::string> assignment_sets(const Assignments& a) {
  std::vector<std::string> out;
  for (const auto& [k, v] : a) out.push_back(k + "=" + v);
  return out;
}

// A variable named on the command line must exist in the graph (node.param is checked by the
// override itself). Said once, not once per point.
void check_variables_exist(const GraphSpec& spec, const std::vector<Variant>& variants, const std::vector<std::string>& then) {
  std::vector<std::string> names;
  for (const auto& [k, v] : spec.vars) names.push_back(k);
  auto check = [&](const std::string& var, const char* option) {
    if (var.find('.') != std::string::npos) return;
    if (std::find(names.begin(), names.end(), var) != names.end()) return;
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    throw ConfigError(cat(option, " ", var, ": ", spec.file, " has no variable '", var, "'",
                          did_you_mean(var, names), "; its variables: ",
                          list.empty() ? "none" : list, " (node parameters are named node.param)"));
  };
  for (const auto& v : variants)
    for (const auto& [k, value] : v.values) check(k, "--grid");
  for (const auto& s : then) check(trim(s.substr(0, s.find('='))), "--then");
}

struct Plan {
  std::vector<Variant> variants;
  std::vector<std::uint64_t> seeds;
  std::vector<Point> points;
  std::vector<GraphSpec> variant_specs;  // each variant resolved with one placeholder out: for diffs
  std::vector<std::string> node_order;   // node ids in the first point's graph order
  std::set<std::string> cached_nodes;
  std::map<std::string, std::string> node_types;
};

// Resolves and validates every point; computes the stage cache entries each point's cached
// nodes use. Throws ConfigError listing every problem with the points it occurs at.
Plan plan_points(const SweepOptions& o, const fs::path& dir, const Registry& registry) {
  std::vector<Diagnostic> parse_problems;
  const GraphSpec base = load_graph_file(o.graph, parse_problems);
  if (!parse_problems.empty()) {
    std::string text;
    for (const auto& d : parse_problems) text += "\n  " + d.str();
    throw ConfigError(cat(o.graph, " does not parse:", text));
  }
  if (std::none_of(base.vars.begin(), base.vars.end(), [](const auto& v) { return v.first == "out"; }))
    throw ConfigError(cat(o.graph, " has no variable `out`: every point would write its outputs into the same files. "
                                   "Add `vars: {out: out/NAME}` and write outputs under \"${out}/...\""));
  Plan plan;
  plan.variants = build_variants(o);
  check_variables_exist(base, plan.variants, o.then);
  plan.seeds = o.seeds.empty() ? std::vector<std::uint64_t>{base.seed} : parse_seeds(o.seeds, base.seed);

  std::map<std::string, std::vector<std::string>> problems;  // message -> points
  // `name` empty: the problems are the points' own, reported with them.
  auto resolve_point = [&](const std::vector<std::string>& sets, std::uint64_t seed, const std::string& name) {
    std::vector<Diagnostic> found;
    ResolvedGraph g = prepare_graph(base, found, sets, seed, registry);
    if (!name.empty())
      for (const auto& d : found) problems[d.str()].push_back(name);
    return std::make_pair(std::move(g), found.empty());
  };
  const LogLevel level = log_level();
  set_log_level(LogLevel::warning);  // "node x is disabled" once per point is noise
  for (std::size_t v = 0; v < plan.variants.size(); ++v) {
    std::vector<std::string> sets = o.sets;
    for (const auto& s : assignment_sets(plan.variants[v].values)) sets.push_back(s);
    std::vector<std::string> placeholder{"out=" + (dir / "points" / "POINT").string()};
    placeholder.insert(placeholder.end(), sets.begin(), sets.end());
    plan.variant_specs.push_back(resolve_point(placeholder, plan.seeds[0], "").first.spec);
    for (std::uint64_t seed : plan.seeds) {
      Point p;
      p.index = plan.points.size();
      p.variant = v;
      p.seed = seed;
      p.name = cat(p.index < 100 ? (p.index < 10 ? "00" : "0") : "", p.index);
      for (const auto& [k, value] : plan.variants[v].values) p.name += "-" + safe(k) + "=" + safe(value);
      p.name += cat("-seed=", seed);
      p.dir = dir / "points" / p.name;
      p.sets = sets;
      std::vector<std::string> with_out{"out=" + p.dir.string()};
      with_out.insert(with_out.end(), sets.begin(), sets.end());
      auto [g, ok] = resolve_point(with_out, seed, p.name);
      if (ok) {
        Fingerprinter fp(g);
        for (std::size_t i = 0; i < g.nodes.size(); ++i) {
          const std::string id = g.nodes[i].id();
          if (plan.points.empty()) {
            plan.node_order.push_back(id);
            plan.node_types[id] = g.nodes[i].type->name;
          }
          if (!g.nodes[i].cache.enabled) continue;
          plan.cached_nodes.insert(id);
          p.entries.push_back(id + "-" + fp.manifest(i).fingerprint + ".h5");
        }
      }
      plan.points.push_back(std::move(p));
    }
  }
  if (!o.select.empty() || !o.then.empty()) {
    std::vector<std::string> sets = o.sets;
    for (const auto& s : assignment_sets(plan.variants[0].values)) sets.push_back(s);
    sets.insert(sets.end(), o.then.begin(), o.then.end());
    sets.insert(sets.begin(), "out=" + (dir / "selected").string());
    resolve_point(sets, plan.seeds[0], "selected (--then)");
  }
  set_log_level(level);
  if (!problems.empty()) {
    std::string text;
    for (const auto& [message, names] : problems) {
      text += "\n  " + message + "\n    at point" + (names.size() == 1 ? " " : "s ");
      for (std::size_t i = 0; i < names.size() && i < 4; ++i) text += (i ? ", " : "") + names[i];
      if (names.size() > 4) text += cat(" and ", names.size() - 4, " more");
    }
    throw ConfigError(cat("the sweep has invalid points; nothing was run:", text));
  }
  return plan;
}

// The folder's lock: held for the sweep's life, released by the kernel if the process dies.
class FolderLock {
 public:
  explicit FolderLock(const fs::path& dir) {
    const fs::path file = dir / ".sweep.lock";
    fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw Error(cat("cannot create '", file.string(), "': ", std::strerror(errno)));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      char buf[32] = {0};
      ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
      ::close(fd_);
      fd_ = -1;
      throw ConfigError(cat("another sweep", n > 0 ? cat(" (pid ", trim(buf), ")") : std::string(), " is running in ",
                            dir.string(), "; wait for it to finish or give another --out"));
    }
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) < 0) { /* the pid is a courtesy */ }
  }
  ~FolderLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

 private:
  int fd_ = -1;
};

std::vector<std::string> expected_overrides(const Point& p) {
  std::vector<std::string> out{"out=" + p.dir.string()};
  out.insert(out.end(), p.sets.begin(), p.sets.end());
  return out;
}

// Reads what a finished child left: its run record's status, error, per-node modes.
void read_point_outcome(Point& p, int exit_code) {
  p.exit_code = exit_code;
  const fs::path record = p.dir / kRunRecordFile;
  std::error_code ec;
  json rec;
  if (fs::exists(record, ec)) {
    try {
      rec = read_run_record(record.string());
    } catch (const std::exception& e) {
      p.error = e.what();
    }
  }
  if (rec.is_object()) {
    p.nodes = json::object();
    for (const auto& n : rec.value("nodes", json::array())) p.nodes[n.value("id", "")] = n.value("mode", "");
    if (rec.contains("error")) p.error = rec["error"].get<std::string>();
  }
  if (exit_code == 0) {
    p.status = "ok";
  } else {
    p.status = exit_code == 130 || exit_code == 143 ? "interrupted" : "failed";
    if (p.error.empty()) {
      // It stopped before writing a record: its own words, from the log's last lines.
      std::ifstream log(p.dir / "log.txt");
      std::string line, last;
      while (std::getline(log, line))
        if (!trim(line).empty()) last = line;
      p.error = last.empty() ? cat("exited with code ", exit_code) : last;
    }
  }
}

// A completed point from an earlier sweep into this folder is kept, unless the graph file has
// changed since it ran (it runs again); one that ran with other overrides means the folder holds
// a different sweep. Returns how many completed points run again for a changed graph.
std::size_t mark_resumed(std::vector<Point>& points, const std::string& graph) {
  const std::string sha = sha256_file(graph);
  std::size_t stale = 0;
  for (auto& p : points) {
    const fs::path record = p.dir / kRunRecordFile;
    std::error_code ec;
    if (!fs::exists(record, ec)) continue;
    json rec;
    try {
      rec = read_run_record(record.string());
    } catch (const std::exception&) {
      continue;  // a damaged record: the point runs again
    }
    std::vector<std::string> recorded;
    for (const auto& s : rec.value("overrides", json::array())) recorded.push_back(s.get<std::string>());
    if (recorded != expected_overrides(p) || rec.value("seed", std::uint64_t{0}) != p.seed) {
      std::string was;
      for (const auto& s : recorded) was += " --set " + s;
      throw ConfigError(cat(p.dir.string(), " holds a run of another sweep (it ran with", was, ", seed ",
                            rec.value("seed", std::uint64_t{0}), "); give this sweep another --out or remove the folder"));
    }
    if (rec.value("status", "") != "done") continue;
    if (rec["graph"].value("sha256", "") != sha) {
      ++stale;
      continue;
    }
    read_point_outcome(p, 0);
    p.seconds = rec.value("seconds", 0.0);
    p.resumed = true;
  }
  return stale;
}

std::vector<std::string> point_argv(const SweepOptions& o, const Point& p, const fs::path& cache_dir, int threads) {
  std::vector<std::string> argv{o.executable, "run", o.graph, "--out", p.dir.string(), "--seed", std::to_string(p.seed),
                                "--threads", std::to_string(threads), "--cache-dir", cache_dir.string()};
  for (const auto& d : o.plugin_path) argv.insert(argv.end(), {"--plugin-path", d});
  for (const auto& s : p.sets) argv.insert(argv.end(), {"--set", s});
  if (!o.report) argv.push_back("--no-report");
  return argv;
}

// Starts a child in its own process group (a terminal's Ctrl-C reaches the sweep alone, which
// passes one SIGINT on, so a child drains instead of dying on a second signal), its output to
// `log`.
pid_t spawn(const std::vector<std::string>& argv, const fs::path& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0].c_str(), &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw Error(cat("cannot start ", argv[0], ": ", std::strerror(rc)));
  return pid;
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

json point_json(const Point& p, const std::vector<Variant>& variants, const fs::path& dir) {
  json values = json::object();
  for (const auto& [k, v] : variants[p.variant].values) values[k] = v;
  json j{{"name", p.name}, {"variant", variants[p.variant].name}, {"values", values}, {"seed", p.seed},
         {"dir", fs::relative(p.dir, dir).string()}, {"status", p.status}, {"overrides", p.sets}};
  if (p.exit_code >= 0) j["exit_code"] = p.exit_code;
  j["seconds"] = p.seconds;
  if (!p.error.empty()) j["error"] = p.error;
  j["resumed"] = p.resumed;
  j["nodes"] = p.nodes;
  return j;
}

json stages_json(const Plan& plan) {
  json stages = json::array();
  for (const auto& id : plan.node_order) {
    int computed = 0, replayed = 0, skipped = 0;
    for (const auto& p : plan.points) {
      const std::string mode = p.nodes.value(id, "");
      computed += mode == "run";
      replayed += mode == "replay";
      skipped += mode == "skip";
    }
    stages.push_back({{"node", id}, {"type", plan.node_types.at(id)}, {"cached", plan.cached_nodes.count(id) > 0},
                      {"computed", computed}, {"replayed", replayed}, {"skipped", skipped}});
  }
  return stages;
}

class Sweep {
 public:
  Sweep(const SweepOptions& o, fs::path dir, Plan plan)
      : o_(o), dir_(std::move(dir)), plan_(std::move(plan)),
        cache_dir_(o.cache_dir.empty() ? default_cache_dir() : fs::path(o.cache_dir)),
        out_(o.messages ? *o.messages : std::cerr) {
    const int cores = std::max(1u, std::thread::hardware_concurrency());
    jobs_ = std::max(1, o.jobs);
    if (jobs_ > cores) {
      out_ << "sweep: --jobs " << jobs_ << " is more than the machine's " << cores << " cores; running " << cores
           << " at a time\n";
      jobs_ = cores;
    }
    threads_ = o.threads > 0 ? o.threads : std::max(1, cores / jobs_);
    start_ = std::chrono::steady_clock::now();
  }

  SweepResult run() {
    const std::size_t stale = mark_resumed(plan_.points, o_.graph);
    const auto resumed = std::count_if(plan_.points.begin(), plan_.points.end(), [](const Point& p) { return p.resumed; });
    out_ << "sweep: " << plan_.points.size() << " points (" << plan_.variants.size() << " variants x "
         << plan_.seeds.size() << " seeds), " << jobs_ << " at a time with " << threads_ << " threads each, in "
         << dir_.string() << "\n";
    if (resumed) out_ << "sweep: " << resumed << " points completed in an earlier sweep are kept\n";
    if (stale) out_ << "sweep: " << stale << " completed points ran an earlier version of " << o_.graph << " and run again\n";
    write("running");
    bool interrupted = schedule();
    SweepResult result;
    result.dir = dir_;
    const bool failed = std::any_of(plan_.points.begin(), plan_.points.end(), [](const Point& p) { return p.status == "failed"; });
    result.record = record(interrupted ? "interrupted" : failed ? "failed" : "done");
    if (!interrupted) {
      result.record["results"] = aggregate_results(dir_, result.record["points"], result.record["variants"], plan_.seeds);
      print_stages(result.record["stages"]);
      if (!o_.select.empty() && !select(result.record)) failed_selection_ = true;
    }
    write_file_atomic(dir_ / kSweepFile, result.record.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
    if (!interrupted) write_file_atomic(dir_ / "table.md", results_markdown(result.record, o_.baselines));
    if (o_.report) {
      try {
        write_sweep_report(dir_, dir_ / "report.html", find_report_assets());
        out_ << "report: " << (dir_ / "report.html").string() << "\n";
      } catch (const std::exception& e) {
        log_warning("sweep", "no report written: ", e.what());
      }
    }
    result.exit_code = interrupted ? 130 : (failed || failed_selection_) ? 1 : 0;
    return result;
  }

 private:
  // Runs every pending point, `jobs_` at a time; a point waits while a running point computes a
  // stage cache entry it needs. Returns true when stopped by a signal.
  bool schedule() {
    std::map<pid_t, std::size_t> running;
    std::set<std::string> computing;
    bool stopping = false;
    for (;;) {
      if (!stopping && o_.stop && o_.stop->load()) {
        stopping = true;
        out_ << "sweep: stopping; waiting for " << running.size() << " running points to drain\n";
        for (const auto& [pid, i] : running) ::kill(pid, SIGINT);
      }
      while (!stopping && static_cast<int>(running.size()) < jobs_) {
        Point* next = next_startable(computing);
        if (!next) break;
        start(*next, computing);
        running[next->pid] = next->index;
      }
      if (running.empty()) break;
      int status = 0;
      pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid == 0 || (pid < 0 && errno == EINTR)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      if (pid < 0) throw Error(cat("waitpid: ", std::strerror(errno)));
      auto it = running.find(pid);
      if (it == running.end()) continue;  // not ours
      Point& p = plan_.points[it->second];
      running.erase(it);
      for (const auto& e : p.entries) computing.erase(e);
      p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - p.started).count();
      read_point_outcome(p, exit_code_of(status));
      report_point(p);
      write("running");
    }
    return stopping;
  }

  Point* next_startable(const std::set<std::string>& computing) {
    for (auto& p : plan_.points) {
      if (p.status != "pending") continue;
      bool waits = false;
      for (const auto& e : p.entries) {
        std::error_code ec;
        if (computing.count(e) && !fs::exists(cache_dir_ / e, ec)) waits = true;
      }
      if (!waits) return &p;
    }
    return nullptr;
  }

  void start(Point& p, std::set<std::string>& computing) {
    std::error_code ec;
    fs::create_directories(p.dir, ec);
    if (ec) throw Error(cat("cannot create '", p.dir.string(), "': ", ec.message()));
    for (const auto& e : p.entries)
      if (!fs::exists(cache_dir_ / e, ec)) computing.insert(e);
    p.status = "running";
    p.started = std::chrono::steady_clock::now();
    p.pid = spawn(point_argv(o_, p, cache_dir_, threads_), p.dir / "log.txt");
  }

  void report_point(const Point& p) {
    ++finished_;
    const std::size_t total = plan_.points.size();
    std::string cached;
    for (const auto& id : plan_.node_order)
      if (plan_.cached_nodes.count(id)) cached += cat(cached.empty() ? "" : ", ", id, " ", p.nodes.value(id, "?"));
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.1f s", p.seconds);
    out_ << "[" << finished_ << "/" << total << "] " << p.status << "  " << plan_.variants[p.variant].name << "  seed "
         << p.seed << "  " << secs << (cached.empty() ? "" : "  (" + cached + ")") << "\n";
    if (p.status != "ok") out_ << "    " << p.error << "\n    log: " << (p.dir / "log.txt").string() << "\n";
  }

  json record(const std::string& status) const {
    json r;
    r["format"] = kSweepFormat;
    r["graph"] = o_.graph;
    r["command"] = o_.command;
    r["created"] = created_;
    json vars = json::array();
    if (!plan_.variants.empty())
      for (const auto& [k, v] : plan_.variants[0].values) vars.push_back(k);
    r["variables"] = vars;
    r["seeds"] = plan_.seeds;
    r["base_overrides"] = o_.sets;
    r["baselines"] = o_.baselines;
    json against = json::array();
    for (const auto& text : o_.against) {
      const AgainstSpec a = parse_against(text);
      against.push_back({{"metric", a.metric}, {"row", a.row}});
    }
    r["against"] = against;
    r["jobs"] = jobs_;
    r["threads_per_point"] = threads_;
    r["cache_dir"] = cache_dir_.string();
    r["status"] = status;
    r["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    r["statistics"] = "mean over seeds; 95% Student t-interval; paired t-test across seeds, two-sided, uncorrected";
    json points = json::array();
    for (const auto& p : plan_.points) points.push_back(point_json(p, plan_.variants, dir_));
    r["points"] = points;
    r["stages"] = stages_json(plan_);
    json variants = json::array();
    for (std::size_t v = 0; v < plan_.variants.size(); ++v) {
      json values = json::object(), members = json::array();
      for (const auto& [k, x] : plan_.variants[v].values) values[k] = x;
      for (const auto& p : plan_.points)
        if (p.variant == v) members.push_back(p.index);
      variants.push_back({{"name", plan_.variants[v].name}, {"values", values}, {"points", members}});
    }
    r["variants"] = variants;
    json diffs = json::array();
    for (std::size_t v = 1; v < plan_.variant_specs.size(); ++v)
      diffs.push_back({{"variant", plan_.variants[v].name}, {"against", plan_.variants[0].name},
                       {"differences", graph_differences(plan_.variant_specs[0], plan_.variant_specs[v])}});
    r["graph_differences"] = diffs;
    return r;
  }

  void write(const std::string& status) {
    json r = record(status);
    write_file_atomic(dir_ / kSweepFile, r.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
  }

  // The cached stages and any stage some point replayed or skipped, one line each; the stages
  // every point ran are summed up in one line (a photo experiment has a hundred of them).
  void print_stages(const json& stages) {
    out_ << "stages (points that computed / replayed / skipped each):\n";
    std::size_t width = 5, always = 0;
    const int points = static_cast<int>(plan_.points.size());
    auto listed = [&](const json& st) {
      return st["cached"].get<bool>() || st["replayed"].get<int>() > 0 || st["skipped"].get<int>() > 0 ||
             st["computed"].get<int>() != points;
    };
    for (const auto& st : stages)
      if (listed(st)) width = std::max(width, st["node"].get<std::string>().size());
    for (const auto& st : stages) {
      if (!listed(st)) {
        ++always;
        continue;
      }
      const std::string id = st["node"].get<std::string>();
      out_ << "  " << id << std::string(width - id.size(), ' ') << (st["cached"].get<bool>() ? "  cached " : "         ")
           << "  computed " << st["computed"].get<int>() << "  replayed " << st["replayed"].get<int>() << "  skipped "
           << st["skipped"].get<int>() << "\n";
    }
    if (always) out_ << "  and " << always << " uncached stages computed at every point (sweep.json lists them)\n";
  }

  bool select(json& r);

  const SweepOptions& o_;
  fs::path dir_;
  Plan plan_;
  fs::path cache_dir_;
  std::ostream& out_;
  int jobs_ = 1, threads_ = 1;
  std::size_t finished_ = 0;
  bool failed_selection_ = false;
  std::chrono::steady_clock::time_point start_;
  std::string created_ = utc_timestamp(std::chrono::system_clock::now());
};

// --- selection by a validation metric ------------------------------------------------------

struct MetricSpec {
  std::string node, label, metric;
};

MetricSpec parse_metric_spec(const std::string& text) {
  std::vector<std::string> parts;
  std::string cur;
  for (char c : text) {
    if (c == '/') {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(cur);
  for (const auto& p : parts)
    if (p.empty() && parts.size() > 1) throw ConfigError(cat("--select '", text, "': expected [node/][label/]metric"));
  if (parts.size() == 1) return {"", "", parts[0]};
  if (parts.size() == 2) return {"", parts[0], parts[1]};
  if (parts.size() == 3) return {parts[0], parts[1], parts[2]};
  throw ConfigError(cat("--select '", text, "': expected [node/][label/]metric"));
}

bool Sweep::select(json& r) {
  const MetricSpec spec = parse_metric_spec(o_.select);
  // Candidates: (variant, mean) of the rows matching the spec.
  std::vector<std::pair<std::string, json>> candidates;
  std::set<std::string> labels;
  bool higher = true;
  for (const auto& table : r["results"]) {
    if (!spec.node.empty() && table.value("node", "") != spec.node) continue;
    for (const auto& c : table["columns"])
      if (c.value("key", "") == spec.metric) higher = c.value("higher_is_better", true);
    for (const auto& row : table["rows"]) {
      if (!spec.label.empty() && row.value("label", "") != spec.label) continue;
      if (!row["metrics"].contains(spec.metric)) continue;
      labels.insert(row.value("label", ""));
      candidates.emplace_back(row.value("variant", ""), row["metrics"][spec.metric]);
    }
  }
  auto fail = [&](const std::string& why) {
    out_ << "sweep: --select " << o_.select << ": " << why << "\n";
    r["selection"] = {{"metric", o_.select}, {"status", "failed"}, {"error", why}};
    return false;
  };
  if (candidates.empty()) return fail("no results table of the points has that metric");
  if (labels.size() > 1) {
    std::string list;
    for (const auto& l : labels) list += (list.empty() ? "" : ", ") + l;
    return fail(cat("the metric is reported for several rows (", list, "); name one as label/metric"));
  }
  const std::pair<std::string, json>* best = nullptr;
  for (const auto& c : candidates) {
    const json& m = c.second;
    if (!m["mean"].is_number()) continue;
    if (!best || (higher ? m["mean"].get<double>() > best->second["mean"].get<double>()
                         : m["mean"].get<double>() < best->second["mean"].get<double>()))
      best = &c;
  }
  if (!best) return fail("no point measured it");
  const auto vit = std::find_if(plan_.variants.begin(), plan_.variants.end(), [&](const Variant& v) { return v.name == best->first; });
  Point p;
  p.variant = static_cast<std::size_t>(vit - plan_.variants.begin());
  p.seed = plan_.seeds[0];
  p.name = "selected";
  p.dir = dir_ / "selected";
  p.sets = o_.sets;
  for (const auto& s : assignment_sets(vit->values)) p.sets.push_back(s);
  p.sets.insert(p.sets.end(), o_.then.begin(), o_.then.end());
  out_ << "sweep: best by " << o_.select << " (mean over " << plan_.seeds.size() << " seeds): " << best->first
       << "; running it once" << (o_.then.empty() ? "" : " with the final overrides") << "\n";
  std::error_code ec;
  fs::create_directories(p.dir, ec);
  p.started = std::chrono::steady_clock::now();
  pid_t pid = spawn(point_argv(o_, p, cache_dir_, std::max(1, static_cast<int>(std::thread::hardware_concurrency()))),
                    p.dir / "log.txt");
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - p.started).count();
  read_point_outcome(p, exit_code_of(status));
  json sel{{"metric", o_.select}, {"higher_is_better", higher}, {"best_variant", best->first},
           {"value", best->second["mean"]}, {"ci", best->second.value("ci", json(nullptr))}, {"then", o_.then},
           {"seed", p.seed}, {"dir", "selected"}, {"status", p.status}, {"seconds", p.seconds}};
  if (!p.error.empty()) sel["error"] = p.error;
  try {
    sel["results"] = read_run_record((p.dir / kRunRecordFile).string()).value("results", json::array());
  } catch (const std::exception&) {
    sel["results"] = json::array();
  }
  r["selection"] = sel;
  out_ << "sweep: selected run " << p.status << " in " << p.dir.string() << "\n";
  return p.status == "ok";
}

}  // namespace

// --- aggregation ---------------------------------------------------------------------------

namespace {

json number_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

struct RowAgg {
  std::string variant, label;
  std::map<std::string, std::vector<double>> values;  // metric -> by seed index
};

struct TableAgg {
  std::string node, title;
  bool headline = false;
  json columns = json::array();
  std::vector<RowAgg> rows;
};

json test_json(const std::string& metric, const RowAgg& a, const RowAgg& b) {
  const PairedTest t = paired_t_test(a.values.at(metric), b.values.at(metric));
  return {{"metric", metric}, {"test", "paired t-test"},
          {"a", {{"variant", a.variant}, {"label", a.label}}}, {"b", {{"variant", b.variant}, {"label", b.label}}},
          {"n", t.n}, {"mean_difference", number_or_null(t.mean_difference)},
          {"ci", json::array({number_or_null(t.ci_low), number_or_null(t.ci_high)})},
          {"t", std::isnan(t.t) ? json(nullptr) : std::isinf(t.t) ? json(t.t > 0 ? "inf" : "-inf") : json(t.t)},
          {"p", number_or_null(t.p)}};
}

}  // namespace

json aggregate_results(const fs::path& sweep_dir, const json& points, const json& variants,
                       const std::vector<std::uint64_t>& seeds) {
  (void)variants;
  std::vector<TableAgg> tables;
  for (const auto& p : points) {
    if (p.value("status", "") != "ok") continue;
    const auto seed_at = std::find(seeds.begin(), seeds.end(), p.value("seed", std::uint64_t{0}));
    if (seed_at == seeds.end()) continue;
    const std::size_t s = static_cast<std::size_t>(seed_at - seeds.begin());
    json rec;
    try {
      rec = read_run_record((sweep_dir / p.value("dir", "") / kRunRecordFile).string());
    } catch (const std::exception& e) {
      log_warning("sweep", "point ", p.value("name", ""), ": ", e.what());
      continue;
    }
    for (const auto& t : rec.value("results", json::array())) {
      const std::string node = t.value("node", ""), title = t.value("title", "");
      auto tit = std::find_if(tables.begin(), tables.end(), [&](const TableAgg& x) { return x.node == node && x.title == title; });
      if (tit == tables.end()) {
        tables.push_back({node, title, t.value("headline", false), t.value("columns", json::array()), {}});
        tit = tables.end() - 1;
      }
      for (const auto& row : t.value("rows", json::array())) {
        const std::string variant = p.value("variant", ""), label = row.value("label", "");
        auto rit = std::find_if(tit->rows.begin(), tit->rows.end(), [&](const RowAgg& x) { return x.variant == variant && x.label == label; });
        if (rit == tit->rows.end()) {
          tit->rows.push_back({variant, label, {}});
          rit = tit->rows.end() - 1;
        }
        const json values = row.value("values", json::object());  // items() refers to it: keep it alive
        for (const auto& [k, v] : values.items()) {
          auto& vals = rit->values[k];
          vals.resize(seeds.size(), std::nan(""));
          vals[s] = v.is_number() ? v.get<double>() : std::nan("");
        }
      }
    }
  }
  json out = json::array();
  for (auto& t : tables) {
    json rows = json::array(), tests = json::array(), best = json::object();
    for (const auto& c : t.columns) {
      const std::string key = c.value("key", "");
      const bool higher = c.value("higher_is_better", true);
      const RowAgg* top = nullptr;
      double top_mean = 0;
      for (auto& r : t.rows) {
        r.values[key].resize(seeds.size(), std::nan(""));
        const Summary sm = summarize(r.values[key]);
        if (sm.n > 0 && (!top || (higher ? sm.mean > top_mean : sm.mean < top_mean))) {
          top = &r;
          top_mean = sm.mean;
        }
      }
      if (top) best[key] = {{"variant", top->variant}, {"label", top->label}};
      // Every pair while the table is small; beyond that, each row against the best and the
      // pairs within one variant (the rows one run compares), which is what a reader asks.
      const bool all_pairs = t.rows.size() <= 30;
      for (std::size_t i = 0; i < t.rows.size(); ++i)
        for (std::size_t j = i + 1; j < t.rows.size(); ++j) {
          const RowAgg &a = t.rows[i], &b = t.rows[j];
          if (!all_pairs && a.variant != b.variant && &a != top && &b != top) continue;
          if (seeds.size() < 2) continue;
          tests.push_back(test_json(key, a, b));
        }
    }
    for (const auto& r : t.rows) {
      json metrics = json::object();
      for (const auto& c : t.columns) {
        const std::string key = c.value("key", "");
        const auto& vals = r.values.at(key);
        const Summary sm = summarize(vals);
        json values = json::array();
        for (double v : vals) values.push_back(number_or_null(v));
        metrics[key] = {{"n", sm.n}, {"mean", number_or_null(sm.mean)}, {"sd", number_or_null(sm.sd)},
                        {"ci", sm.n >= 2 ? json::array({number_or_null(sm.ci_low), number_or_null(sm.ci_high)}) : json(nullptr)},
                        {"values", values}, {"seeds", seeds}};
      }
      rows.push_back({{"variant", r.variant}, {"label", r.label}, {"metrics", metrics}});
    }
    json table{{"node", t.node}, {"title", t.title}, {"columns", t.columns}, {"rows", rows}, {"tests", tests}, {"best", best}};
    if (t.headline) table["headline"] = true;
    out.push_back(std::move(table));
  }
  // The headline tables first, as the reports show them.
  std::stable_partition(out.begin(), out.end(), [](const json& t) { return t.value("headline", false); });
  return out;
}

namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// A number as the column shows it: percent columns with one decimal, the others with four
// significant digits (734 pairs, a distance ratio of 0.0694).
std::string shown(double v, const json& column) {
  if (column.value("unit", "") == "%") return fixed(v, 1);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

// "57.6 [55.1, 60.1]" in the column's unit; "n/a" when not measured.
std::string cell(const json& m, const json& column) {
  if (!m.is_object() || !m["mean"].is_number()) return "n/a";
  const double scale = column.value("scale", 1.0);
  std::string text = shown(m["mean"].get<double>() * scale, column);
  if (m["ci"].is_array() && m["ci"][0].is_number())
    text += " [" + shown(m["ci"][0].get<double>() * scale, column) + ", " + shown(m["ci"][1].get<double>() * scale, column) + "]";
  return text;
}

std::string md_escape(std::string s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}

}  // namespace

std::string results_markdown(const json& sweep, const std::vector<std::string>& baselines) {
  const std::size_t seeds = sweep.value("seeds", json::array()).size();
  const bool one_variant = sweep.value("variants", json::array()).size() <= 1;
  std::string md;
  for (const auto& t : sweep.value("results", json::array())) {
    md += "### " + md_escape(t.value("title", "")) + " (" + md_escape(t.value("node", "")) + ")\n\n";
    md += cat("Mean over ", seeds, seeds == 1 ? " seed" : " seeds", seeds > 1 ? " [95% t-interval]" : "", ".\n\n");
    std::string head = one_variant ? "| method |" : "| variant | method |", rule = one_variant ? "|---|" : "|---|---|";
    for (const auto& c : t["columns"]) {
      const std::string unit = c.value("unit", "");
      head += " " + md_escape(c.value("header", "")) + (unit.empty() ? "" : " " + unit) + " |";
      rule += "---:|";
    }
    md += head + "\n" + rule + "\n";
    for (const auto& row : t["rows"]) {
      md += one_variant ? "| " + md_escape(row.value("label", "")) + " |"
                        : "| " + md_escape(row.value("variant", "")) + " | " + md_escape(row.value("label", "")) + " |";
      for (const auto& c : t["columns"]) {
        const std::string key = c.value("key", "");
        md += " " + cell(row["metrics"].value(key, json()), c) + " |";
      }
      md += "\n";
    }
    md += "\n";
    // Each row against each baseline label of the same variant: the paired test across seeds.
    for (const auto& base : baselines) {
      bool any = false;
      std::string block = "Paired t-tests across seeds against " + md_escape(base) +
                          " (difference of means, two-sided p):\n\n" + head + "\n" + rule + "\n";
      for (const auto& row : t["rows"]) {
        if (row.value("label", "") == base) continue;
        std::string line = one_variant ? "| " + md_escape(row.value("label", "")) + " |"
                                       : "| " + md_escape(row.value("variant", "")) + " | " + md_escape(row.value("label", "")) + " |";
        bool row_any = false;
        for (const auto& c : t["columns"]) {
          const std::string key = c.value("key", "");
          const json* found = nullptr;
          bool flip = false;
          for (const auto& test : t["tests"]) {
            if (test.value("metric", "") != key) continue;
            const json &a = test["a"], &b = test["b"];
            const bool same_variant = a.value("variant", "") == row.value("variant", "") && b.value("variant", "") == row.value("variant", "");
            if (!same_variant) continue;
            if (a.value("label", "") == row.value("label", "") && b.value("label", "") == base) found = &test;
            if (b.value("label", "") == row.value("label", "") && a.value("label", "") == base) found = &test, flip = true;
          }
          if (!found || !(*found)["p"].is_number()) {
            line += " |";
            continue;
          }
          const double d = (*found)["mean_difference"].get<double>() * (flip ? -1 : 1) * c.value("scale", 1.0);
          // The same difference at every seed (two rows that do not depend on the seed, such as
          // a fixed baseline against another): a t-test has no spread to weigh it against.
          const json& ci = (*found)["ci"];
          const bool no_spread = ci.is_array() && ci.size() == 2 && ci[0] == ci[1];
          line += " " + std::string(d >= 0 ? "+" : "") + shown(d, c) +
                  (no_spread ? std::string(" (every seed)") : " (p " + fixed((*found)["p"].get<double>(), 3) + ")") + " |";
          row_any = true;
        }
        if (row_any) {
          block += line + "\n";
          any = true;
        }
      }
      if (any) md += block + "\n";
    }
  }
  return md;
}

SweepResult run_sweep(const SweepOptions& options) {
  if (options.grid.empty() && options.points.empty() && options.seeds.empty())
    throw ConfigError("nothing to sweep: give --grid VAR=v1,v2 (repeatable), --point VAR=v;VAR2=w, or --seeds N");
  if (options.executable.empty()) throw ConfigError("no embedflow executable to run points with");
  if (options.then.size() && options.select.empty()) throw ConfigError("--then needs --select (the metric that picks the point)");
  if (!options.select.empty()) parse_metric_spec(options.select);
  for (const auto& a : options.against) parse_against(a);
  const fs::path dir = options.out.empty() ? fs::path("out") / (fs::path(options.graph).stem().string() + "-sweep") : options.out;

  Registry registry;
  auto loader = load_plugins(options.plugin_path, graph_plugin_dirs(options.graph), registry);
  Plan plan = plan_points(options, dir, registry);

  std::error_code ec;
  fs::create_directories(dir / "points", ec);
  if (ec) throw Error(cat("cannot create the sweep folder '", dir.string(), "': ", ec.message()));
  FolderLock lock(dir);
  Sweep sweep(options, dir, std::move(plan));
  return sweep.run();
}

}  // namespace embedflow::runs
