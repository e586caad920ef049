#include "embedflow_runs/run_record.hpp"

#include <openssl/evp.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "embedflow/atomic_file.hpp"
#include "embedflow/error.hpp"
#include "embedflow/parallel.hpp"
#include "embedflow/report_files.hpp"
#include "embedflow/version.hpp"
#include "embedflow_runs/bounded_json.hpp"

#ifndef EMBEDFLOW_GIT_COMMIT
#define EMBEDFLOW_GIT_COMMIT ""
#endif

namespace embedflow::runs {
using namespace engine;
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

std::string read_small_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The shared libraries this process has mapped whose names matter to results: the BLAS and
// LAPACK actually in use (Debian picks them through alternatives, so the mapped path says which
// one), LibTorch, OpenCV, HDF5, oneTBB, yaml-cpp, Gloo. Canonical paths carry the versions.
json loaded_libraries() {
  static const std::vector<std::pair<std::string, std::string>> wanted{
      {"blas", "blas"},       {"lapack", "lapack"}, {"openblas", "blas"}, {"libtorch", "libtorch"},
      {"libc10", "libtorch"}, {"opencv", "opencv"}, {"hdf5", "hdf5"},     {"libtbb", "onetbb"},
      {"yaml-cpp", "yaml-cpp"}, {"gloo", "gloo"},   {"libgomp", "openmp"}};
  std::map<std::string, std::set<std::string>> found;
  std::istringstream maps(read_small_file("/proc/self/maps"));
  for (std::string line; std::getline(maps, line);) {
    auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string path = line.substr(slash);
    std::string name = fs::path(path).filename().string();
    if (name.find(".so") == std::string::npos || name.rfind("libembedflow", 0) == 0) continue;
    for (const auto& [needle, group] : wanted)
      if (name.find(needle) != std::string::npos) {
        std::error_code ec;
        fs::path canonical = fs::canonical(path, ec);
        found[group].insert(ec ? path : canonical.string());
        break;
      }
  }
  json out = json::object();
  for (const auto& [group, paths] : found) out[group] = std::vector<std::string>(paths.begin(), paths.end());
  return out;
}

json host_info() {
  json h;
  char name[256] = {0};
  gethostname(name, sizeof name - 1);
  h["hostname"] = name;
  h["cores"] = std::thread::hardware_concurrency();
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) h["memory_bytes"] = static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page);
  utsname u{};
  if (uname(&u) == 0) h["os"] = std::string(u.sysname) + " " + u.release + " " + u.machine;
  std::string load = read_small_file("/proc/loadavg");
  if (!load.empty()) {
    std::istringstream in(load);
    double l1 = 0, l5 = 0, l15 = 0;
    in >> l1 >> l5 >> l15;
    h["load_average_at_start"] = {l1, l5, l15};
  }
  return h;
}

json progress_json(const ProgressReport& r) {
  json p;
  p["done"] = r.done;
  if (r.total) p["total"] = r.total;
  p["unit"] = r.unit.empty() ? "items" : r.unit;
  json m = json::object();
  for (const auto& [k, v] : r.metrics) m[k] = std::isfinite(v) ? json(v) : json(nullptr);
  if (!m.empty()) p["metrics"] = m;
  return p;
}

// Flattens a parameter value into "path: text" pairs so a difference names the leaf that changed.
void flatten(const Value& v, const std::string& path, std::map<std::string, std::string>& out) {
  if (v.is_map() && !v.as_map().empty()) {
    for (const auto& [k, item] : v.as_map()) flatten(item, path.empty() ? k : path + "." + k, out);
    return;
  }
  out[path] = v.str();
}

std::string edge_text(const EdgeSpec& e) {
  return (e.from_port.empty() ? e.from_node : e.from_node + "." + e.from_port) + " -> " +
         (e.to_port.empty() ? e.to_node : e.to_node + "." + e.to_port);
}

}  // namespace

// The SDK's atomic output file (write, flush, check, fsync, rename, fsync the folder; the
// temporary removed on every failure), committed under its final name even when the run was
// interrupted: a record of how a run ended is complete whatever the ending.
void write_file_replacing(const fs::path& path, const std::string& text) {
  embedflow::write_file_atomic(path, text, OnInterrupt::replace);
}

std::string utc_timestamp(std::chrono::system_clock::time_point t) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm utc{};
  gmtime_r(&secs, &utc);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &utc);
  char full[48];
  std::snprintf(full, sizeof full, "%s.%03dZ", buf, static_cast<int>(ms % 1000));
  return full;
}

std::string sha256_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(cat("cannot read '", path, "'"));
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  std::vector<char> buf(1 << 16);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    if (in.gcount() > 0) EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<std::size_t>(in.gcount()));
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx.get(), digest, &len);
  std::string hex;
  char two[3];
  for (unsigned i = 0; i < len; ++i) {
    std::snprintf(two, sizeof two, "%02x", digest[i]);
    hex += two;
  }
  return hex;
}

namespace {

fs::path base_output_dir(const GraphSpec& spec, const std::string& out_option) {
  if (!out_option.empty()) return out_option;
  if (spec.out.is_string()) return spec.out.as_string();
  for (const auto& [name, v] : spec.vars)
    if (name == "out" && v.is_string() && !v.as_string().empty()) return v.as_string();
  return fs::path("out") / fs::path(spec.file).stem();
}

}  // namespace

// Under a launcher (torchrun, srun) every rank runs the same command in the same folder: rank 0
// keeps the folder and rank r > 0 records into its rank-r subfolder, so the ranks' run records
// and metrics do not overwrite each other.
fs::path run_output_dir(const GraphSpec& spec, const std::string& out_option) {
  fs::path dir = base_output_dir(spec, out_option);
  try {
    const ParallelPlace place = resolve_parallel_place(0, -1);
    if (place.rank > 0) dir /= cat("rank-", place.rank);
  } catch (const ConfigError&) {  // a malformed variable: the nodes that read it say so
  }
  return dir;
}

RunRecorder::RunRecorder(fs::path out_dir, RunRecordInfo info, const ResolvedGraph& graph,
                         const std::vector<LoadedPlugin>& plugins)
    : dir_(std::move(out_dir)), graph_(graph), start_(std::chrono::steady_clock::now()) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw Error(cat("cannot create the output folder '", dir_.string(), "': ", ec.message()));
  const GraphSpec& spec = graph.spec;
  std::string header = cat("The graph as run ", info.run_id, " ran it: ", info.graph_file,
                           " with variables, --set overrides and merge keys applied.\n"
                           "embedflow run --from ",
                           (dir_ / kRunRecordFile).string(), " runs it again.");
  if (!spec.disabled.empty()) {
    std::string names;
    for (const auto& n : spec.disabled) names += (names.empty() ? "" : ", ") + n;
    header += "\nLeft out (enabled: false, or fed only by left-out nodes): " + names;
  }
  std::string yaml = graph_to_yaml(spec, header);
  write_file_replacing(dir_ / kResolvedGraphFile, yaml);

  json& r = record_;
  r["format"] = kRunRecordFormat;
  r["run_id"] = info.run_id;
  r["status"] = "running";
  r["command"] = info.command;
  std::error_code cwd_ec;
  r["cwd"] = fs::current_path(cwd_ec).string();
  json g;
  g["path"] = info.graph_file;
  g["absolute_path"] = fs::absolute(info.graph_file).lexically_normal().string();
  // With --from, the graph that runs is the recorded one; the file may have changed since.
  if (!info.graph_sha256.empty()) {
    g["sha256"] = info.graph_sha256;
  } else {
    try {
      g["sha256"] = sha256_file(info.graph_file);
    } catch (const Error&) {
      g["sha256"] = nullptr;
    }
  }
  g["description"] = spec.description;
  g["resolved_file"] = kResolvedGraphFile;
  g["resolved_yaml"] = yaml;
  g["resolved_sha256"] = sha256_file((dir_ / kResolvedGraphFile).string());
  json vars = json::object();
  for (const auto& [name, v] : spec.vars) vars[name] = v.str();
  g["vars"] = vars;
  g["left_out"] = spec.disabled;
  r["graph"] = g;
  r["overrides"] = info.overrides;
  r["seed"] = spec.seed;
  r["seed_from_command_line"] = info.seed_override.has_value();
  r["threads"] = info.threads;
  r["out"] = dir_.string();
  if (!info.from_record.empty()) r["rerun_of"] = info.from_record;
  r["cache"] = info.no_cache ? json("disabled (--no-cache)") : info.cache_dir.empty() ? json(nullptr) : json(info.cache_dir);
  json versions;
  versions["embedflow"] = kVersion;
  versions["abi"] = kAbiVersion;
  versions["toolchain"] = kToolchain;
  versions["git_commit"] = std::string(EMBEDFLOW_GIT_COMMIT).empty() ? json(nullptr) : json(EMBEDFLOW_GIT_COMMIT);
  json ps = json::array();
  for (const auto& p : plugins)
    ps.push_back({{"name", p.name}, {"version", p.version}, {"file", p.file}, {"libraries", p.libraries}});
  versions["plugins"] = ps;
  versions["loaded_libraries"] = loaded_libraries();
  r["versions"] = versions;
  r["host"] = host_info();
  r["start"] = utc_timestamp(std::chrono::system_clock::now());
  write_record();

  metrics_.open(dir_ / kMetricsFile, std::ios::trunc);
  if (!metrics_) throw Error(cat("cannot write '", (dir_ / kMetricsFile).string(), "'"));
}

// Invalid UTF-8 (a file name, a message quoting a damaged file) becomes U+FFFD rather than an
// exception that would leave the record at "running".
void RunRecorder::write_record() {
  write_file_replacing(dir_ / kRunRecordFile, record_.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
}

namespace {
json finite_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json numbers(const std::vector<double>& v) {
  json a = json::array();
  for (double x : v) a.push_back(finite_or_null(x));
  return a;
}

// A node publishing a title again replaces what it published under it.
void replace_or_add(json& list, json item) {
  for (auto& existing : list)
    if (existing["node"] == item["node"] && existing["title"] == item["title"]) {
      existing = std::move(item);
      return;
    }
  list.push_back(std::move(item));
}
}  // namespace

void RunRecorder::on_chart(std::string_view node, const ResultChart& chart) {
  json c;
  c["node"] = std::string(node);
  c["title"] = chart.title;
  c["kind"] = chart.kind;
  c["x"] = {{"label", chart.x_label}, {"unit", chart.x_unit}, {"log", chart.log_x}};
  c["y"] = {{"label", chart.y_label}, {"unit", chart.y_unit}, {"log", chart.log_y}};
  c["series"] = json::array();
  for (const auto& s : chart.series) {
    json one{{"name", s.name}, {"x", numbers(s.x)}, {"y", numbers(s.y)}};
    if (!s.lo.empty()) one["lo"] = numbers(s.lo);
    if (!s.hi.empty()) one["hi"] = numbers(s.hi);
    if (s.dashed) one["dashed"] = true;
    c["series"].push_back(std::move(one));
  }
  if (!chart.progress_metrics.empty()) c["progress_metrics"] = chart.progress_metrics;
  if (chart.few_points) c["few_points"] = true;
  std::lock_guard<std::mutex> lock(results_mutex_);
  replace_or_add(charts_, std::move(c));
}

void RunRecorder::on_figure(std::string_view node, const ResultFigure& figure) {
  json f{{"node", std::string(node)}, {"title", figure.title}, {"path", figure.path}, {"caption", figure.caption}};
  std::lock_guard<std::mutex> lock(results_mutex_);
  replace_or_add(figures_, std::move(f));
}

void RunRecorder::on_text(std::string_view node, const std::string& title, const std::string& text) {
  json t{{"node", std::string(node)}, {"title", title}, {"text", text}};
  std::lock_guard<std::mutex> lock(results_mutex_);
  replace_or_add(texts_, std::move(t));
}

void RunRecorder::on_results(std::string_view node, const ResultTable& table, bool headline) {
  auto number = finite_or_null;
  json t;
  t["node"] = std::string(node);
  t["title"] = table.title;
  if (headline) t["headline"] = true;
  t["columns"] = json::array();
  for (const auto& c : table.columns)
    t["columns"].push_back({{"key", c.key}, {"header", c.header}, {"unit", c.unit}, {"scale", number(c.scale)},
                            {"higher_is_better", c.higher_is_better}});
  t["rows"] = json::array();
  for (const auto& row : table.rows) {
    json values = json::object(), intervals = json::object();
    for (const auto& [k, v] : row.values) values[k] = number(v);
    for (const auto& [k, ci] : row.intervals) intervals[k] = json::array({number(ci.first), number(ci.second)});
    json r{{"label", row.label}, {"values", values}};
    if (!intervals.empty()) r["intervals"] = intervals;
    t["rows"].push_back(std::move(r));
  }
  std::lock_guard<std::mutex> lock(results_mutex_);
  replace_or_add(results_, std::move(t));
}

void RunRecorder::on_progress(std::string_view node, const ProgressReport& report) {
  if (report.metrics.empty()) return;
  json line;
  line["run_id"] = record_["run_id"];
  line["t"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  line["node"] = std::string(node);
  line["done"] = report.done;
  if (report.total) line["total"] = report.total;
  line["unit"] = report.unit.empty() ? "items" : report.unit;
  for (const auto& [k, v] : report.metrics) line[k] = std::isfinite(v) ? json(v) : json(nullptr);
  std::string text = line.dump() + "\n";
  std::lock_guard<std::mutex> lock(metrics_mutex_);
  metrics_ << text;
  metrics_.flush();  // a run watched with `tail -f` sees each line as it comes
}

void RunRecorder::finish(const RunResult& result) {
  json& r = record_;
  r["end"] = utc_timestamp(std::chrono::system_clock::now());
  r["seconds"] = result.seconds;
  r["exit_code"] = result.exit_code;
  r["status"] = result.exit_code == 0 ? "done" : result.exit_code == 130 ? "interrupted"
                : result.exit_code == 143 ? "terminated" : "failed";
  if (!result.error.empty()) r["error"] = result.error;
  r["source_records"] = result.source_records;
  rusage ru{};
  if (getrusage(RUSAGE_SELF, &ru) == 0) {
    r["process"]["cpu_s"] = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                            static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
    r["process"]["peak_rss_bytes"] = static_cast<std::uint64_t>(ru.ru_maxrss) * 1024;
  }
  json nodes = json::array();
  for (std::size_t i = 0; i < result.stats.size() && i < graph_.nodes.size(); ++i) {
    const NodeStats& st = result.stats[i];
    const ResolvedNode& rn = graph_.nodes[i];
    json n;
    n["id"] = st.id;
    n["type"] = rn.type ? rn.type->name : rn.spec->type;
    n["plugin"] = rn.type ? rn.type->plugin : "";
    n["mode"] = st.mode;
    if (rn.cache.enabled) {
      bool cache_off = record_["cache"].is_string() && record_["cache"].get<std::string>().rfind("disabled", 0) == 0;
      n["cache"] = cache_off ? "off" : st.mode == "replay" ? "hit" : st.mode == "skip" ? "skipped" : st.cache_write ? "miss" : "off";
    } else {
      n["cache"] = nullptr;
    }
    n["records_in"] = st.records_in;
    n["records_out"] = st.records_out;
    n["stopped_early"] = st.stopped_early;
    n["wall_s"] = st.busy_s;
    n["cpu_s"] = st.cpu_s;
    if (st.reported_progress) n["progress"] = progress_json(st.last_progress);
    nodes.push_back(n);
  }
  r["nodes"] = nodes;
  {
    // In the graph's node order, each node's in the order it published them: parallel
    // evaluators publish in no fixed order, and the report shows results in the order the graph
    // declares its nodes.
    std::map<std::string, std::size_t> order;
    for (std::size_t i = 0; i < graph_.nodes.size(); ++i) order.emplace(graph_.nodes[i].spec->id, i);
    auto by_graph_order = [&order](const json& a, const json& b) {
      auto rank = [&order](const json& x) {
        auto it = order.find(x["node"].get<std::string>());
        return std::make_pair(it == order.end() ? order.size() : it->second, x["node"].get<std::string>());
      };
      return rank(a) < rank(b);
    };
    std::lock_guard<std::mutex> lock(results_mutex_);
    for (json* list : {&results_, &charts_, &figures_, &texts_}) std::stable_sort(list->begin(), list->end(), by_graph_order);
    r["results"] = results_;
    r["charts"] = charts_;
    r["figures"] = figures_;
    r["texts"] = texts_;
  }
  write_record();
}

json read_run_record(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(cat(path, ": cannot read the run record"));
  std::stringstream text;
  text << in.rdbuf();
  json r;
  try {
    r = parse_bounded_json(text.str(), path);  // nesting bounded: the record is walked and copied
  } catch (const ConfigError& e) {
    throw ConfigError(cat(path, ": not a run record: ", e.what()));
  }
  if (!r.is_object() || r.value("format", "") != kRunRecordFormat)
    throw ConfigError(cat(path, ": not a run record (no \"format\": \"", kRunRecordFormat, "\")"));
  for (const char* key : {"run_id", "graph", "command"})
    if (!r.contains(key)) throw ConfigError(cat(path, ": run record lacks \"", key, "\""));
  if (!r["graph"].contains("resolved_yaml") || !r["graph"]["resolved_yaml"].is_string())
    throw ConfigError(cat(path, ": run record lacks the resolved graph (graph.resolved_yaml)"));
  return r;
}

std::vector<std::string> graph_differences(const GraphSpec& a, const GraphSpec& b) {
  std::vector<std::string> out;
  if (a.seed != b.seed) out.push_back(cat("seed: ", a.seed, " -> ", b.seed));
  if (a.max_in_flight != b.max_in_flight) out.push_back(cat("max_in_flight: ", a.max_in_flight, " -> ", b.max_in_flight));
  if (!(a.out == b.out)) out.push_back(cat("out: ", a.out.str(), " -> ", b.out.str()));
  std::map<std::string, const NodeSpec*> na, nb;
  for (const auto& n : a.nodes) na[n.id] = &n;
  for (const auto& n : b.nodes) nb[n.id] = &n;
  for (const auto& [id, n] : na)
    if (!nb.count(id)) out.push_back(cat("node '", id, "' (", n->type, ") removed"));
  for (const auto& [id, n] : nb) {
    auto it = na.find(id);
    if (it == na.end()) {
      out.push_back(cat("node '", id, "' (", n->type, ") added"));
      continue;
    }
    const NodeSpec& x = *it->second;
    if (x.type != n->type) out.push_back(cat("node '", id, "' type: ", x.type, " -> ", n->type));
    std::map<std::string, std::string> pa, pb;
    flatten(x.params, "", pa);
    flatten(n->params, "", pb);
    for (const auto& [k, v] : pa) {
      auto j = pb.find(k);
      if (j == pb.end()) out.push_back(cat("node '", id, "' param '", k, "': ", v, " -> (unset)"));
      else if (j->second != v) out.push_back(cat("node '", id, "' param '", k, "': ", v, " -> ", j->second));
    }
    for (const auto& [k, v] : pb)
      if (!pa.count(k)) out.push_back(cat("node '", id, "' param '", k, "': (unset) -> ", v));
    if (!(x.cache == n->cache)) out.push_back(cat("node '", id, "' cache: ", x.cache.str(), " -> ", n->cache.str()));
    if (!(x.enabled == n->enabled)) out.push_back(cat("node '", id, "' enabled: ", x.enabled.str(), " -> ", n->enabled.str()));
    if (x.in_flight != n->in_flight) out.push_back(cat("node '", id, "' in_flight: ", x.in_flight, " -> ", n->in_flight));
  }
  std::set<std::string> ea, eb;
  for (const auto& e : a.edges) ea.insert(edge_text(e));
  for (const auto& e : b.edges) eb.insert(edge_text(e));
  for (const auto& e : ea)
    if (!eb.count(e)) out.push_back("edge removed: " + e);
  for (const auto& e : eb)
    if (!ea.count(e)) out.push_back("edge added: " + e);
  return out;
}

}  // namespace embedflow::runs
