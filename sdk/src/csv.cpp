#include "embedflow/csv.hpp"

#include "embedflow/file_kind.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "embedflow/error.hpp"
#include "embedflow/suggest.hpp"
#include "embedflow/node.hpp"

namespace embedflow {

std::string read_file_text(const std::string& path, const std::string& what) {
  refuse_special_input(path, what);  // a FIFO would block in open() for ever
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(cat(path, ": cannot open ", what, " (", std::strerror(errno), ")"));
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

std::string csv_bytes_problem(std::string_view bytes, std::size_t* offset) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::size_t n = bytes.size();
  auto found = [&](std::size_t at, std::string what) {
    if (offset) *offset = at;
    return what;
  };
  for (std::size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      if (c == 0) return found(i, "NUL byte (a binary file, or UTF-16 text?)");
      ++i;
      continue;
    }
    // Lead byte: the sequence length and the smallest code point it may encode (no overlongs).
    std::size_t len = 0;
    std::uint32_t cp = 0, min = 0;
    if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1Fu, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0Fu, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07u, min = 0x10000;
    else return found(i, cat("invalid UTF-8 (byte 0x", std::hex, static_cast<int>(c), ")"));
    if (i + len > n) return found(i, "invalid UTF-8 (sequence cut off at the end)");
    for (std::size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0u) != 0x80u)
        return found(i, cat("invalid UTF-8 (byte 0x", std::hex, static_cast<int>(c), " not followed by a continuation byte)"));
      cp = (cp << 6) | (p[i + k] & 0x3Fu);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      return found(i, cat("invalid UTF-8 (overlong form, surrogate or code point above U+10FFFF at byte 0x", std::hex,
                          static_cast<int>(c), ")"));
    i += len;
  }
  return "";
}

void for_each_csv_row(const std::string& text, const std::string& file,
                      const std::function<void(std::vector<std::string>& row, int line)>& fn) {
  // Checked before any row is handed out: a damaged file fails whole, with the line of the damage.
  std::size_t bad_at = 0;
  if (std::string problem = csv_bytes_problem(text, &bad_at); !problem.empty()) {
    const auto line_of = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(bad_at), '\n');
    throw DataError(cat(file, ":", line_of, ": ", problem));
  }
  std::vector<std::string> row;
  std::string field;
  int line = 1, row_line = 1;
  bool quoted = false;        // between a field's opening and closing quote
  bool field_quoted = false;  // the current field opened with a quote, so it is not blank
  bool closed = false;        // the current field's closing quote has been read
  auto end_field = [&] {
    row.push_back(std::move(field));
    field.clear();
    field_quoted = closed = false;
  };
  auto end_row = [&] {
    // Only an unquoted empty line is blank: `""` alone is a row holding one empty field.
    const bool blank = row.empty() && field.empty() && !field_quoted;
    end_field();
    if (!blank) fn(row, row_line);
    row.clear();
  };
  const std::size_t n = text.size();
  for (std::size_t i = 0; i < n; ++i) {
    const char ch = text[i];
    if (quoted) {
      if (ch == '"') {
        if (i + 1 < n && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          quoted = false;
          closed = true;
        }
      } else {
        if (ch == '\n') ++line;
        field += ch;
      }
    } else if (ch == '"' && field.empty() && !field_quoted) {
      quoted = field_quoted = true;
    } else if (ch == ',') {
      end_field();
    } else if (ch == '\n' || (ch == '\r' && (i + 1 == n || text[i + 1] == '\n'))) {
      if (ch == '\r' && i + 1 < n) ++i;  // CRLF: the \n is part of this line end
      end_row();
      row_line = ++line;
    } else if (closed && ch != ' ' && ch != '\t') {  // padding before the comma is harmless
      // `"abc"def`: Python's csv would silently make it abcdef; a spreadsheet would show
      // something else. Neither is what the writer meant.
      throw DataError(cat(file, ":", line, ": text after the closing quote of field ", row.size() + 1,
                          " (a quote inside a field must be doubled, and the whole field quoted)"));
    } else {
      field += ch;
    }
  }
  if (quoted) throw DataError(cat(file, ":", row_line, ": unterminated quoted field"));
  // A last row without a line end.
  if (!row.empty() || !field.empty() || field_quoted) end_row();
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string trim_csv_field(const std::string& s) {
  std::size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t')) --e;
  return s.substr(b, e - b);
}

int CsvTable::column(const std::string& name) const {
  for (std::size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return static_cast<int>(i);
  return -1;
}

CsvTable read_csv_table(const std::string& path, const std::string& what) {
  std::string text = read_file_text(path, what);
  // Spreadsheet programs save UTF-8 with a byte-order mark; dropping it before parsing keeps a
  // quoted first header name quoted.
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);
  CsvTable t;
  t.file = path;
  bool have_header = false;
  for_each_csv_row(text, path, [&](std::vector<std::string>& row, int line) {
    if (!have_header) {
      have_header = true;
      t.header_line = line;
      for (const std::string& name : row) t.header.push_back(trim_csv_field(name));
      return;
    }
    if (row.size() != t.header.size())
      throw DataError(cat(path, ":", line, ": ", row.size(), " fields, the header has ", t.header.size()));
    t.rows.push_back(std::move(row));
    t.lines.push_back(line);
  });
  if (!have_header) throw DataError(cat(path, ": empty ", what, " (no header row)"));
  return t;
}

void check_column_map(SchemaContext& c, const std::string& param, const std::vector<std::string>& fields) {
  std::string listed;
  for (const auto& f : fields) listed += (listed.empty() ? "" : ", ") + f;
  const Value& v = c.params().value(param);
  if (!v.is_map()) {
    c.error(cat(param, ": expected a map from field (", listed, ") to header name, got ", v.str()), param);
    return;
  }
  std::map<std::string, std::string> taken;  // lower-case header name -> field
  for (const auto& [field, name] : v.as_map()) {
    if (std::find(fields.begin(), fields.end(), field) == fields.end()) {
      c.error(cat(param, ": unknown field '", field, "'", did_you_mean(field, fields), " (fields: ", listed, ")"),
              param);
      continue;
    }
    if (!name.is_string() || name.as_string().empty()) {
      c.error(cat(param, ": field '", field, "' needs a header name (a string), got ", name.str()), param);
      continue;
    }
    std::string key = name.as_string();
    std::transform(key.begin(), key.end(), key.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    auto [it, fresh] = taken.emplace(key, field);
    if (!fresh) c.error(cat(param, ": fields '", it->second, "' and '", field, "' both read column '", name.as_string(), "'"), param);
  }
}

}  // namespace embedflow
