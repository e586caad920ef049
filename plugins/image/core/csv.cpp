#include "core/csv.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <embedflow/error.hpp>

namespace embedflow::image {

int CsvTable::column(const std::string& name) const {
  for (std::size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return static_cast<int>(i);
  return -1;
}

CsvTable read_csv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(cat(path, ": cannot open CSV file (", std::strerror(errno), ")"));
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();

  CsvTable t;
  t.file = path;
  std::vector<std::string> row;
  std::string field;
  int line = 1, row_line = 1;
  bool quoted = false, any = false;
  auto end_row = [&] {
    row.push_back(std::move(field));
    field.clear();
    const bool blank = row.size() == 1 && row[0].empty();
    if (!blank) {
      if (t.header.empty() && t.rows.empty()) {
        t.header = std::move(row);
      } else {
        if (row.size() != t.header.size())
          throw DataError(cat(path, ":", row_line, ": ", row.size(), " fields, the header has ", t.header.size()));
        t.rows.push_back(std::move(row));
        t.lines.push_back(row_line);
      }
    }
    row.clear();
    any = false;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (quoted) {
      if (ch == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else {
        if (ch == '\n') ++line;
        field += ch;
      }
      continue;
    }
    if (!any) {
      row_line = line;
      any = true;
    }
    if (ch == '"') {
      quoted = true;
    } else if (ch == ',') {
      row.push_back(std::move(field));
      field.clear();
    } else if (ch == '\r') {
      // CRLF line ends: the \n that follows ends the row.
    } else if (ch == '\n') {
      end_row();
      ++line;
    } else {
      field += ch;
    }
  }
  if (quoted) throw DataError(cat(path, ":", row_line, ": unterminated quoted field"));
  if (any || !field.empty() || !row.empty()) end_row();
  if (t.header.empty()) throw DataError(cat(path, ": empty CSV file (no header row)"));
  for (auto& h : t.header) {  // tolerate a UTF-8 byte-order mark and stray spaces
    if (&h == &t.header[0] && h.rfind("\xEF\xBB\xBF", 0) == 0) h.erase(0, 3);
    while (!h.empty() && h.back() == ' ') h.pop_back();
    while (!h.empty() && h.front() == ' ') h.erase(0, 1);
  }
  return t;
}

}  // namespace embedflow::image
