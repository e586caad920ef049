// `embedflow sweep`: the points of a plan (sweep_plan.cpp) run `jobs` at a time as child
// processes (sweep_points.cpp), sweep.json rewritten as they finish, the selection by a
// validation metric, then the aggregated results (sweep_results.cpp), table.md and the report.
#include "embedflow_runs/sweep.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include "embedflow/atomic_file.hpp"
#include "embedflow/error.hpp"
#include "embedflow/log.hpp"
#include "embedflow_engine/cache.hpp"
#include "embedflow_runs/report.hpp"
#include "embedflow_runs/run_record.hpp"
#include "embedflow_runs/session.hpp"
#include "embedflow_runs/sweep_report.hpp"
#include "sweep_internal.hpp"

namespace embedflow::runs {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using namespace engine;
using namespace sweep_detail;

namespace {

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

SweepResult run_sweep(const SweepOptions& options) {
  if (options.grid.empty() && options.points.empty() && options.seeds.empty())
    throw ConfigError("nothing to sweep: give --grid VAR=v1,v2 (repeatable), --point VAR=v;VAR2=w, or --seeds N");
  if (options.executable.empty()) throw ConfigError("no embedflow executable to run points with");
  if (options.then.size() && options.select.empty()) throw ConfigError("--then needs --select (the metric that picks the point)");
  if (!options.select.empty()) parse_metric_spec(options.select);
  for (const auto& a : options.against) parse_against(a);
  const fs::path dir = options.out.empty() ? fs::path("out") / (fs::path(options.graph).stem().string() + "-sweep") : options.out;

  const LoadedPlugins& plugins = loaded_plugins(options.plugin_path, graph_plugin_dirs(options.graph));
  Plan plan = plan_points(options, dir, plugins.registry);

  std::error_code ec;
  fs::create_directories(dir / "points", ec);
  if (ec) throw Error(cat("cannot create the sweep folder '", dir.string(), "': ", ec.message()));
  FolderLock lock(dir);
  Sweep sweep(options, dir, std::move(plan));
  return sweep.run();
}

}  // namespace embedflow::runs
