// Writing the files a node leaves beside its outputs (reports, summaries): a streaming JSON
// writer and an atomic text-file write (temp name, then rename, so a failed run never leaves a
// half file).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace embedflow {

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

// A JSON string literal, quotes included: control characters, quotes and backslashes escaped,
// invalid UTF-8 replaced by U+FFFD, so any name can go into a JSON document.
std::string json_quote(const std::string& s);
// A JSON number: the shortest text that reads back as the same double; null for NaN and inf.
std::string json_number(double v);

// write_file_atomic (atomic_file.hpp) for text: all or nothing, `<path>.partial` when the run was
// interrupted. Throws embedflow::Error.
void write_text_atomic(const std::string& path, const std::string& text);

}  // namespace embedflow
