#include "embedflow/report_files.hpp"

#include "embedflow/atomic_file.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "embedflow/error.hpp"
#include "embedflow/progress.hpp"

namespace embedflow {

namespace {
// Strings and numbers are nlohmann-json's text (kept private to this file: no nlohmann type in
// the SDK's headers). Doubles print as the shortest text that reads back as the same double
// (0.1 stays "0.1", never 0.10000000000000001); invalid UTF-8 in a string (a file name, a user's
// label) becomes U+FFFD instead of making the document unreadable.
void append_number(std::string& out, double v) { out += nlohmann::json(v).dump(); }
}  // namespace

std::string json_quote(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string json_number(double v) { return std::isfinite(v) ? nlohmann::json(v).dump() : std::string("null"); }

void JsonWriter::separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.back()) out_ += ",";
  if (depth_ > 0) out_ += "\n" + std::string(static_cast<std::size_t>(depth_) * 2, ' ');
  first_.back() = false;
}
JsonWriter& JsonWriter::begin_object() {
  const bool top_level = depth_ == 0;
  separate();
  out_ += "{";
  first_.push_back(true);
  ++depth_;
  // Every document written during a run names the run that wrote it (run.json has the details).
  if (top_level) {
    std::string id = run_id();
    if (!id.empty()) field("run_id", id);
  }
  return *this;
}
JsonWriter& JsonWriter::end_object() {
  const bool empty = first_.back();
  first_.pop_back();
  --depth_;
  if (!empty) out_ += "\n" + std::string(static_cast<std::size_t>(depth_) * 2, ' ');
  out_ += "}";
  return *this;
}
JsonWriter& JsonWriter::begin_array() {
  separate();
  out_ += "[";
  first_.push_back(true);
  ++depth_;
  return *this;
}
JsonWriter& JsonWriter::end_array() {
  const bool empty = first_.back();
  first_.pop_back();
  --depth_;
  if (!empty) out_ += "\n" + std::string(static_cast<std::size_t>(depth_) * 2, ' ');
  out_ += "]";
  return *this;
}
JsonWriter& JsonWriter::key(const std::string& k) {
  separate();
  out_ += json_quote(k) + ": ";
  after_key_ = true;
  return *this;
}
JsonWriter& JsonWriter::value(double v) {
  if (!std::isfinite(v)) return null();
  separate();
  append_number(out_, v);
  return *this;
}
JsonWriter& JsonWriter::value(std::int64_t v) {
  separate();
  out_ += std::to_string(v);
  return *this;
}
JsonWriter& JsonWriter::value(bool v) {
  separate();
  out_ += v ? "true" : "false";
  return *this;
}
JsonWriter& JsonWriter::value(const std::string& v) {
  separate();
  out_ += json_quote(v);
  return *this;
}
JsonWriter& JsonWriter::null() {
  separate();
  out_ += "null";
  return *this;
}
JsonWriter& JsonWriter::numbers(const std::vector<double>& v) {
  // Curves stay on one line: a 50-point CMC as 50 lines would bury the summary.
  separate();
  out_ += "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out_ += ", ";
    if (std::isfinite(v[i])) append_number(out_, v[i]);
    else out_ += "null";
  }
  out_ += "]";
  return *this;
}

void write_text_atomic(const std::string& path, const std::string& text) { write_file_atomic(path, text); }

}  // namespace embedflow
