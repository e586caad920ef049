#include "core/json.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include <embedflow/error.hpp>

namespace embedflow::crowd {

const JsonValue* JsonValue::find(const std::string& key) const {
  for (const auto& [k, v] : members)
    if (k == key) return &v;
  return nullptr;
}

const char* JsonValue::kind_name() const {
  switch (kind) {
    case Kind::null: return "null";
    case Kind::boolean: return "a boolean";
    case Kind::integer: return "an integer";
    case Kind::number: return "a number";
    case Kind::string: return "a string";
    case Kind::array: return "an array";
    case Kind::object: return "an object";
  }
  return "?";
}

namespace {

// Walks the text for nlohmann-json's SAX parser and records how far it has read: when the parser
// reports a value, its last character (or, for a number, the one after it) is the last one read,
// which is how each value learns the line and column it starts at.
struct TrackedChars {
  using iterator_category = std::forward_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;
  const char* at = nullptr;
  const char** furthest = nullptr;
  reference operator*() const { return *at; }
  TrackedChars& operator++() {
    ++at;
    if (at > *furthest) *furthest = at;
    return *this;
  }
  TrackedChars operator++(int) {
    TrackedChars before = *this;
    ++*this;
    return before;
  }
  bool operator==(const TrackedChars& o) const { return at == o.at; }
  bool operator!=(const TrackedChars& o) const { return at != o.at; }
};

bool number_char(char c) { return std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'; }

class TreeBuilder {
 public:
  TreeBuilder(const std::string& text, const std::string& name, const char* const& furthest)
      : text_(text), name_(name), furthest_(furthest) {
    line_starts_.push_back(0);
    for (std::size_t i = 0; i < text.size(); ++i)
      if (text[i] == '\n') line_starts_.push_back(i + 1);
  }

  JsonValue take() { return std::move(root_); }

  bool null() { return add(value(JsonValue::Kind::null, read() - 4)); }
  bool boolean(bool b) {
    JsonValue v = value(JsonValue::Kind::boolean, read() - (b ? 4 : 5));
    v.boolean = b;
    return add(std::move(v));
  }
  bool number_integer(std::int64_t n) {
    JsonValue v = value(JsonValue::Kind::integer, number_start());
    v.integer = n;
    v.number = static_cast<double>(n);
    return add(std::move(v));
  }
  bool number_unsigned(std::uint64_t n) {
    if (n <= static_cast<std::uint64_t>(INT64_MAX)) return number_integer(static_cast<std::int64_t>(n));
    return number_float(static_cast<double>(n), "");  // past int64: kept as a double
  }
  bool number_float(double d, const std::string&) {
    JsonValue v = value(JsonValue::Kind::number, number_start());
    v.number = d;
    return add(std::move(v));
  }
  bool string(std::string& s) {
    JsonValue v = value(JsonValue::Kind::string, string_start());
    v.string = std::move(s);
    return add(std::move(v));
  }
  bool binary(std::vector<std::uint8_t>&) { return true; }  // JSON text has no binary values
  bool start_object(std::size_t) { return open(JsonValue::Kind::object); }
  bool start_array(std::size_t) { return open(JsonValue::Kind::array); }
  bool key(std::string& k) {
    key_ = std::move(k);
    return true;
  }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    // nlohmann's text after its "[json.exception...] parse error at line L, column C: " prefix,
    // behind our own file:line:col (the position counts the character it failed on).
    std::string what = e.what();
    const std::size_t column = what.find("column ");
    const std::size_t colon = column == std::string::npos ? column : what.find(": ", column);
    if (colon != std::string::npos) what = what.substr(colon + 2);
    const std::size_t offset = std::min(position > 0 ? position - 1 : 0, text_.size());
    throw DataError(cat(where(offset), ": ", what));
  }

 private:
  std::size_t read() const { return static_cast<std::size_t>(furthest_ - text_.data()); }
  // A number is reported once the character after it is read, unless it ends the text.
  std::size_t number_start() const {
    std::size_t end = read();
    if (end > 0 && !number_char(text_[end - 1])) --end;
    std::size_t start = end;
    while (start > 0 && number_char(text_[start - 1])) --start;
    return start;
  }
  // The opening quote: the nearest quote before the closing one that an even number of
  // backslashes precedes (an escaped quote has an odd number).
  std::size_t string_start() const {
    std::size_t q = read() - 1;  // the closing quote
    while (q > 0) {
      --q;
      if (text_[q] != '"') continue;
      std::size_t slashes = 0;
      while (q - slashes > 0 && text_[q - slashes - 1] == '\\') ++slashes;
      if (slashes % 2 == 0) return q;
    }
    return 0;
  }
  std::string where(std::size_t offset) const {
    const auto line = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset) - line_starts_.begin();
    return cat(name_, ":", line, ":", offset - line_starts_[static_cast<std::size_t>(line - 1)] + 1);
  }
  JsonValue value(JsonValue::Kind kind, std::size_t offset) const {
    JsonValue v;
    v.kind = kind;
    const auto line = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset) - line_starts_.begin();
    v.line = static_cast<int>(line);
    v.column = static_cast<int>(offset - line_starts_[static_cast<std::size_t>(line - 1)] + 1);
    return v;
  }
  bool add(JsonValue v) {
    if (open_.empty()) {
      root_ = std::move(v);
    } else if (open_.back()->kind == JsonValue::Kind::object) {
      open_.back()->members.emplace_back(std::move(key_), std::move(v));
    } else {
      open_.back()->items.push_back(std::move(v));
    }
    return true;
  }
  // A container is added to its parent first and filled in place; the parent's vector does not
  // grow while the child is open, so the pointer stays valid until close().
  bool open(JsonValue::Kind kind) {
    add(value(kind, read() - 1));
    JsonValue* parent = open_.empty() ? nullptr : open_.back();
    JsonValue* self = !parent ? &root_
                      : parent->kind == JsonValue::Kind::object ? &parent->members.back().second
                                                                : &parent->items.back();
    open_.push_back(self);
    return true;
  }
  bool close() {
    open_.pop_back();
    return true;
  }

  const std::string& text_;
  const std::string& name_;
  const char* const& furthest_;
  std::vector<std::size_t> line_starts_;
  JsonValue root_;
  std::vector<JsonValue*> open_;
  std::string key_;
};

}  // namespace

JsonValue parse_json(const std::string& text, const std::string& name) {
  const char* furthest = text.data();
  TreeBuilder tree(text, name, furthest);
  const TrackedChars first{text.data(), &furthest}, last{text.data() + text.size(), &furthest};
  nlohmann::json::sax_parse(first, last, &tree);
  return tree.take();
}

JsonValue parse_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(cat(path, ": cannot open JSON file (", std::strerror(errno), ")"));
  std::stringstream buf;
  buf << in.rdbuf();
  return parse_json(buf.str(), path);
}

}  // namespace embedflow::crowd
