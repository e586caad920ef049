// Reading photo metadata from CSV: RFC 4180 quoting (titles and descriptions hold commas,
// quotes and newlines), columns found by header name (the reader's own names, or the file's
// names through a mapping), times as ISO 8601, EXIF date-times or unix seconds, ids as integers
// or hashed from text.
// The same reader takes header-less, tab-separated layouts with fixed column positions (the
// YFCC100M metadata file). It is plain C++ so tests and benchmarks use it without a graph.
// Sharded (CsvReadOptions::shard), it reads one rank's byte range of the file, as Hadoop's input
// splits do: see CsvReadOptions::shard.
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "embedflow/parallel.hpp"
#include "embedflow/record.hpp"

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

enum class TimeFormat { automatic, iso8601, exif, unix_seconds };

// Parses, into unix seconds (UTC):
//   iso8601       "2013-06-14", "2013-06-14T12:34:56", "2013-06-14 12:34:56.250Z", "...+02:00"
//   exif          "2013:06:14 12:34:56", optionally followed by an offset "+02:00" (the EXIF
//                 DateTimeOriginal text with its OffsetTimeOriginal appended)
//   unix_seconds  an integer or a decimal fraction of seconds (rounded down to the second)
// Times without an offset are taken as UTC. automatic decides per value by its shape: a plain
// number is unix seconds, "YYYY:MM:DD ..." is EXIF, anything else ISO 8601; a value that reads
// as two things (time_is_ambiguous) is refused. False on bad or ambiguous text.
bool parse_time(std::string_view text, TimeFormat format, std::int64_t& out);

// True for the numbers automatic refuses: 8 or 14 digits that also spell a valid calendar date
// YYYYMMDD or date-time YYYYMMDDhhmmss (20130614 is 1970-08-22 as unix seconds, or 2013-06-14).
bool time_is_ambiguous(std::string_view text);

// How a photo's id is read: the id column as a 64-bit integer, or photo_id() (core/photo_id.hpp)
// of the column's text, for ids that are not integers (Flickr ids kept as strings, hex digests).
enum class IdSource { column, hash };

// The fields a header-row file is read into, in the order the reader documents them.
const std::vector<std::string>& photo_csv_fields();

struct BBox {
  double min_lon, min_lat, max_lon, max_lat;
  bool contains(double lat, double lon) const {
    return lat >= min_lat && lat <= max_lat && lon >= min_lon && lon <= max_lon;
  }
};

// Column positions of a header-less layout (-1: the layout has no such column).
struct FixedColumns {
  std::string name;  // for messages, e.g. "YFCC100M, 23 columns"
  int n_columns = 0;
  int id = -1, lat = -1, lon = -1, time = -1, user = -1, accuracy = -1, title = -1, description = -1;
  int marker = -1;   // 1 marks a video, 0 a photo
  std::vector<std::pair<std::string, int>> named;  // further columns an image_template may name
};

// The YFCC100M metadata file (yfcc100m_dataset), tab-separated, no header, text fields
// percent-encoded. webscope: the 23 columns of the release's README (photo id, user NSID,
// nickname, date taken, date uploaded, device, title, description, user tags, machine tags,
// longitude, latitude, accuracy, page URL, download URL, licence name, licence URL, server,
// farm, secret, original secret, original extension, photo/video marker). commons: the copy
// distributed with the Multimedia Commons, with a line number before and the photo's hash after
// the photo id (25 columns); its images are stored under the hash.
enum class YfccLayout { webscope, commons };
FixedColumns yfcc_columns(YfccLayout layout);

// A photo id on more than one kept row: an error naming both lines, or the first row kept and
// the later ones dropped and counted. (The sampler would otherwise pair a photo with itself.)
enum class DuplicateIds { error, keep_first };

struct CsvReadOptions {
  bool skip_bad_rows = false;            // false: the first bad row throws DataError file:line
  DuplicateIds duplicate_ids = DuplicateIds::error;
  std::optional<BBox> bbox;              // rows outside are dropped and counted
  std::int64_t min_accuracy = 0;         // rows with a lower accuracy level are dropped
  TimeFormat time_format = TimeFormat::automatic;
  IdSource id_from = IdSource::column;
  // Header files only: (field, header name) pairs naming the file's column for a field of
  // photo_csv_fields(); a field left out is found under its default names. A header name the
  // file lacks is an error naming the file, the header line and the closest header name.
  std::vector<std::pair<std::string, std::string>> columns;
  bool keep_text = true;                 // false: title/description are not materialised
  char delimiter = ',';
  bool quoting = true;                   // RFC 4180 quotes; false: '"' is an ordinary character
  // Empty: the first row is a header naming the columns. Otherwise the file has no header and
  // uses the layout whose column count equals its first row's.
  std::vector<FixedColumns> layouts;
  // true: an empty lat or lon is a bad row; false: the photo is not geotagged and is dropped
  // and counted.
  bool missing_coordinates_bad = true;
  bool url_decode_text = false;          // title/description are percent-encoded ('+' = space)
  // Non-empty: each photo's image path, with {id} and the layout's named columns filled in
  // ("photos/{id}.jpg"). Takes precedence over a path column.
  std::string image_template;
  // A data-parallel rank's share of the file (world_size 1: the whole file). The file of S bytes
  // is split by byte range: rank r reads the data rows whose first byte lies in
  // [S r / W, S (r+1) / W); a rank past 0 seeks to the first line start at or after its start,
  // and every rank reads past its end to finish its last row. The header (or, for several fixed
  // layouts, the first row that picks the layout) is read by every rank. The ranks' rows in rank
  // order are then the file's rows, each once, and no rank parses another's rows. Splitting at
  // line starts needs every record on one line: with W > 1, a record that spans lines (a quoted
  // field holding a line break, or an unmatched '"') stops the run naming its line; the rank that
  // owns the first such record always meets it, so a job over such a file fails rather than
  // misreading it. Statistics, bad rows and duplicate ids (DuplicateIds) cover the rank's rows
  // only; line numbers in messages are the file's.
  ParallelPlace shard;
};

// The YFCC100M dump's format as geo.yfcc_photos reads it: tab-separated, unquoted, ISO 8601
// times, percent-encoded text, rows without coordinates counted rather than bad, and the fixed
// layouts `layout` allows ("auto": both, the first row's width picks one; "webscope"; "commons").
void set_yfcc_format(CsvReadOptions& o, const std::string& layout = "auto");

struct CsvReadStats {
  std::int64_t rows = 0;            // data rows seen
  std::int64_t emitted = 0;
  std::int64_t bad_rows = 0;        // skipped under skip_bad_rows
  std::int64_t outside_bbox = 0;
  std::int64_t low_accuracy = 0;
  std::int64_t no_coordinates = 0;  // not geotagged (missing_coordinates_bad false)
  std::int64_t videos = 0;          // marked as videos by the layout's marker column
  std::int64_t duplicate_ids = 0;   // later rows of an id already kept (DuplicateIds::keep_first)
  std::vector<std::string> first_bad;  // up to 5 "file:line: reason" for the log
  std::vector<std::string> first_duplicates;  // up to 5 "file:line: photo id N repeats line M"
};

// The line of the first kept row of each photo id, in an open-addressing table (12 bytes a slot,
// at most half full: ~24 bytes a photo; 6M photos take 200 MB at the largest table).
class IdLines {
 public:
  // Records `line` for `id` and returns 0, or returns the line already recorded for it.
  int insert(std::int64_t id, int line);

 private:
  void grow();
  std::vector<std::int64_t> ids_;
  std::vector<int> lines_;  // 0: an empty slot (lines count from 1)
  std::size_t used_ = 0;
};

class PhotoCsvReader {
 public:
  // Throws DataError when the file cannot be opened or its header lacks a required column
  // (id, lat, lon, time, user; optional: accuracy, title, description, path or image), or, for
  // fixed layouts, when the first row matches none of them. Relative paths in a path column
  // are taken relative to the CSV file's folder.
  PhotoCsvReader(std::string path, CsvReadOptions options);
  // Appends up to max_rows accepted photos to `out` (cleared first); false once the file is
  // exhausted and nothing was appended.
  bool next(std::size_t max_rows, PhotoColumns& out);
  const CsvReadStats& stats() const { return stats_; }
  bool has_path_column() const { return col_path_ >= 0 || !image_template_.empty(); }
  // The fixed layout in use ("" when the file has a header).
  const std::string& layout_name() const { return layout_name_; }
  bool has_accuracy_column() const { return col_accuracy_ >= 0; }
  const std::string& path() const { return path_; }
  const ParallelPlace& shard() const { return options_.shard; }
  // The rank's byte range [first, last) of the file (the whole file when not sharded).
  std::pair<std::uint64_t, std::uint64_t> share_bytes() const { return {share_begin_, share_end_}; }

 private:
  bool read_record(std::vector<std::string_view>& fields, int& line);
  bool refill();
  void bad_row(int line, const std::string& reason);
  void use_layout(const FixedColumns& layout);
  // The constructor's steps: the layout from the first row's width, the columns from the
  // header row, the image path template.
  void pick_layout();
  void map_header();
  void compile_image_template();
  std::string image_path(const std::vector<std::string_view>& fields, std::int64_t id) const;
  // Sharded: moves to the rank's first data row and sets where its rows end.
  void seek_share();
  // "<file>:<line>" for a line counted by line_ (relative to the rank's first line when it
  // sought; the newlines before that are counted once, when a message first needs them).
  std::string at(int line);
  std::int64_t file_line(int line);
  // "column 'taken' (time)" for messages: the file's header name and the field it is read as.
  std::string column_label(int col, const char* field) const;

  std::string path_;
  CsvReadOptions options_;
  std::ifstream in_;
  std::vector<char> buf_;
  std::size_t pos_ = 0, end_ = 0;
  std::uint64_t buf_offset_ = 0;  // the file offset of buf_[0]
  std::uint64_t file_size_ = 0;   // at open: the byte ranges of a sharded read split this
  bool eof_ = false;
  int line_ = 1;                 // line of the next unread character (from the rank's first line)
  // Sharding: records starting at or after stop_at_ belong to later ranks; line_ restarted at 1
  // at file offset line_restart_ (0: it counts from the file's start), which follows
  // line_base_ newlines (-1: not counted yet).
  std::uint64_t stop_at_ = UINT64_MAX;
  std::uint64_t share_begin_ = 0, share_end_ = 0;
  std::uint64_t line_restart_ = 0;
  std::int64_t line_base_ = -1;
  std::string scratch_;          // unescaped quoted fields of the current record
  std::string record_problem_;   // why the current record's bytes are malformed ("" when fine)
  std::vector<std::size_t> scratch_offsets_;
  int n_columns_ = 0;
  int col_id_ = -1, col_lat_ = -1, col_lon_ = -1, col_time_ = -1, col_user_ = -1;
  int col_accuracy_ = -1, col_title_ = -1, col_description_ = -1, col_path_ = -1, col_marker_ = -1;
  std::string layout_name_;
  std::vector<std::string> header_;  // the header row's names as written ("" for fixed layouts)
  std::string csv_dir_;  // the CSV's folder, for relative paths in a path column
  // image_template split into literal text and columns: column -1 is the parsed id.
  std::vector<std::pair<std::string, int>> image_template_;
  CsvReadStats stats_;
  IdLines seen_ids_;
};

// The record geo.csv_photos and geo.yfcc_photos emit for one batch: id, lat, lon, time, user,
// accuracy; title and description when kept; path when the reader has one. Moves the columns out.
Record photo_record(PhotoColumns& cols, bool has_path);

// One log line: how many rows were read, emitted and dropped, and why.
std::string describe(const CsvReadStats& stats);

// Reads a whole file (tests, benchmarks).
PhotoColumns read_photos_csv(const std::string& path, const CsvReadOptions& options,
                             CsvReadStats* stats = nullptr);

}  // namespace embedflow::geo
