// Report writers shared by the evaluators: Markdown tables and the retrieval summary as JSON.
// The JSON writer and the atomic text-file write are the SDK's (embedflow/report_files.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "embedflow/report_files.hpp"
#include "retrieval.hpp"

namespace embedflow::evalcore {

// | a | b |\n|---|---|\n| ... rows
std::string markdown_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);
std::string percent(double fraction, int decimals = 2);  // 0.4726 -> "47.26"

// The summary as a JSON object (keys: queries, evaluated, junk_queries, no_match, rank-k...,
// mAP, mAP_trapezoid, P@1, R-precision, MAP@R, MRR, cmc, single_shot_cmc, ci).
void write_summary_json(JsonWriter& json, const RetrievalSummary& s, const std::vector<int>& ranks);

}  // namespace embedflow::evalcore
