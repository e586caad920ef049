// Reading photo metadata from CSV: RFC 4180 quoting (titles and descriptions hold commas,
// quotes and newlines), columns found by header name, times as ISO 8601 or unix seconds.
// The reader is plain C++ so tests and benchmarks use it without a graph.
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace embedflow::geo {

// Column arrays of one batch of photos, in file order.
struct PhotoColumns {
  std::vector<std::int64_t> id;
  std::vector<double> lat, lon;       // degrees
  std::vector<std::int64_t> time;     // unix seconds, UTC
  std::vector<std::string> user;
  std::vector<std::int64_t> accuracy; // Flickr accuracy level 1..16; -1 when the file has none
  std::vector<std::string> title, description, path;

  std::size_t size() const { return id.size(); }
  void clear();
  void reserve(std::size_t n);
};

enum class TimeFormat { automatic, iso8601, unix_seconds };

// Parses "2013-06-14", "2013-06-14T12:34:56", "2013-06-14 12:34:56.250Z", "...+02:00" (times
// without an offset are taken as UTC) or, for unix_seconds, an integer (a fraction is
// truncated). automatic picks unix seconds when the text is a plain number. False on bad text.
bool parse_time(std::string_view text, TimeFormat format, std::int64_t& out);

struct BBox {
  double min_lon, min_lat, max_lon, max_lat;
  bool contains(double lat, double lon) const {
    return lat >= min_lat && lat <= max_lat && lon >= min_lon && lon <= max_lon;
  }
};

struct CsvReadOptions {
  bool skip_bad_rows = false;            // false: the first bad row throws DataError file:line
  std::optional<BBox> bbox;              // rows outside are dropped and counted
  std::int64_t min_accuracy = 0;         // rows with a lower accuracy level are dropped
  TimeFormat time_format = TimeFormat::automatic;
  bool keep_text = true;                 // false: title/description are not materialised
};

struct CsvReadStats {
  std::int64_t rows = 0;            // data rows seen
  std::int64_t emitted = 0;
  std::int64_t bad_rows = 0;        // skipped under skip_bad_rows
  std::int64_t outside_bbox = 0;
  std::int64_t low_accuracy = 0;
  std::vector<std::string> first_bad;  // up to 5 "file:line: reason" for the log
};

class PhotoCsvReader {
 public:
  // Throws DataError when the file cannot be opened or its header lacks a required column
  // (id, lat, lon, time, user; optional: accuracy, title, description, path).
  PhotoCsvReader(std::string path, CsvReadOptions options);
  // Appends up to max_rows accepted photos to `out` (cleared first); false once the file is
  // exhausted and nothing was appended.
  bool next(std::size_t max_rows, PhotoColumns& out);
  const CsvReadStats& stats() const { return stats_; }
  bool has_path_column() const { return col_path_ >= 0; }
  bool has_accuracy_column() const { return col_accuracy_ >= 0; }
  const std::string& path() const { return path_; }

 private:
  bool read_record(std::vector<std::string_view>& fields, int& line);
  bool refill();
  void bad_row(int line, const std::string& reason);

  std::string path_;
  CsvReadOptions options_;
  std::ifstream in_;
  std::vector<char> buf_;
  std::size_t pos_ = 0, end_ = 0;
  bool eof_ = false;
  int line_ = 1;                 // line of the next unread character
  std::string scratch_;          // unescaped quoted fields of the current record
  std::string record_problem_;   // why the current record's bytes are malformed ("" when fine)
  std::vector<std::size_t> scratch_offsets_;
  int n_columns_ = 0;
  int col_id_ = -1, col_lat_ = -1, col_lon_ = -1, col_time_ = -1, col_user_ = -1;
  int col_accuracy_ = -1, col_title_ = -1, col_description_ = -1, col_path_ = -1;
  CsvReadStats stats_;
};

// Reads a whole file (tests, benchmarks).
PhotoColumns read_photos_csv(const std::string& path, const CsvReadOptions& options,
                             CsvReadStats* stats = nullptr);

}  // namespace embedflow::geo
