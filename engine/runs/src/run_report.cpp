#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "embedflow/error.hpp"
#include "embedflow/log.hpp"
#include "embedflow_runs/bounded_json.hpp"
#include "embedflow_engine/graph_file.hpp"
#include "embedflow_runs/run_record.hpp"
#include "embedflow_runs/report.hpp"

namespace embedflow::runs {
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using engine::GraphSpec;

namespace {

// What --share leaves out. Every string of the page's data (keys too) goes through apply():
// known folders become names that say what they were, the host name "<host>", and any other
// absolute path keeps only its file name.
class Redactor {
 public:
  void add_prefix(const std::string& path, const std::string& name) {
    if (path.size() > 1 && path[0] == '/') prefixes_.emplace_back(path, name);
  }
  void set_host(std::string host) { host_ = std::move(host); }
  void sort() {
    std::sort(prefixes_.begin(), prefixes_.end(), [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  }
  std::string apply(std::string s) const {
    for (const auto& [prefix, name] : prefixes_) {
      std::size_t at = 0;
      while ((at = s.find(prefix, at)) != std::string::npos) {
        const std::size_t end = at + prefix.size();
        // "/home/u/out" must not turn "/home/u/outside" into "<run folder>side".
        if (end < s.size() && (std::isalnum(static_cast<unsigned char>(s[end])) || s[end] == '-' || s[end] == '_' ||
                               s[end] == '.')) {
          at += 1;
          continue;
        }
        s.replace(at, prefix.size(), name);
        at += name.size();
      }
    }
    if (host_.size() >= 2)
      for (std::size_t at = s.find(host_); at != std::string::npos; at = s.find(host_, at + 1)) {
        auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; };
        const bool starts = at == 0 || !word(s[at - 1]);
        const bool ends = at + host_.size() >= s.size() || !word(s[at + host_.size()]);
        if (starts && ends) s.replace(at, host_.size(), "<host>");
      }
    return strip_absolute_paths(s);
  }
  json apply(const json& v) const {
    if (v.is_string()) return apply(v.get<std::string>());
    if (v.is_array()) {
      json out = json::array();
      for (const auto& item : v) out.push_back(apply(item));
      return out;
    }
    if (v.is_object()) {
      json out = json::object();
      for (auto it = v.begin(); it != v.end(); ++it) out[apply(it.key())] = apply(it.value());
      return out;
    }
    return v;
  }

 private:
  // "/a/b/c.txt" after a start, a space, a quote, "=", "(", "[" or "," becomes ".../c.txt"; URLs
  // ("http://...": the slash follows a colon) and relative paths are left alone.
  static std::string strip_absolute_paths(const std::string& s) {
    auto starts_path = [](char before) {
      return std::isspace(static_cast<unsigned char>(before)) || before == '\'' || before == '"' || before == '`' ||
             before == '=' || before == '(' || before == '[' || before == ',';
    };
    auto ends_path = [](char c) {
      return std::isspace(static_cast<unsigned char>(c)) || c == '\'' || c == '"' || c == '`' || c == '<' ||
             c == '>' || c == ',' || c == ';' || c == ')' || c == ']' || c == '}';
    };
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size();) {
      if (s[i] == '/' && (i == 0 || starts_path(s[i - 1])) && i + 1 < s.size() && s[i + 1] != '/' && !ends_path(s[i + 1])) {
        std::size_t end = i;
        while (end < s.size() && !ends_path(s[end])) ++end;
        std::string path = s.substr(i, end - i);
        while (path.size() > 1 && path.back() == '/') path.pop_back();
        out += ".../" + path.substr(path.find_last_of('/') + 1);
        i = end;
        continue;
      }
      out += s[i++];
    }
    return out;
  }
  std::vector<std::pair<std::string, std::string>> prefixes_;
  std::string host_;
};

// The graph drawn as layers top to bottom: a node's layer is the longest path from a source.
std::string graph_svg(const GraphSpec& spec) {
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < spec.nodes.size(); ++i) index[spec.nodes[i].id] = i;
  std::vector<std::vector<std::size_t>> succ(spec.nodes.size());
  std::vector<int> indegree(spec.nodes.size(), 0), layer(spec.nodes.size(), 0);
  for (const auto& e : spec.edges) {
    auto a = index.find(e.from_node), b = index.find(e.to_node);
    if (a == index.end() || b == index.end()) continue;
    succ[a->second].push_back(b->second);
    ++indegree[b->second];
  }
  std::vector<std::size_t> queue;
  for (std::size_t i = 0; i < spec.nodes.size(); ++i)
    if (indegree[i] == 0) queue.push_back(i);
  for (std::size_t q = 0; q < queue.size(); ++q)
    for (std::size_t s : succ[queue[q]]) {
      layer[s] = std::max(layer[s], layer[queue[q]] + 1);
      if (--indegree[s] == 0) queue.push_back(s);
    }
  std::map<int, std::vector<std::size_t>> layers;
  for (std::size_t i = 0; i < spec.nodes.size(); ++i) layers[layer[i]].push_back(i);
  const int box_w = 180, box_h = 42, gap_x = 24, gap_y = 46, margin = 12;
  std::size_t widest = 1;
  for (const auto& [l, ids] : layers) widest = std::max(widest, ids.size());
  const int width = margin * 2 + static_cast<int>(widest) * (box_w + gap_x) - gap_x;
  const int height = margin * 2 + static_cast<int>(layers.size()) * (box_h + gap_y) - gap_y;
  std::vector<std::pair<int, int>> pos(spec.nodes.size());
  int row = 0;
  for (const auto& [l, ids] : layers) {
    const int row_w = static_cast<int>(ids.size()) * (box_w + gap_x) - gap_x;
    int x = (width - row_w) / 2;
    for (std::size_t i : ids) {
      pos[i] = {x, margin + row * (box_h + gap_y)};
      x += box_w + gap_x;
    }
    ++row;
  }
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"graph\" width=\"" << width << "\" height=\"" << height
    << "\" viewBox=\"0 0 " << width << " " << height << "\">"
    << "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" "
       "orient=\"auto-start-reverse\"><path d=\"M 0 0 L 10 5 L 0 10 z\" fill=\"#667\"/></marker></defs>";
  for (const auto& e : spec.edges) {
    auto a = index.find(e.from_node), b = index.find(e.to_node);
    if (a == index.end() || b == index.end()) continue;
    const int x1 = pos[a->second].first + box_w / 2, y1 = pos[a->second].second + box_h;
    const int x2 = pos[b->second].first + box_w / 2, y2 = pos[b->second].second;
    const int my = (y1 + y2) / 2;
    s << "<path class=\"edge\" d=\"M" << x1 << "," << y1 << " C" << x1 << "," << my << " " << x2 << "," << my << " " << x2
      << "," << y2 << "\" fill=\"none\" stroke=\"#667\" marker-end=\"url(#arrow)\"><title>"
      << xml_escape(e.from_node + (e.from_port.empty() ? "" : "." + e.from_port) + " -> " + e.to_node +
                    (e.to_port.empty() ? "" : "." + e.to_port))
      << "</title></path>";
  }
  for (std::size_t i = 0; i < spec.nodes.size(); ++i) {
    const auto& n = spec.nodes[i];
    const auto [x, y] = pos[i];
    s << "<g class=\"node\"><title>" << xml_escape(n.id + " (" + n.type + ")\n" + n.params.str()) << "</title>"
      << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"" << box_w << "\" height=\"" << box_h
      << "\" rx=\"6\" fill=\"#eef3fb\" stroke=\"#4a6fa5\"/>"
      << "<text x=\"" << x + box_w / 2 << "\" y=\"" << y + 17 << "\" text-anchor=\"middle\" font-weight=\"bold\">"
      << xml_escape(n.id) << "</text>"
      << "<text x=\"" << x + box_w / 2 << "\" y=\"" << y + 33 << "\" text-anchor=\"middle\" font-size=\"11\" fill=\"#445\">"
      << xml_escape(n.type) << "</text></g>";
  }
  s << "</svg>";
  return s.str();
}

// Whether `p` (a path inside the run folder, perhaps a symbolic link) leads to a file inside
// `root` (the run folder, canonical): a link to /etc/passwd must not be read into a page that
// may be shared.
bool stays_inside(const fs::path& p, const fs::path& root) {
  std::error_code ec;
  const fs::path target = fs::canonical(p, ec);
  if (ec) return false;
  const fs::path rel = target.lexically_relative(root);
  return !rel.empty() && *rel.begin() != ".." && !rel.is_absolute();
}

std::string image_mime(const std::string& ext) {
  if (ext == ".png") return "image/png";
  if (ext == ".jpg" || ext == ".jpeg") return "image/jpeg";
  if (ext == ".svg") return "image/svg+xml";
  return "";
}

// A number as the shortest text that reads back as the same double ("0.1", not
// "0.10000000000000001"); other text unchanged.
std::string shortest_number(const std::string& text) {
  if (text.empty()) return text;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (!end || *end != '\0' || text.find_first_of("0123456789") == std::string::npos) return text;
  // Positional where that stays short ("0.0003", "100000", as JavaScript prints them), else
  // scientific ("1e-30").
  char buf[400];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  if (ec == std::errc() && p - buf <= 21) return std::string(buf, p);
  auto [q, ec2] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  return ec2 == std::errc() ? std::string(buf, q) : text;
}

// How run b's graph differs from run a's, for a reader: differences that are only each run's
// own output folder (every path under `out`) are left out, numbers are shown at shortest round
// trip, and a value unchanged up to its spelling ("1e-3" and "0.001") is no difference.
json reader_differences(const GraphSpec& a, const GraphSpec& b, const std::string& out_a, const std::string& out_b) {
  json out = json::array();
  auto under = [](const std::string& v, const std::string& root, std::string& rest) {
    if (root.empty() || v.compare(0, root.size(), root) != 0) return false;
    if (v.size() > root.size() && v[root.size()] != '/') return false;
    rest = v.substr(root.size());
    return true;
  };
  for (const std::string& line : graph_differences(a, b)) {
    const auto arrow = line.rfind(" -> ");
    const auto colon = arrow == std::string::npos ? std::string::npos : line.rfind(": ", arrow);
    if (arrow == std::string::npos || colon == std::string::npos) {
      out.push_back({{"what", line}});
      continue;
    }
    const std::string what = line.substr(0, colon);
    std::string va = line.substr(colon + 2, arrow - colon - 2), vb = line.substr(arrow + 4);
    std::string rest_a, rest_b;
    if (what == "out" || (under(va, out_a, rest_a) && under(vb, out_b, rest_b) && rest_a == rest_b)) continue;
    va = shortest_number(va);
    vb = shortest_number(vb);
    if (va == vb) continue;
    out.push_back({{"what", what}, {"from", va}, {"to", vb}});
  }
  return out;
}

struct RunData {
  json page;      // what the page shows for this run
  GraphSpec spec;
  std::string out;  // the run's output folder as its graph names it
};

// The series of a chart that shows a node's progress metrics, read from metrics.jsonl.
struct ProgressLog {
  std::map<std::string, std::map<std::string, std::pair<std::vector<double>, std::vector<double>>>> series;  // node -> metric -> (x, y)
  std::map<std::string, std::string> unit;  // node -> its progress unit
};

ProgressLog read_progress_log(const fs::path& file) {
  ProgressLog log;
  std::ifstream in(file);
  std::size_t line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.empty()) continue;
    json m;
    try {
      m = parse_bounded_json(line, cat(file.string(), ":", line_no));
    } catch (const ConfigError& e) {
      throw Error(cat(file.string(), ":", line_no, ": not a JSON line of metrics (", e.what(), ")"));
    }
    if (!m.is_object() || !m.contains("node") || !m["node"].is_string()) continue;
    const std::string node = m["node"].get<std::string>();
    const double done = m.contains("done") && m["done"].is_number() ? m["done"].get<double>() : 0.0;
    if (m.contains("unit") && m["unit"].is_string()) log.unit[node] = m["unit"].get<std::string>();
    for (auto it = m.begin(); it != m.end(); ++it) {
      if (!it.value().is_number()) continue;
      auto& [x, y] = log.series[node][it.key()];
      if (x.size() >= kReportMaxChartPoints) continue;
      x.push_back(done);
      y.push_back(it.value().get<double>());
    }
  }
  return log;
}

json fill_progress_chart(json chart, const ProgressLog& log) {
  const std::string node = chart["node"].get<std::string>();
  auto found = log.series.find(node);
  for (const auto& metric : chart["progress_metrics"]) {
    if (!metric.is_string() || found == log.series.end()) continue;
    auto s = found->second.find(metric.get<std::string>());
    if (s == found->second.end()) continue;
    chart["series"].push_back({{"name", metric}, {"x", s->second.first}, {"y", s->second.second}});
  }
  if (chart["x"]["label"].get<std::string>().empty()) {
    auto u = log.unit.find(node);
    chart["x"]["label"] = u == log.unit.end() ? "progress" : u->second;
  }
  return chart;
}

RunData collect_run(const fs::path& dir) {
  const fs::path record_path = dir / kRunRecordFile;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw ConfigError(cat(dir.string(), ": no such folder"));
  if (!fs::exists(record_path, ec))
    throw ConfigError(cat(dir.string(), ": no run record (", kRunRecordFile,
                          ") in this folder; `embedflow run` writes one in the graph's output folder"));
  const fs::path root = fs::canonical(dir, ec);
  if (ec) throw ConfigError(cat(dir.string(), ": ", ec.message()));
  for (const char* name : {kRunRecordFile, kMetricsFile})
    if (fs::exists(dir / name, ec) && !stays_inside(dir / name, root))
      throw ConfigError(cat((dir / name).string(), ": a symbolic link out of the run folder; the report reads files "
                                                   "inside the folder only"));
  RunData run;
  json record = read_run_record(record_path.string());
  std::vector<Diagnostic> problems;
  run.spec = engine::parse_graph_text(record["graph"]["resolved_yaml"].get<std::string>(),
                                      (dir / kResolvedGraphFile).string(), problems);
  run.out = record.contains("out") && record["out"].is_string() ? record["out"].get<std::string>() : run.spec.out.str();
  json& page = run.page;
  page["dir"] = dir.string();
  page["graph_svg"] = graph_svg(run.spec);
  json order = json::array();
  for (const auto& n : run.spec.nodes) order.push_back(n.id);
  page["node_order"] = order;

  // What the nodes published: tables as they are, charts with their progress series read in.
  auto list = [&record](const char* key) {
    json v = record.contains(key) && record[key].is_array() ? record[key] : json::array();
    record.erase(key);
    return v;
  };
  page["tables"] = list("results");
  json charts = json::array();
  const ProgressLog log = fs::exists(dir / kMetricsFile, ec) ? read_progress_log(dir / kMetricsFile) : ProgressLog{};
  for (json chart : list("charts")) {
    if (!chart.is_object() || !chart.contains("node") || !chart["node"].is_string()) continue;
    if (!chart.contains("series") || !chart["series"].is_array()) chart["series"] = json::array();
    if (chart.contains("progress_metrics") && chart["progress_metrics"].is_array()) chart = fill_progress_chart(chart, log);
    charts.push_back(std::move(chart));
  }
  page["charts"] = charts;

  // Figures: inlined when the file is a regular image inside the run folder.
  std::set<std::string> shown{kRunRecordFile, kMetricsFile, kResolvedGraphFile};
  json figures = json::array();
  for (json f : list("figures")) {
    if (!f.is_object() || !f.contains("path") || !f["path"].is_string()) continue;
    // A relative path is the node's, from the run's working directory.
    fs::path p = f["path"].get<std::string>();
    if (p.is_relative() && record.contains("cwd") && record["cwd"].is_string()) p = fs::path(record["cwd"].get<std::string>()) / p;
    const std::string mime = image_mime(p.extension().string());
    const std::string rel = stays_inside(p, root) ? fs::canonical(p, ec).lexically_relative(root).string() : "";
    f["file"] = rel.empty() ? p.filename().string() : rel;
    if (rel.empty()) f["note"] = "not shown: outside the run folder";
    else if (mime.empty()) f["note"] = "not shown: not a PNG, JPEG or SVG image";
    else if (!fs::is_regular_file(p, ec)) f["note"] = "not shown: not a regular file";
    else if (fs::file_size(p, ec) > kReportMaxImageBytes) f["note"] = cat("not shown: over ", kReportMaxImageBytes, " bytes");
    else {
      f["src"] = "data:" + mime + ";base64," + base64(read_bytes(p));
      shown.insert(rel);
    }
    f.erase("path");
    figures.push_back(std::move(f));
  }
  page["figures"] = figures;
  page["record"] = record;

  // Everything else the run folder holds, by name and size: listed, never read. A FIFO or a
  // link out of the folder is named as such.
  json files = json::array();
  std::vector<fs::path> paths;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (!it->is_directory()) paths.push_back(it->path());
  std::sort(paths.begin(), paths.end());
  for (const auto& p : paths) {
    const std::string rel = p.lexically_relative(dir).string();
    if (shown.count(rel) || p.extension() == ".html" || rel.find(".tmp") != std::string::npos) continue;
    if (fs::is_symlink(p, ec) && !stays_inside(p, root)) {
      files.push_back({{"file", rel}, {"note", "not read: a symbolic link out of the run folder"}});
      continue;
    }
    if (!fs::is_regular_file(p, ec)) {
      files.push_back({{"file", rel}, {"note", "not a regular file"}});
      continue;
    }
    files.push_back({{"file", rel}, {"bytes", fs::file_size(p, ec)}});
  }
  page["files"] = files;
  return run;
}

// Each run's name in a comparison: the overrides that set it apart from the others, else its folder.
std::vector<std::string> run_names(const std::vector<RunData>& runs) {
  std::vector<std::set<std::string>> overrides;
  for (const auto& r : runs) {
    std::set<std::string> s;
    const json& rec = r.page["record"];
    if (rec.contains("overrides") && rec["overrides"].is_array())
      for (const auto& o : rec["overrides"])
        if (o.is_string() && o.get<std::string>().rfind("out=", 0) != 0) s.insert(o.get<std::string>());
    if (rec.contains("seed") && rec["seed"].is_number()) s.insert(cat("seed=", rec["seed"].dump()));
    overrides.push_back(std::move(s));
  }
  std::vector<std::string> names;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    std::string name;
    for (const auto& o : overrides[i]) {
      bool everywhere = true;
      for (const auto& other : overrides) everywhere = everywhere && other.count(o);
      if (!everywhere) name += (name.empty() ? "" : " ") + o;
    }
    if (name.empty()) name = fs::path(runs[i].page["dir"].get<std::string>()).lexically_normal().filename().string();
    if (name.empty()) name = cat("run ", i + 1);
    names.push_back(name);
  }
  // Two runs may still share a name (the same overrides in two folders): number them.
  for (std::size_t i = 0; i < names.size(); ++i)
    for (std::size_t j = i + 1; j < names.size(); ++j)
      if (names[i] == names[j]) names[j] += cat(" (", j + 1, ")");
  return names;
}

void redact_for_sharing(json& data, const ReportOptions& options) {
  Redactor redact;
  for (std::size_t i = 0; i < options.runs.size(); ++i) {
    json& page = data["runs"][i];
    json& record = page["record"];
    std::error_code ec;
    const fs::path dir = options.runs[i];
    redact.add_prefix(fs::canonical(dir, ec).string(), "<run folder>");
    redact.add_prefix(fs::absolute(dir).lexically_normal().string(), "<run folder>");
    if (record.contains("out") && record["out"].is_string())
      redact.add_prefix(fs::absolute(record["out"].get<std::string>()).lexically_normal().string(), "<run folder>");
    if (record.contains("cwd") && record["cwd"].is_string()) redact.add_prefix(record["cwd"].get<std::string>(), "<working directory>");
    if (record.contains("host") && record["host"].is_object() && record["host"].contains("hostname")) {
      if (record["host"]["hostname"].is_string()) redact.set_host(record["host"]["hostname"].get<std::string>());
      record["host"]["hostname"] = "(left out)";
    }
    record["cwd"] = "(left out)";
    if (record.contains("graph") && record["graph"].is_object()) record["graph"].erase("absolute_path");
    page["dir"] = fs::path(dir).lexically_normal().filename().string();
  }
  std::error_code ec;
  redact.add_prefix(fs::current_path(ec).string(), "<working directory>");
  if (const char* home = std::getenv("HOME")) redact.add_prefix(fs::path(home).lexically_normal().string(), "~");
  redact.sort();
  data = redact.apply(data);
}

}  // namespace

void write_report(const ReportOptions& options) {
  if (options.runs.empty()) throw ConfigError("name at least one run folder");
  std::vector<RunData> runs;
  for (const auto& dir : options.runs) runs.push_back(collect_run(dir));
  const std::vector<std::string> libraries = report_library_texts(options.assets);

  json data;
  data["generated"] = utc_timestamp(std::chrono::system_clock::now());
  const std::vector<std::string> names = run_names(runs);
  data["runs"] = json::array();
  for (std::size_t i = 0; i < runs.size(); ++i) {
    runs[i].page["name"] = names[i];
    data["runs"].push_back(runs[i].page);
  }
  json diffs = json::array();
  for (std::size_t i = 1; i < runs.size(); ++i)
    diffs.push_back({{"run", names[i]}, {"differences", reader_differences(runs[0].spec, runs[i].spec, runs[0].out, runs[i].out)}});
  data["graph_differences"] = diffs;
  const json& first = runs[0].page["record"];
  const std::string graph_name = first.contains("graph") && first["graph"].contains("path") && first["graph"]["path"].is_string()
                                     ? fs::path(first["graph"]["path"].get<std::string>()).filename().string()
                                     : "";
  const std::string title = runs.size() == 1 ? cat(graph_name, " — run ", first.value("run_id", ""))
                                             : cat(graph_name, " — ", runs.size(), " runs compared");
  if (options.share) redact_for_sharing(data, options);
  write_page(options.output, "embedflow: " + title, page_text("run.css") + page_text("tooltip.css"), libraries,
             "report-data", data, script_text(page_text("common.js") + page_text("run.js")));
}

void write_run_report(const fs::path& dir, bool quiet, bool share) {
  ReportOptions o;
  o.runs = {dir};
  o.output = dir / "report.html";
  o.assets = find_report_assets();
  o.share = share;
  try {
    write_report(o);
    if (!quiet) std::cerr << "report: " << o.output.string() << "\n";
  } catch (const std::exception& e) {
    log_warning("report", "no report written: ", e.what());
  }
}

}  // namespace embedflow::runs
