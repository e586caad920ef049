#include "report.hpp"

#include <cmath>
#include <cstdio>

#include "embedflow/error.hpp"

namespace embedflow::evalcore {

std::string markdown_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::string s = "|";
  for (const auto& h : header) s += " " + h + " |";
  s += "\n|";
  for (std::size_t i = 0; i < header.size(); ++i) s += i == 0 ? "---|" : "---:|";
  s += "\n";
  for (const auto& r : rows) {
    s += "|";
    for (const auto& c : r) s += " " + c + " |";
    s += "\n";
  }
  return s;
}

std::string percent(double fraction, int decimals) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, 100 * fraction);
  return buf;
}

void write_summary_json(JsonWriter& j, const RetrievalSummary& s, const std::vector<int>& ranks) {
  j.begin_object();
  j.field("queries", s.queries).field("evaluated", s.evaluated).field("junk_queries", s.junk_queries);
  j.field("no_match", s.no_match);
  for (int k : ranks) j.field(cat("rank-", k), k <= static_cast<int>(s.cmc.size()) ? s.cmc[static_cast<std::size_t>(k - 1)] : NAN);
  j.field("mAP", s.map).field("mAP_trapezoid", s.map_trapezoid).field("P@1", s.p_at_1);
  j.field("R-precision", s.r_precision).field("MAP@R", s.map_at_r).field("MRR", s.mrr);
  if (!s.macro.empty()) {
    // Means over query labels of the per-label means, beside the micro means above.
    j.key("macro").begin_object();
    for (int k : ranks) {
      auto it = s.macro.find(cat("rank-", k));
      if (it != s.macro.end()) j.field(it->first, it->second);
    }
    for (const char* name : {"mAP", "mAP_trapezoid", "P@1", "R-precision", "MAP@R", "MRR"}) j.field(name, s.macro.at(name));
    j.end_object();
  }
  j.key("cmc").numbers(s.cmc);
  if (!s.single_shot_cmc.empty()) j.key("single_shot_cmc").numbers(s.single_shot_cmc);
  if (!s.ci.empty()) {
    j.key("ci").begin_object();
    for (const auto& [name, iv] : s.ci) j.key(name).numbers({iv.low, iv.high});
    j.end_object();
  }
  j.field("tolerance_violations", s.tolerance_violations);
  j.field("dense_exact", s.dense_exact);
  j.end_object();
}

}  // namespace embedflow::evalcore
