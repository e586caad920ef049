// `embedflow report OUT [OUT2 ...]`: one self-contained HTML page about one or more runs, that
// works offline (the chart library is inlined, images are data: URLs).
//
// For each run folder it shows the run record (run.json), the graph as it ran
// (graph.resolved.yaml, drawn as layers from sources to sinks), every metrics table (each JSON a
// node wrote, flattened; each CSV), the charts (metrics.jsonl: loss, learning rate and the other
// metrics nodes reported against their step; CSV columns against the first column, e.g. learning
// curves; numeric arrays in the JSON such as CMC curves and histograms) with values on hover,
// and the images (mosaics, PNG charts). With two or more runs it adds a comparison: how each
// resolved graph differs from the first run's, and every scalar metric side by side with its
// difference from the first run.
//
// Charts are Vega-Lite specs drawn by vega-embed (npm packages vega, vega-lite, vega-embed and
// vega-interpreter, which tools/setup installs under tools/report/node_modules; an installed tree
// has them in share/embedflow/report).
//
// Safe to share: the page carries a Content-Security-Policy that lets only its own inline
// scripts and style run (by SHA-256 hash; no eval: Vega evaluates expressions with
// vega-interpreter) and loads nothing from anywhere (images are data: URLs). The report reads
// only regular files inside the run folder: a symbolic link that leads out of it is listed, not
// read. What it reads is bounded: JSON files up to 16 MiB and 64 levels of nesting (deeper is
// listed, not walked), CSV files up to 4 MiB and 200,000 cells. With `share`, the host name and
// absolute paths are left out of everything the page shows.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace embedflow::engine {

struct ReportOptions {
  std::vector<std::filesystem::path> runs;  // output folders, each holding a run.json
  std::filesystem::path output;             // the HTML file to write
  std::filesystem::path assets;             // folder with the chart library (kReportAssetFiles)
  // Leave the host name and absolute paths out: the run folder becomes "<run folder>", the
  // working directory "<working directory>", the home folder "~", any other absolute path
  // ".../<file name>".
  bool share = false;
};

// Limits on what the report reads from a run folder.
inline constexpr std::uintmax_t kReportMaxJsonBytes = 16u << 20;
inline constexpr int kReportMaxJsonDepth = 64;
inline constexpr std::uintmax_t kReportMaxCsvBytes = 4u << 20;
inline constexpr std::size_t kReportMaxCsvCells = 200'000;

// Where the chart library is: $EMBEDFLOW_REPORT_ASSETS, else share/embedflow/report beside the
// executable's bin/, else the source tree's tools/report/node_modules. Empty when none has it.
std::filesystem::path find_report_assets();

// Writes the page (atomically). Throws ConfigError naming a folder without a run record, and
// Error when the chart library or a file cannot be read or the page cannot be written.
void write_report(const ReportOptions& options);

// Pieces other report pages (the sweep's) share with this one.

// The chart library's files in load order, and where one is in an assets folder (flat, or as
// npm lays it out).
extern const char* const kReportAssetFiles[4];
std::filesystem::path report_asset_file(const std::filesystem::path& dir, const std::string& name);
// The chart library as <script> elements, read from `assets`. Throws Error when `assets` is
// empty (not found) or a file cannot be read.
std::string report_library_scripts(const std::filesystem::path& assets);
// The same library as the texts of those elements (what a Content-Security-Policy hashes).
std::vector<std::string> report_library_texts(const std::filesystem::path& assets);
// A <meta http-equiv="Content-Security-Policy"> element allowing exactly these inline scripts and
// styles (each the exact text between its tags) and data: images, and nothing else.
std::string content_security_policy(const std::vector<std::string>& scripts, const std::vector<std::string>& styles);
// The style of Vega's tooltip, which a page under that policy must carry in its own sheet.
const char* chart_tooltip_style();
// JSON text read by the report, with its nesting bounded: deeper than kReportMaxJsonDepth is a
// ConfigError "<what>:<line>: JSON nested deeper than 64 levels (...)", as is malformed JSON.
nlohmann::ordered_json parse_report_json(const std::string& text, const std::string& what);
// A file's bytes; throws Error naming the file.
std::string read_bytes(const std::filesystem::path& p);
// Text for an HTML/XML attribute or element: & < > " escaped.
std::string xml_escape(const std::string& s);
// A JSON document for a <script type="application/json"> element: "<" escaped, so no
// "</script>" or "<!--" in the data can end the element early; invalid UTF-8 replaced.
std::string script_json(const nlohmann::ordered_json& j);
// A library's text for a <script> element: any "</script" in it cannot close the element.
std::string script_text(std::string js);

}  // namespace embedflow::engine
