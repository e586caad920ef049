// RFC 4180 CSV reading (and field quoting for writers) shared by plugins (plugins may only share code through the SDK): a row
// callback over text already in memory, and a header + rows table on top of it. Every row keeps
// the 1-based line it starts on so errors can say file:line.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace embedflow {

class SchemaContext;

// The whole file as bytes. Throws ConfigError "<path>: cannot open <what> (<strerror>)": a file
// that is not there is a wrong path in the graph, not bad data.
std::string read_file_text(const std::string& path, const std::string& what);

// The first thing in `bytes` that no CSV text may hold, or "" when there is none: a NUL byte or
// bytes that are not UTF-8 (overlong forms, surrogates and code points above U+10FFFF included).
// `offset` (optional) receives the problem's byte offset. Readers call it on what they read so
// a binary or mis-encoded file is an error at its line, not garbage in a column.
std::string csv_bytes_problem(std::string_view bytes, std::size_t* offset = nullptr);

// Calls fn(row, line) for each record of `text`, `line` being the 1-based line it starts on.
// Fields are split at commas; a field that starts with '"' is quoted and may hold commas, quotes
// (written "") and newlines; after its closing quote only a comma or the line end may follow.
// A '"' inside an unquoted field is an ordinary character. Rows end at \n or \r\n outside quotes
// (a \r anywhere else is kept). Blank lines are skipped, but a line holding only "" is a row of
// one empty field, as in Python's csv.reader. fn may move the fields out of `row`.
// Throws DataError "<file>:<line>: unterminated quoted field" naming the line the row starts on,
// "<file>:<line>: text after the closing quote of field <n>" (`"abc"def`), and
// "<file>:<line>: <csv_bytes_problem>" for a NUL byte or invalid UTF-8 on that line.
void for_each_csv_row(const std::string& text, const std::string& file,
                      const std::function<void(std::vector<std::string>& row, int line)>& fn);

// Strips spaces and tabs at both ends (people pad columns after the comma).
std::string trim_csv_field(const std::string& s);

// One field as written to a CSV file: as is, or quoted (inner quotes doubled) when it holds a
// comma, a quote or a line break, so a method named "CEN-mixture, 3 starts" stays one column.
std::string csv_field(const std::string& s);

// A CSV file with a header row.
struct CsvTable {
  std::string file;
  std::vector<std::string> header;  // trimmed names; a UTF-8 byte-order mark is removed
  int header_line = 0;              // 1-based line of the header row
  std::vector<std::vector<std::string>> rows;  // each has header.size() fields, untrimmed
  std::vector<int> lines;                      // 1-based line where each row starts

  int column(const std::string& name) const;  // -1 when absent
};

// Reads `path` into a table. Throws ConfigError "<path>: cannot open <what> (<strerror>)",
// DataError "<path>:<line>: <n> fields, the header has <m>" for a row of the wrong width,
// DataError "<path>:<line>: unterminated quoted field" and DataError
// "<path>: empty <what> (no header row)" when the file holds no row at all.
CsvTable read_csv_table(const std::string& path, const std::string& what = "CSV file");

// A reader's `columns` parameter, checked at graph load: a map from the reader's fields
// (`fields`, listed in messages) to the file's header names. Reports, at the parameter, a value
// that is not a map, an unknown field (with the nearest field), a name that is not a non-empty
// string, and two fields reading one header name (compared case-insensitively). Whether the file
// has the names is known only when it is opened.
void check_column_map(SchemaContext& c, const std::string& param, const std::vector<std::string>& fields);

}  // namespace embedflow
