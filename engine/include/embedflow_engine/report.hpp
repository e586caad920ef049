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

}  // namespace embedflow::engine
