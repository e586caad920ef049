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
// Charts are Vega-Lite specs drawn by vega-embed (npm packages vega, vega-lite, vega-embed, which
// tools/setup installs under tools/report/node_modules; an installed tree has them in
// share/embedflow/report).
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace embedflow::engine {

struct ReportOptions {
  std::vector<std::filesystem::path> runs;  // output folders, each holding a run.json
  std::filesystem::path output;             // the HTML file to write
  std::filesystem::path assets;             // folder with vega.min.js, vega-lite.min.js, vega-embed.min.js
};

// Where the chart library is: $EMBEDFLOW_REPORT_ASSETS, else share/embedflow/report beside the
// executable's bin/, else the source tree's tools/report/node_modules. Empty when none has it.
std::filesystem::path find_report_assets();

// Writes the page (atomically). Throws ConfigError naming a folder without a run record, and
// Error when the chart library or a file cannot be read or the page cannot be written.
void write_report(const ReportOptions& options);

// Pieces other report pages (the sweep's) share with this one.

// The chart library's files in load order, and where one is in an assets folder (flat, or as
// npm lays it out).
extern const char* const kReportAssetFiles[3];
std::filesystem::path report_asset_file(const std::filesystem::path& dir, const std::string& name);
// The chart library as <script> elements, read from `assets`. Throws Error when `assets` is
// empty (not found) or a file cannot be read.
std::string report_library_scripts(const std::filesystem::path& assets);
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
