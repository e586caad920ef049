#include "embedflow/csv.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "embedflow/error.hpp"

namespace embedflow {

std::string read_file_text(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(cat(path, ": cannot open ", what, " (", std::strerror(errno), ")"));
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

void for_each_csv_row(const std::string& text, const std::string& file,
                      const std::function<void(std::vector<std::string>& row, int line)>& fn) {
  std::vector<std::string> row;
  std::string field;
  int line = 1, row_line = 1;
  bool quoted = false;        // between a field's opening and closing quote
  bool field_quoted = false;  // the current field opened with a quote, so it is not blank
  auto end_field = [&] {
    row.push_back(std::move(field));
    field.clear();
    field_quoted = false;
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

}  // namespace embedflow
