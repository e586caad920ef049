// Report writers shared by the evaluators: a streaming JSON writer, Markdown tables, and an
// atomic text-file write (temp name, then rename, so a failed run never leaves a half file).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "retrieval.hpp"

namespace embedflow::evalcore {

class JsonWriter {
 public:
  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(const std::string& k);
  JsonWriter& value(double v);  // NaN and inf become null: JSON has neither
  JsonWriter& value(std::int64_t v);
  JsonWriter& value(int v) { return value(static_cast<std::int64_t>(v)); }
  JsonWriter& value(bool v);
  JsonWriter& value(const std::string& v);
  JsonWriter& value(const char* v) { return value(std::string(v)); }
  JsonWriter& null();
  template <class T>
  JsonWriter& field(const std::string& k, const T& v) { return key(k).value(v); }
  JsonWriter& numbers(const std::vector<double>& v);
  const std::string& str() const { return out_; }

 private:
  void separate();
  std::string out_;
  std::vector<bool> first_{true};
  bool after_key_ = false;
  int depth_ = 0;
};

std::string json_quote(const std::string& s);

// | a | b |\n|---|---|\n| ... rows
std::string markdown_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);
std::string percent(double fraction, int decimals = 2);  // 0.4726 -> "47.26"

// Creates parent directories; writes to `path.tmp` then renames. Throws embedflow::Error.
void write_text_atomic(const std::string& path, const std::string& text);

// The summary as a JSON object (keys: queries, evaluated, junk_queries, no_match, rank-k...,
// mAP, mAP_trapezoid, P@1, R-precision, MAP@R, MRR, cmc, single_shot_cmc, ci).
void write_summary_json(JsonWriter& json, const RetrievalSummary& s, const std::vector<int>& ranks);

}  // namespace embedflow::evalcore
