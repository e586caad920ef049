// `embedflow report OUT [OUT2 ...]`: one self-contained HTML page about one or more runs, that
// works offline (the chart library is inlined, images are data: URLs).
//
// Results first. The page shows what the run's nodes published (sdk results.hpp): the headline
// table at the top, then every table, chart and figure in the graph's node order. Tables with one
// title from several nodes are one table (every method's triplet accuracy in one), charts with
// one title are one chart (every trainer's loss), and a chart whose series come from a node's
// progress metrics is read from metrics.jsonl. Nothing is charted by guessing from a file's
// arrays: files nodes wrote but did not publish are listed by name and size. Numbers are rounded
// for reading, with the full value on hover and in the page's data. The run record, the graph as
// it ran, node timings and libraries follow, collapsed.
//
// With two or more runs it is a comparison: each table with one column per run and the
// difference from the first run, intervals where the runs carry them, each chart overlaid across
// runs, and how each run's graph differs from the first's (output paths left out).
//
// Charts are Vega-Lite specs drawn by vega-embed (npm packages vega, vega-lite, vega-embed and
// vega-interpreter, which tools/setup installs under tools/report/node_modules; an installed tree
// has them in share/embedflow/report).
//
// Safe to share: the page carries a Content-Security-Policy that lets only its own inline
// scripts and style run (by SHA-256 hash; no eval: Vega evaluates expressions with
// vega-interpreter) and loads nothing from anywhere (images are data: URLs). The report reads
// only regular files inside the run folder: a symbolic link that leads out of it is listed, not
// read. With `share`, the host name and absolute paths are left out of everything the page shows.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace embedflow::runs {

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
inline constexpr std::uintmax_t kReportMaxImageBytes = 8u << 20;
inline constexpr std::size_t kReportMaxChartPoints = 20000;

// Where the chart library is: $EMBEDFLOW_REPORT_ASSETS, else share/embedflow/report beside the
// executable's bin/, else the source tree's tools/report/node_modules. Empty when none has it.
std::filesystem::path find_report_assets();

// Writes the page (atomically). Throws ConfigError naming a folder without a run record, and
// Error when the chart library or a file cannot be read or the page cannot be written.
void write_report(const ReportOptions& options);

// A run's own report (DIR/report.html), as `embedflow run` and `embedflow.run()` write it: a
// failure is a warning, not the run's failure.
void write_run_report(const std::filesystem::path& dir, bool quiet, bool share = false);

// Pieces the run report and the sweep report share (page.cpp).

// The chart library's files in load order, and where one is in an assets folder (flat, or as
// npm lays it out).
extern const char* const kReportAssetFiles[4];
std::filesystem::path report_asset_file(const std::filesystem::path& dir, const std::string& name);
// The chart library as the texts of its <script> elements, read from `assets`. Throws Error when
// `assets` is empty (not found) or a file cannot be read.
std::vector<std::string> report_library_texts(const std::filesystem::path& assets);
// A <meta http-equiv="Content-Security-Policy"> element allowing exactly these inline scripts and
// styles (each the exact text between its tags) and data: images, and nothing else.
std::string content_security_policy(const std::vector<std::string>& scripts, const std::vector<std::string>& styles);
// A page file embedded by the build from page/ (its script and style); throws Error when absent.
std::string page_text(const std::string& name);
// The whole page: policy, title, style, the chart library, the data element (id `data_id`) and
// the page's script, written atomically to `output`.
void write_page(const std::filesystem::path& output, const std::string& title, const std::string& style,
                const std::vector<std::string>& libraries, const std::string& data_id,
                const nlohmann::ordered_json& data, const std::string& script);
// A file's bytes; throws Error naming the file.
std::string read_bytes(const std::filesystem::path& p);
// Text for an HTML/XML attribute or element: & < > " escaped.
std::string xml_escape(const std::string& s);
// A JSON document for a <script type="application/json"> element: "<" escaped, so no
// "</script>" or "<!--" in the data can end the element early; invalid UTF-8 replaced.
std::string script_json(const nlohmann::ordered_json& j);
// A library's text for a <script> element: any "</script" in it cannot close the element.
std::string script_text(std::string js);
// Standard base64 (RFC 4648), for data: URLs and policy hashes.
std::string base64(const std::string& bytes);

}  // namespace embedflow::runs
