#include "embedflow_engine/report.hpp"

#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "embedflow/error.hpp"
#include "embedflow/log.hpp"
#include "embedflow/report_files.hpp"
#include "embedflow_engine/graph_file.hpp"
#include "embedflow_engine/run_record.hpp"

#ifndef EMBEDFLOW_SOURCE_REPORT_ASSETS
#define EMBEDFLOW_SOURCE_REPORT_ASSETS ""
#endif

namespace embedflow::engine {
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

// The page's own script and style (report_page.cpp).
const char* report_page_script();
const char* report_page_style();

// vega-interpreter evaluates Vega's expressions without eval(), so the page's policy need not allow it.
const char* const kReportAssetFiles[4] = {"vega.min.js", "vega-lite.min.js", "vega-embed.min.js", "vega-interpreter.min.js"};

// A library file in an assets folder: flat (an installed tree), or as npm lays it out
// (node_modules/vega-lite/build/vega-lite.min.js).
fs::path report_asset_file(const fs::path& dir, const std::string& name) {
  std::error_code ec;
  if (fs::exists(dir / name, ec)) return dir / name;
  const std::string package = name.substr(0, name.find(".min.js"));
  return dir / "node_modules" / package / "build" / name;
}

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw Error(cat("cannot read '", p.string(), "'"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

// JSON inside <script>: "<" escaped so no "</script>" or "<!--" can end the element early.
std::string script_json(const json& j) {
  std::string text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '<') out += "\\u003c";
    else out += c;
  }
  return out;
}

std::string script_text(std::string js) {
  // A library's text never closes the element it sits in.
  for (std::size_t at = js.find("</script"); at != std::string::npos; at = js.find("</script", at + 2)) js.insert(at + 1, "\\");
  return js;
}

// The nesting of JSON text is measured before nlohmann-json parses it, without recursion, so a
// document of 10,000 nested objects is a located error instead of a walk (or a copy, or a dump)
// that overflows the stack. Strings are skipped with their escapes; malformed text is left to the
// parser's own message.
json parse_report_json(const std::string& text, const std::string& what) {
  int depth = 0, line = 1;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (c == '\n') ++line;
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') {
      if (++depth > kReportMaxJsonDepth)
        throw ConfigError(cat(what, ":", line, ": JSON nested deeper than ", kReportMaxJsonDepth,
                              " levels (the report's limit, kReportMaxJsonDepth)"));
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  try {
    return json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw ConfigError(cat(what, ": not JSON: ", e.what()));
  }
}

namespace {

constexpr std::uintmax_t kMaxImageBytes = 8u << 20;
constexpr std::uintmax_t kMaxJsonBytes = kReportMaxJsonBytes;
constexpr std::size_t kMaxChartPoints = 5000;

std::string sha256_base64(const std::string& text);  // below, beside base64()

std::string base64(const std::string& bytes) {
  static const char* table = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    unsigned v = (static_cast<unsigned char>(bytes[i]) << 16) | (static_cast<unsigned char>(bytes[i + 1]) << 8) |
                 static_cast<unsigned char>(bytes[i + 2]);
    out += table[(v >> 18) & 63];
    out += table[(v >> 12) & 63];
    out += table[(v >> 6) & 63];
    out += table[v & 63];
  }
  if (i < bytes.size()) {
    unsigned v = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    out += table[(v >> 18) & 63];
    out += table[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? table[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string sha256_base64(const std::string& text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(text.data(), text.size(), digest, &len, EVP_sha256(), nullptr);
  return base64(std::string(reinterpret_cast<const char*>(digest), len));
}

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

bool all_numbers(const json& a) {
  if (!a.is_array() || a.empty()) return false;
  return std::all_of(a.begin(), a.end(), [](const json& v) { return v.is_number() || v.is_null(); });
}

bool all_flat_objects(const json& a) {
  if (!a.is_array() || a.empty()) return false;
  return std::all_of(a.begin(), a.end(), [](const json& v) {
    if (!v.is_object()) return false;
    return std::all_of(v.begin(), v.end(), [](const json& f) { return f.is_primitive(); });
  });
}

struct RunData {
  json page;                        // what the page shows for this run
  std::map<std::string, json> scalars;  // "file: key" -> number, for the comparison
  GraphSpec spec;
};

struct Walk {
  std::string file;
  json& rows;
  json& charts;
  json& tables;
  std::map<std::string, json>& scalars;
  std::map<std::string, std::size_t> chart_of;  // "file: leaf key" -> chart index, to overlay curves
};

std::string leaf_key(const std::string& path) {
  auto dot = path.find_last_of('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

// Rows of objects with a numeric "x" (a swept variable: eval.report's methods): each other
// numeric field charted against x, one line per method.
void chart_against_x(const json& items, const std::string& path, const std::string& x_label, Walk& w) {
  std::map<std::string, json> by_metric;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const json& item = items[i];
    if (!item.is_object() || !item.contains("x") || !item["x"].is_number()) continue;
    const std::string series = item.contains("method") && item["method"].is_string() ? item["method"].get<std::string>()
                                                                                       : cat(path, "[", i, "]");
    for (auto it = item.begin(); it != item.end(); ++it)
      if (it.key() != "x" && it.value().is_number())
        by_metric[it.key()].push_back({{"x", item["x"]}, {"y", it.value()}, {"series", series}});
  }
  for (auto& [metric, points] : by_metric)
    w.charts.push_back({{"title", w.file + ": " + metric + " against " + x_label}, {"x_title", x_label},
                        {"y_title", metric}, {"points", points}});
}

// Walks a JSON document: scalar leaves become rows "a.b.c = v", arrays of numbers become
// charts (arrays under the same key in one file share a chart: every method's CMC in one),
// arrays of flat objects become tables of their own.
void walk_json(const json& v, const std::string& path, Walk& w) {
  const std::string& file = w.file;
  json& rows = w.rows;
  json& charts = w.charts;
  json& tables = w.tables;
  auto& scalars = w.scalars;
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (path.empty() && it.key() == "run_id") continue;  // shown with the run record
      if (it.value().is_array()) {
        std::size_t with_x = 0;
        for (const auto& item : it.value()) with_x += item.is_object() && item.contains("x") && item["x"].is_number();
        if (with_x >= 2)
          chart_against_x(it.value(), it.key(), v.contains("x_label") && v["x_label"].is_string() ? v["x_label"].get<std::string>() : "x", w);
      }
      walk_json(it.value(), path.empty() ? it.key() : path + "." + it.key(), w);
    }
    return;
  }
  if (all_numbers(v) && v.size() >= 2) {
    if (v.size() > kMaxChartPoints) {
      rows.push_back({path, cat("(", v.size(), " values)")});
      return;
    }
    const std::string leaf = leaf_key(path);
    const bool cmc = leaf.find("cmc") != std::string::npos || leaf.find("CMC") != std::string::npos;
    const std::string key = file + ": " + leaf;
    auto found = w.chart_of.find(key);
    if (found == w.chart_of.end()) {
      found = w.chart_of.emplace(key, charts.size()).first;
      charts.push_back({{"title", key}, {"x_title", cmc ? "rank" : "index"}, {"y_title", leaf}, {"points", json::array()}});
    }
    json& points = charts[found->second]["points"];
    for (std::size_t i = 0; i < v.size(); ++i) points.push_back({{"x", i + 1}, {"y", v[i]}, {"series", path}});
    return;
  }
  if (all_flat_objects(v)) {
    json columns = json::array();
    std::set<std::string> seen;
    for (const auto& item : v)
      for (auto it = item.begin(); it != item.end(); ++it)
        if (seen.insert(it.key()).second) columns.push_back(it.key());
    json table_rows = json::array();
    for (const auto& item : v) {
      json row = json::array();
      for (const auto& c : columns) row.push_back(item.contains(c.get<std::string>()) ? item[c.get<std::string>()] : json(nullptr));
      table_rows.push_back(row);
    }
    tables.push_back({{"title", file + ": " + path}, {"columns", columns}, {"rows", table_rows}});
    return;
  }
  if (v.is_array()) {
    for (std::size_t i = 0; i < v.size(); ++i) {
      // Name an element by its "method" or "name" when it has one: rows read "methods[kNN cosine].mAP".
      std::string name = cat(i);
      if (v[i].is_object())
        for (const char* k : {"method", "name"})
          if (v[i].contains(k) && v[i][k].is_string()) {
            name = v[i][k].get<std::string>();
            break;
          }
      walk_json(v[i], cat(path, "[", name, "]"), w);
    }
    return;
  }
  rows.push_back({path, v});
  if (v.is_number()) scalars[file + ": " + path] = v;
}

// A CSV of a header and numeric rows: a table, and a chart of every column against the first.
// The caller has checked the file's size against kReportMaxCsvBytes; rows stop at 10,000 and at
// kReportMaxCsvCells cells, and the table's title says when they did.
void read_csv(const fs::path& p, const std::string& rel, json& charts, json& tables) {
  std::ifstream in(p);
  std::string line;
  if (!std::getline(in, line)) return;
  auto split = [](const std::string& l) {
    std::vector<std::string> cells;
    std::stringstream ss(l);
    for (std::string c; std::getline(ss, c, ',');) cells.push_back(c);
    return cells;
  };
  std::vector<std::string> header = split(line);
  json rows = json::array();
  std::vector<std::vector<double>> numeric;
  bool all_numeric = true, cut = false;
  std::size_t cells_read = header.size();
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto cells = split(line);
    if (rows.size() >= 10000 || cells_read + cells.size() > kReportMaxCsvCells) {
      cut = true;
      break;
    }
    cells_read += cells.size();
    json row = json::array();
    std::vector<double> values;
    for (const auto& c : cells) {
      char* end = nullptr;
      double d = std::strtod(c.c_str(), &end);
      if (!c.empty() && end && *end == '\0') {
        row.push_back(d);
        values.push_back(d);
      } else {
        row.push_back(c);
        all_numeric = false;
      }
    }
    rows.push_back(row);
    numeric.push_back(values);
  }
  const std::string title = cut ? cat(rel, " (the first ", rows.size(), " rows: the report reads at most 10000 rows and ",
                                      kReportMaxCsvCells, " cells of a CSV)")
                                : rel;
  tables.push_back({{"title", title}, {"columns", header}, {"rows", rows}});
  if (!all_numeric || numeric.size() < 2 || header.size() < 2) return;
  json points = json::array();
  for (const auto& r : numeric)
    for (std::size_t c = 1; c < r.size() && c < header.size(); ++c)
      points.push_back({{"x", r[0]}, {"y", r[c]}, {"series", header[c]}});
  charts.push_back({{"title", rel}, {"x_title", header[0]}, {"y_title", header.size() == 2 ? header[1] : "value"},
                    {"points", points}});
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

RunData collect_run(const fs::path& dir) {
  const fs::path record_path = dir / kRunRecordFile;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw ConfigError(cat(dir.string(), ": no such folder"));
  if (!fs::exists(record_path, ec))
    throw ConfigError(cat(dir.string(), ": no run record (", kRunRecordFile, ") in this folder; `embedflow run` writes one "
                                        "in the graph's output folder"));
  const fs::path root = fs::canonical(dir, ec);
  if (ec) throw ConfigError(cat(dir.string(), ": ", ec.message()));
  for (const char* name : {kRunRecordFile, kMetricsFile})
    if (fs::exists(dir / name, ec) && !stays_inside(dir / name, root))
      throw ConfigError(cat((dir / name).string(), ": a symbolic link out of the run folder; the report reads files "
                                                   "inside the folder only"));
  RunData run;
  json record = read_run_record(record_path.string());
  std::vector<Diagnostic> problems;
  run.spec = parse_graph_text(record["graph"]["resolved_yaml"].get<std::string>(), (dir / kResolvedGraphFile).string(), problems);
  json& page = run.page;
  page["dir"] = dir.string();
  page["record"] = record;
  page["graph_svg"] = graph_svg(run.spec);
  json rows = json::array(), charts = json::array(), tables = json::array(), images = json::array(), files = json::array();

  // metrics.jsonl: one chart per node and metric, against the node's progress count.
  std::map<std::string, json> metric_points;
  std::map<std::string, std::string> metric_unit;
  std::ifstream metrics(dir / kMetricsFile);
  std::size_t line_no = 0;
  for (std::string line; std::getline(metrics, line);) {
    ++line_no;
    if (line.empty()) continue;
    json m;
    try {
      m = parse_report_json(line, cat((dir / kMetricsFile).string(), ":", line_no));
    } catch (const ConfigError& e) {
      throw Error(cat((dir / kMetricsFile).string(), ":", line_no, ": not a JSON line of metrics (", e.what(), ")"));
    }
    const std::string node = m.value("node", "");
    for (auto it = m.begin(); it != m.end(); ++it) {
      static const std::set<std::string> meta{"run_id", "t", "node", "done", "total", "unit"};
      if (meta.count(it.key()) || !it.value().is_number()) continue;
      const std::string key = node + ": " + it.key();
      metric_points[key].push_back({{"x", m.value("done", 0)}, {"y", it.value()}, {"series", it.key()}});
      metric_unit[key] = m.value("unit", "items");
    }
  }
  for (auto& [key, points] : metric_points) {
    const std::string metric = key.substr(key.find(": ") + 2);
    charts.push_back({{"title", key}, {"x_title", metric_unit[key]}, {"y_title", metric}, {"points", points}});
  }

  // Regular files only (a FIFO would block the report); links to directories are not followed,
  // and a link to a file is read only when it stays inside the run folder.
  std::vector<fs::path> paths;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (it->is_regular_file()) paths.push_back(it->path());
  std::sort(paths.begin(), paths.end());
  for (const auto& p : paths) {
    // Lexically: fs::relative would follow a link and name its target.
    const std::string rel = p.lexically_relative(dir).string();
    if (fs::is_symlink(p, ec) && !stays_inside(p, root)) {
      files.push_back({{"file", rel}, {"note", "not read: a symbolic link out of the run folder"}});
      continue;
    }
    const std::string name = p.filename().string();
    const std::string ext = p.extension().string();
    if (name == kRunRecordFile || name == kMetricsFile || name == kResolvedGraphFile || ext == ".html" ||
        name.find(".tmp") != std::string::npos)
      continue;
    const std::uintmax_t size = fs::file_size(p, ec);
    if (ext == ".json") {
      if (size > kMaxJsonBytes) {
        files.push_back({{"file", rel}, {"note", cat("not shown: ", size, " bytes")}});
        continue;
      }
      json doc;
      try {
        doc = parse_report_json(read_bytes(p), rel);
      } catch (const ConfigError& e) {
        // Listed with the reason, and said on the terminal: the rest of the folder still shows.
        log_warning("report", "run folder ", dir.string(), ": ", e.what(), "; the file is listed, not shown");
        files.push_back({{"file", rel}, {"note", cat("not shown: ", e.what())}});
        continue;
      }
      json file_rows = json::array();
      Walk walk{rel, file_rows, charts, tables, run.scalars, {}};
      walk_json(doc, "", walk);
      if (!file_rows.empty()) rows.push_back({{"file", rel}, {"run_id", doc.is_object() ? doc.value("run_id", "") : ""},
                                              {"rows", file_rows}});
    } else if (ext == ".csv") {
      if (size > kReportMaxCsvBytes) {
        files.push_back({{"file", rel}, {"note", cat("not shown: ", size, " bytes (the report reads CSV files up to ",
                                                     kReportMaxCsvBytes, " bytes)")}});
        continue;
      }
      read_csv(p, rel, charts, tables);
    } else if (ext == ".png" || ext == ".jpg" || ext == ".jpeg") {
      if (size > kMaxImageBytes) {
        files.push_back({{"file", rel}, {"note", cat("not inlined: ", size, " bytes")}});
        continue;
      }
      images.push_back({{"file", rel},
                        {"src", std::string("data:image/") + (ext == ".png" ? "png" : "jpeg") + ";base64," +
                                    base64(read_bytes(p))}});
    } else {
      files.push_back({{"file", rel}, {"bytes", size}});
    }
  }
  page["metrics"] = rows;
  page["tables"] = tables;
  page["charts"] = charts;
  page["images"] = images;
  page["files"] = files;
  return run;
}

}  // namespace

fs::path find_report_assets() {
  auto has_all = [](const fs::path& dir) {
    std::error_code ec;
    for (const char* f : kReportAssetFiles)
      if (!fs::exists(report_asset_file(dir, f), ec)) return false;
    return true;
  };
  if (const char* env = std::getenv("EMBEDFLOW_REPORT_ASSETS"))
    if (has_all(env)) return env;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    fs::path installed = exe.parent_path().parent_path() / "share" / "embedflow" / "report";
    if (has_all(installed)) return installed;
  }
  // A build tree: the packages tools/setup installed in the source tree, flattened by name.
  const fs::path source = EMBEDFLOW_SOURCE_REPORT_ASSETS;
  if (!source.empty() && has_all(source)) return source;
  return {};
}

std::vector<std::string> report_library_texts(const fs::path& assets) {
  if (assets.empty())
    throw Error("the chart library (vega, vega-lite, vega-embed, vega-interpreter) was not found: run tools/setup, or "
                "point EMBEDFLOW_REPORT_ASSETS at a folder holding vega.min.js, vega-lite.min.js, vega-embed.min.js "
                "and vega-interpreter.min.js");
  std::vector<std::string> texts;
  for (const char* f : kReportAssetFiles) texts.push_back(script_text(read_bytes(report_asset_file(assets, f))));
  return texts;
}

std::string report_library_scripts(const fs::path& assets) {
  std::string libraries;
  for (const auto& text : report_library_texts(assets)) libraries += "<script>" + text + "</script>\n";
  return libraries;
}

std::string content_security_policy(const std::vector<std::string>& scripts, const std::vector<std::string>& styles) {
  std::string policy = "default-src 'none'; script-src";
  for (const auto& s : scripts) policy += " 'sha256-" + sha256_base64(s) + "'";
  policy += "; style-src";
  for (const auto& s : styles) policy += " 'sha256-" + sha256_base64(s) + "'";
  policy += "; img-src data:; base-uri 'none'; form-action 'none'";
  return "<meta http-equiv=\"Content-Security-Policy\" content=\"" + policy + "\">";
}

void write_report(const ReportOptions& options) {
  if (options.runs.empty()) throw ConfigError("name at least one run folder");
  std::vector<RunData> runs;
  for (const auto& dir : options.runs) runs.push_back(collect_run(dir));
  const std::vector<std::string> library_texts = report_library_texts(options.assets);

  json data;
  data["generated"] = utc_timestamp(std::chrono::system_clock::now());
  data["runs"] = json::array();
  for (const auto& r : runs) data["runs"].push_back(r.page);
  if (runs.size() > 1) {
    json cmp;
    json graph_diffs = json::array();
    for (std::size_t i = 1; i < runs.size(); ++i)
      graph_diffs.push_back({{"run", runs[i].page["record"].value("run_id", "")},
                             {"differences", graph_differences(runs[0].spec, runs[i].spec)}});
    cmp["graph_differences"] = graph_diffs;
    // Every metric any run has, in the first run's order, then the others' extras.
    std::vector<std::string> keys;
    std::set<std::string> seen;
    for (const auto& r : runs)
      for (const auto& [k, v] : r.scalars)
        if (seen.insert(k).second) keys.push_back(k);
    json metrics = json::array();
    for (const auto& k : keys) {
      json values = json::array();
      for (const auto& r : runs) {
        auto it = r.scalars.find(k);
        values.push_back(it == r.scalars.end() ? json(nullptr) : it->second);
      }
      metrics.push_back({{"metric", k}, {"values", values}});
    }
    cmp["metrics"] = metrics;
    data["comparison"] = cmp;
  }
  std::string title = runs.size() == 1 ? "embedflow run " + runs[0].page["record"].value("run_id", "")
                                       : cat("embedflow: ", runs.size(), " runs compared");
  if (options.share) {
    Redactor redact;
    for (std::size_t i = 0; i < runs.size(); ++i) {
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
  const std::string style = std::string(report_page_style()) + chart_tooltip_style();
  const std::string page_script = std::string(report_page_script());
  std::vector<std::string> scripts = library_texts;
  scripts.push_back(page_script);
  std::ostringstream html;
  html << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
       << content_security_policy(scripts, {style}) << "\n"
       << "<title>" << xml_escape(title) << "</title>\n"
       << "<style>" << style << "</style>\n";
  for (const auto& text : library_texts) html << "<script>" << text << "</script>\n";
  html << "<script type=\"application/json\" id=\"report-data\">" << script_json(data) << "</script>\n"
       << "</head><body data-status=\"loading\"><div id=\"report\"></div>\n"
       << "<script>" << page_script << "</script>\n</body></html>\n";
  write_file_replacing(options.output, html.str());
}

}  // namespace embedflow::engine
