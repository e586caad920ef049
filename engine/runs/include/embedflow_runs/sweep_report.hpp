// The comparison page of a sweep (`embedflow sweep` writes SWEEP/sweep.json): one self-contained
// HTML page, like the run report (the chart library inlined, works offline), results first:
// each results table as variants x labels x metrics with the mean and its 95% interval over
// seeds, the best cell and the cells not significantly different from it, charts of each metric
// against each swept variable, the pairwise tests, then the stages, the points, the graph
// differences between variants, the selection, and the provenance.
#pragma once

#include <filesystem>

namespace embedflow::runs {

// Writes the page (atomically). Throws ConfigError naming the folder when sweep.json is missing
// or not a sweep record, Error when the chart library cannot be found or read or the page
// cannot be written.
void write_sweep_report(const std::filesystem::path& sweep_dir, const std::filesystem::path& output,
                        const std::filesystem::path& assets);

}  // namespace embedflow::runs
