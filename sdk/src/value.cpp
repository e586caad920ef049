#include "embedflow/value.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <limits>
#include <sstream>

namespace embedflow {

Value Value::boolean(bool b) { Value v; v.kind_ = Kind::boolean; v.b_ = b; return v; }
Value Value::integer(std::int64_t i) { Value v; v.kind_ = Kind::integer; v.i_ = i; return v; }
Value Value::number(double d) { Value v; v.kind_ = Kind::number; v.d_ = d; return v; }
Value Value::string(std::string s) { Value v; v.kind_ = Kind::string; v.s_ = std::move(s); return v; }
Value Value::list(List items) { Value v; v.kind_ = Kind::list; v.list_ = std::move(items); return v; }
Value Value::map(Map entries) { Value v; v.kind_ = Kind::map; v.map_ = std::move(entries); return v; }

static bool parse_int(const std::string& t, std::int64_t& out) {
  if (t.empty()) return false;
  std::size_t i = (t[0] == '-' || t[0] == '+') ? 1 : 0;
  if (i == t.size()) return false;
  for (std::size_t j = i; j < t.size(); ++j)
    if (t[j] < '0' || t[j] > '9') return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(t.c_str(), &end, 10);
  if (errno == ERANGE || *end) return false;
  out = v;
  return true;
}

static bool parse_float(const std::string& t, double& out) {
  if (t.empty()) return false;
  if (t == ".inf" || t == "+.inf" || t == "inf") { out = std::numeric_limits<double>::infinity(); return true; }
  if (t == "-.inf" || t == "-inf") { out = -std::numeric_limits<double>::infinity(); return true; }
  if (t == ".nan" || t == "nan") { out = std::numeric_limits<double>::quiet_NaN(); return true; }
  // Only digits, sign, dot and exponent: "1e-3", "0.5", "-2."; not "0x10" or "1_000".
  for (char c : t)
    if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '-' || c == '+')) return false;
  char* end = nullptr;
  out = std::strtod(t.c_str(), &end);
  return end && *end == '\0';
}

Value Value::from_scalar_text(const std::string& text, bool quoted) {
  if (quoted) return string(text);
  if (text.empty() || text == "~" || text == "null") return Value();
  if (text == "true" || text == "True" || text == "TRUE") return boolean(true);
  if (text == "false" || text == "False" || text == "FALSE") return boolean(false);
  std::int64_t i;
  if (parse_int(text, i)) return integer(i);
  double d;
  if (parse_float(text, d)) return number(d);
  return string(text);
}

const char* Value::kind_name() const {
  switch (kind_) {
    case Kind::null: return "null";
    case Kind::boolean: return "boolean";
    case Kind::integer: return "integer";
    case Kind::number: return "number";
    case Kind::string: return "string";
    case Kind::list: return "list";
    case Kind::map: return "map";
  }
  return "?";
}

static ConfigError kind_error(const Value& v, const char* wanted) {
  std::string where = v.where().known() ? v.where().str() + ": " : "";
  return ConfigError(cat(where, "expected ", wanted, ", got ", v.kind_name(), " ", v.str()));
}

bool Value::as_boolean() const {
  if (kind_ != Kind::boolean) throw kind_error(*this, "a boolean");
  return b_;
}
std::int64_t Value::as_integer() const {
  if (kind_ == Kind::integer) return i_;
  if (kind_ == Kind::number && std::floor(d_) == d_ && std::abs(d_) < 9.0e15) return static_cast<std::int64_t>(d_);
  throw kind_error(*this, "an integer");
}
double Value::as_number() const {
  if (kind_ == Kind::number) return d_;
  if (kind_ == Kind::integer) return static_cast<double>(i_);
  throw kind_error(*this, "a number");
}
const std::string& Value::as_string() const {
  if (kind_ != Kind::string) throw kind_error(*this, "a string");
  return s_;
}
const Value::List& Value::as_list() const {
  if (kind_ != Kind::list) throw kind_error(*this, "a list");
  return list_;
}
const Value::Map& Value::as_map() const {
  if (kind_ != Kind::map) throw kind_error(*this, "a map");
  return map_;
}

const Value* Value::get(std::string_view key) const {
  if (kind_ != Kind::map) return nullptr;
  for (const auto& [k, v] : map_)
    if (k == key) return &v;
  return nullptr;
}
Value* Value::get_mutable(std::string_view key) {
  if (kind_ != Kind::map) return nullptr;
  for (auto& [k, v] : map_)
    if (k == key) return &v;
  return nullptr;
}
void Value::set(const std::string& key, Value v) {
  if (kind_ == Kind::null) kind_ = Kind::map;
  if (kind_ != Kind::map) throw kind_error(*this, "a map");
  if (Value* existing = get_mutable(key)) *existing = std::move(v);
  else map_.emplace_back(key, std::move(v));
}

static std::string quote_if_needed(const std::string& s) {
  bool plain = !s.empty();
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '/' || c == '-')) plain = false;
  Value probe = Value::from_scalar_text(s, false);
  if (plain && probe.is_string()) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') q += '\\';
    q += c;
  }
  return q + "\"";
}

std::string Value::str() const {
  switch (kind_) {
    case Kind::null: return "null";
    case Kind::boolean: return b_ ? "true" : "false";
    case Kind::integer: return std::to_string(i_);
    case Kind::number: {
      std::ostringstream o;
      o << std::setprecision(17) << d_;
      std::string s = o.str();
      // Keep numbers recognisable as numbers when re-read ("2" would read back as an integer).
      if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
      return s;
    }
    case Kind::string: return quote_if_needed(s_);
    case Kind::list: {
      std::string s = "[";
      for (std::size_t i = 0; i < list_.size(); ++i) s += (i ? ", " : "") + list_[i].str();
      return s + "]";
    }
    case Kind::map: {
      std::string s = "{";
      for (std::size_t i = 0; i < map_.size(); ++i) s += (i ? ", " : "") + map_[i].first + ": " + map_[i].second.str();
      return s + "}";
    }
  }
  return "?";
}

bool Value::operator==(const Value& o) const {
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::null: return true;
    case Kind::boolean: return b_ == o.b_;
    case Kind::integer: return i_ == o.i_;
    case Kind::number: return d_ == o.d_;
    case Kind::string: return s_ == o.s_;
    case Kind::list: return list_ == o.list_;
    case Kind::map: return map_ == o.map_;
  }
  return false;
}

}  // namespace embedflow
