#include "embedflow_runs/sweep_report.hpp"

#include <cctype>
#include <chrono>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "embedflow/error.hpp"
#include "embedflow_runs/run_record.hpp"
#include "embedflow_runs/report.hpp"

namespace embedflow::runs {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

constexpr const char* kSweepFile = "sweep.json";
constexpr const char* kSweepFormat = "embedflow-sweep/1";
constexpr std::uintmax_t kMaxSweepBytes = 64u << 20;
// sweep.json nests a handful of levels; anything far deeper is not one, and is refused before
// it is built.
constexpr int kMaxDepth = 64;

struct TooDeep {};

json read_sweep(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw ConfigError(cat(dir.string(), ": no such folder"));
  const fs::path file = dir / kSweepFile;
  if (!fs::exists(file, ec))
    throw ConfigError(cat(dir.string(), ": no sweep record (", kSweepFile,
                          ") in this folder; `embedflow sweep` writes one in the sweep's folder"));
  const std::uintmax_t size = fs::file_size(file, ec);
  if (ec) throw Error(cat("cannot read '", file.string(), "': ", ec.message()));
  if (size > kMaxSweepBytes)
    throw ConfigError(cat(file.string(), ": ", size, " bytes, more than a sweep record's limit of ", kMaxSweepBytes, " bytes"));
  const std::string text = read_bytes(file);
  json doc;
  try {
    doc = json::parse(text, [](int depth, json::parse_event_t, json&) {
      if (depth > kMaxDepth) throw TooDeep{};
      return true;
    });
  } catch (const TooDeep&) {
    throw ConfigError(cat(file.string(), ": not a sweep record (nested more than ", kMaxDepth, " levels deep)"));
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(cat(file.string(), ": not JSON: ", e.what()));
  }
  if (!doc.is_object() || !doc.contains("format") || doc["format"] != kSweepFormat)
    throw ConfigError(cat(file.string(), ": not a sweep record (format is not \"", kSweepFormat, "\")"));
  // The page reads these as lists: a missing one is empty, a wrong one is not a sweep record.
  for (const char* key : {"command", "variables", "seeds", "base_overrides", "points", "stages", "variants",
                          "graph_differences", "results"}) {
    if (!doc.contains(key) || doc[key].is_null()) doc[key] = json::array();
    if (!doc[key].is_array()) throw ConfigError(cat(file.string(), ": not a sweep record ('", key, "' is not a list)"));
  }
  for (const auto& p : doc["points"])
    if (!p.is_object()) throw ConfigError(cat(file.string(), ": not a sweep record (a point is not an object)"));
  for (const auto& r : doc["results"])
    if (!r.is_object()) throw ConfigError(cat(file.string(), ": not a sweep record (a results entry is not an object)"));
  if (doc.contains("selection") && !doc["selection"].is_null() && !doc["selection"].is_object())
    throw ConfigError(cat(file.string(), ": not a sweep record ('selection' is not an object)"));
  return doc;
}

// A relative URL for a path: each segment percent-encoded, and "./" first so a segment with a
// colon never reads as a scheme (javascript:).
std::string relative_href(const fs::path& rel) {
  static const char* hex = "0123456789ABCDEF";
  std::string out = ".";
  for (const auto& part : rel) {
    const std::string s = part.string();
    if (s.empty() || s == ".") continue;
    out += '/';
    for (unsigned char c : s) {
      if (std::isalnum(c) || std::string("-._~!$'()*+,;=:@").find(static_cast<char>(c)) != std::string::npos) {
        out += static_cast<char>(c);
      } else {
        out += '%';
        out += hex[c >> 4];
        out += hex[c & 15];
      }
    }
  }
  return out;
}

// Each point's link, relative to the page: its report.html when it has one, else its folder.
void link_points(json& doc, const fs::path& sweep_dir, const fs::path& output) {
  std::error_code ec;
  const fs::path page_dir = fs::weakly_canonical(fs::absolute(output, ec).parent_path(), ec);
  for (auto& p : doc["points"]) {
    if (!p.contains("dir") || !p["dir"].is_string()) continue;
    const fs::path dir = fs::weakly_canonical(fs::absolute(sweep_dir / p["dir"].get<std::string>(), ec), ec);
    const bool has_report = fs::exists(dir / "report.html", ec);
    const fs::path rel = (has_report ? dir / "report.html" : dir).lexically_relative(page_dir);
    p["href"] = relative_href(rel) + (has_report ? "" : "/");
    p["has_report"] = has_report;
  }
}

}  // namespace

void write_sweep_report(const fs::path& sweep_dir, const fs::path& output, const fs::path& assets) {
  json doc = read_sweep(sweep_dir);
  const std::vector<std::string> libraries = report_library_texts(assets);
  const std::string script = script_text(page_text("sweep.js"));
  const std::string style = page_text("sweep.css") + page_text("tooltip.css");
  link_points(doc, sweep_dir, output);
  json data;
  data["generated"] = utc_timestamp(std::chrono::system_clock::now());
  data["dir"] = sweep_dir.string();
  data["sweep"] = std::move(doc);
  const json& sweep = data["sweep"];
  const std::string graph = sweep.contains("graph") && sweep["graph"].is_string() ? sweep["graph"].get<std::string>() : "";
  write_page(output, "embedflow sweep " + graph, style, libraries, "sweep-data", data, script);
}

}  // namespace embedflow::runs
