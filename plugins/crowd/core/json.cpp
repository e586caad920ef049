#include "core/json.hpp"

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
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

class Parser {
 public:
  Parser(const std::string& text, const std::string& name) : s_(text), name_(name) {}

  JsonValue document() {
    skip_ws();
    JsonValue v = value(0);
    skip_ws();
    if (pos_ < s_.size()) fail("unexpected text after the JSON value");
    return v;
  }

 private:
  // Deep nesting would overflow the stack of a recursive parser; annotation files nest 3 deep.
  static constexpr int kMaxDepth = 256;

  [[noreturn]] void fail(const std::string& what) const {
    throw DataError(cat(name_, ":", line_, ":", pos_ - line_start_ + 1, ": ", what));
  }

  void skip_ws() {
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == '\n') {
        ++pos_;
        ++line_;
        line_start_ = pos_;
      } else if (c == ' ' || c == '\t' || c == '\r') {
        ++pos_;
      } else {
        break;
      }
    }
  }

  JsonValue value(int depth) {
    if (depth > kMaxDepth) fail("nesting deeper than 256 levels");
    if (pos_ >= s_.size()) fail("unexpected end of file, expected a value");
    JsonValue v;
    v.line = line_;
    v.column = static_cast<int>(pos_ - line_start_ + 1);
    const char c = s_[pos_];
    if (c == '{') {
      v.kind = JsonValue::Kind::object;
      ++pos_;
      skip_ws();
      if (peek('}')) return ++pos_, v;
      for (;;) {
        skip_ws();
        if (!peek('"')) fail("expected a string key");
        std::string key = string_body();
        skip_ws();
        expect(':');
        skip_ws();
        v.members.emplace_back(std::move(key), value(depth + 1));
        skip_ws();
        if (peek(',')) {
          ++pos_;
          continue;
        }
        expect('}');
        return v;
      }
    }
    if (c == '[') {
      v.kind = JsonValue::Kind::array;
      ++pos_;
      skip_ws();
      if (peek(']')) return ++pos_, v;
      for (;;) {
        skip_ws();
        v.items.push_back(value(depth + 1));
        skip_ws();
        if (peek(',')) {
          ++pos_;
          continue;
        }
        expect(']');
        return v;
      }
    }
    if (c == '"') {
      v.kind = JsonValue::Kind::string;
      v.string = string_body();
      return v;
    }
    if (literal("true")) return v.kind = JsonValue::Kind::boolean, v.boolean = true, v;
    if (literal("false")) return v.kind = JsonValue::Kind::boolean, v;
    if (literal("null")) return v;
    if (c == '-' || (c >= '0' && c <= '9')) return number(v);
    fail(cat("unexpected character '", c, "'"));
  }

  JsonValue& number(JsonValue& v) {
    const std::size_t begin = pos_;
    if (peek('-')) ++pos_;
    if (!digit()) fail("malformed number");
    if (s_[pos_] == '0' && pos_ + 1 < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_ + 1])))
      fail("malformed number (leading zero)");
    while (digit()) ++pos_;
    bool integral = true;
    if (peek('.')) {
      integral = false;
      ++pos_;
      if (!digit()) fail("malformed number (no digits after '.')");
      while (digit()) ++pos_;
    }
    if (peek('e') || peek('E')) {
      integral = false;
      ++pos_;
      if (peek('+') || peek('-')) ++pos_;
      if (!digit()) fail("malformed number (no digits in the exponent)");
      while (digit()) ++pos_;
    }
    const char* first = s_.data() + begin;
    const char* last = s_.data() + pos_;
    if (integral) {
      auto [p, ec] = std::from_chars(first, last, v.integer);
      if (ec == std::errc() && p == last) {
        v.kind = JsonValue::Kind::integer;
        v.number = static_cast<double>(v.integer);
        return v;
      }
    }
    // Out-of-range integers and decimals: strtod on a bounded copy (the text is not NUL-ended
    // at the number).
    const std::string text(first, last);
    v.kind = JsonValue::Kind::number;
    v.number = std::strtod(text.c_str(), nullptr);
    return v;
  }

  std::string string_body() {
    ++pos_;  // opening quote
    std::string out;
    for (;;) {
      if (pos_ >= s_.size()) fail("unterminated string");
      const char c = s_[pos_++];
      if (c == '"') return out;
      if (c == '\n') fail("newline inside a string");
      if (static_cast<unsigned char>(c) < 0x20) fail("control character inside a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) fail("unterminated string");
      const char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': utf8(hex4(), out); break;
        default: fail(cat("unknown escape '\\", e, "'"));
      }
    }
  }

  unsigned hex4() {
    if (pos_ + 4 > s_.size()) fail("short \\u escape");
    unsigned cp = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = s_[pos_++];
      cp <<= 4;
      if (h >= '0' && h <= '9') cp |= static_cast<unsigned>(h - '0');
      else if (h >= 'a' && h <= 'f') cp |= static_cast<unsigned>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') cp |= static_cast<unsigned>(h - 'A' + 10);
      else fail("bad hex digit in a \\u escape");
    }
    return cp;
  }

  void utf8(unsigned cp, std::string& out) {
    if (cp >= 0xD800 && cp <= 0xDBFF) {  // a surrogate pair encodes one code point above U+FFFF
      if (pos_ + 6 > s_.size() || s_[pos_] != '\\' || s_[pos_ + 1] != 'u') fail("unpaired surrogate in a \\u escape");
      pos_ += 2;
      const unsigned lo = hex4();
      if (lo < 0xDC00 || lo > 0xDFFF) fail("unpaired surrogate in a \\u escape");
      cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  bool peek(char c) const { return pos_ < s_.size() && s_[pos_] == c; }
  bool digit() const { return pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9'; }
  void expect(char c) {
    if (!peek(c)) {
      if (pos_ >= s_.size()) fail(cat("unexpected end of file, expected '", c, "'"));
      fail(cat("expected '", c, "', found '", s_[pos_], "'"));
    }
    ++pos_;
  }
  bool literal(const char* word) {
    const std::size_t n = std::strlen(word);
    if (s_.compare(pos_, n, word) != 0) return false;
    pos_ += n;
    return true;
  }

  const std::string& s_;
  const std::string& name_;
  std::size_t pos_ = 0, line_start_ = 0;
  int line_ = 1;
};

}  // namespace

JsonValue parse_json(const std::string& text, const std::string& name) { return Parser(text, name).document(); }

JsonValue parse_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(cat(path, ": cannot open JSON file (", std::strerror(errno), ")"));
  std::stringstream buf;
  buf << in.rdbuf();
  return parse_json(buf.str(), path);
}

}  // namespace embedflow::crowd
