// A small RFC 4180 CSV reader for image lists (header row, quoted fields, CRLF), keeping the
// line each row starts on so errors can say file:line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace embedflow::image {

struct CsvTable {
  std::string file;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<int> lines;  // 1-based line where each row starts

  int column(const std::string& name) const;  // -1 when absent
};

// Reads the whole file; throws DataError naming file:line for an unterminated quote or a row
// whose field count differs from the header's, and ConfigError when the file cannot be opened.
CsvTable read_csv(const std::string& path);

}  // namespace embedflow::image
