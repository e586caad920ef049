#include "photo_csv.hpp"
#include <embedflow/file_kind.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "embedflow/csv.hpp"
#include "embedflow/error.hpp"
#include "embedflow/params.hpp"
#include "embedflow/suggest.hpp"
#include "geodesy.hpp"
#include "photo_fields.hpp"
#include "photo_id.hpp"

namespace embedflow::geo {

void PhotoColumns::clear() {
  id.clear(); lat.clear(); lon.clear(); time.clear(); user.clear(); accuracy.clear();
  title.clear(); description.clear(); path.clear();
}

void PhotoColumns::reserve(std::size_t n) {
  id.reserve(n); lat.reserve(n); lon.reserve(n); time.reserve(n); user.reserve(n);
  accuracy.reserve(n);
}

namespace {

using photo_fields::parse_double;
using photo_fields::parse_int;
using photo_fields::trim;

// Percent-decoding as in application/x-www-form-urlencoded text ('+' is a space); a '%' not
// followed by two hex digits is kept as it is.
std::string url_decode(std::string_view s) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

PhotoCsvReader::PhotoCsvReader(std::string path, CsvReadOptions options)
    // The kind is checked before in_ opens it: a FIFO would block the open for ever.
    : path_((refuse_special_input(path, "photo CSV"), std::move(path))), options_(std::move(options)),
      in_(path_, std::ios::binary) {
  if (!in_) throw DataError(cat(path_, ": cannot open: ", std::strerror(errno)));
  std::error_code ec;
  file_size_ = std::filesystem::file_size(path_, ec);
  if (ec) throw DataError(cat(path_, ": cannot read its size: ", ec.message()));
  // 4 MiB reads, less for a small file (a record longer than the buffer grows it).
  buf_.resize(std::clamp<std::uint64_t>(file_size_ + 1, 1 << 16, 1 << 22));
  csv_dir_ = std::filesystem::path(path_).parent_path().string();
  if (!options_.layouts.empty()) {
    // No header: the first row's column count picks the layout, then it is read again as data.
    if (options_.layouts.size() == 1) {
      use_layout(options_.layouts[0]);
    } else {
      pick_layout();
    }
  } else {
    map_header();
  }
  compile_image_template();
  seek_share();
}

void PhotoCsvReader::seek_share() {
  const std::uint64_t size = file_size_;
  share_end_ = size;
  const ParallelPlace& place = options_.shard;
  if (place.world_size <= 1) return;
  if (place.rank < 0 || place.rank >= place.world_size)
    throw DataError(cat(path_, ": shard rank ", place.rank, " is outside [0, ", place.world_size, ")"));
  // 128-bit products: S r cannot overflow for any file size.
  const auto cut = [&](std::int64_t r) {
    return static_cast<std::uint64_t>(static_cast<unsigned __int128>(size) * static_cast<std::uint64_t>(r) /
                                      static_cast<std::uint64_t>(place.world_size));
  };
  share_begin_ = cut(place.rank);
  share_end_ = cut(place.rank + 1);
  stop_at_ = share_end_;
  const std::uint64_t data_start = buf_offset_ + pos_;  // after the header: a line start
  if (share_begin_ <= data_start) return;                 // the rank starts at the first data row
  // The first line start at or after share_begin_: just past the first '\n' at or after the byte
  // before it. Only these bytes of the earlier ranks' share are read, and not parsed.
  in_.clear();
  in_.seekg(static_cast<std::streamoff>(share_begin_ - 1));
  if (!in_) throw DataError(cat(path_, ": cannot seek to byte ", share_begin_ - 1));
  buf_offset_ = share_begin_ - 1;
  pos_ = end_ = 0;
  eof_ = false;
  for (;;) {
    const void* nl = std::memchr(buf_.data() + pos_, '\n', end_ - pos_);
    if (nl) {
      pos_ = static_cast<std::size_t>(static_cast<const char*>(nl) - buf_.data()) + 1;
      break;
    }
    pos_ = end_;
    if (!refill()) break;  // no line starts in the rest of the file: nothing to read
  }
  line_ = 1;
  line_restart_ = buf_offset_ + pos_;
}

std::string PhotoCsvReader::at(int line) { return cat(path_, ":", file_line(line)); }

std::int64_t PhotoCsvReader::file_line(int line) {
  if (line_restart_ == 0) return line;
  if (line_base_ < 0) {
    // The newlines before the rank's first line, counted once (memchr over the bytes, no parsing).
    std::ifstream f(path_, std::ios::binary);
    std::vector<char> chunk(1 << 20);
    std::uint64_t left = line_restart_;
    std::int64_t newlines = 0;
    while (left > 0 && f) {
      f.read(chunk.data(), static_cast<std::streamsize>(std::min<std::uint64_t>(left, chunk.size())));
      const auto got = static_cast<std::size_t>(f.gcount());
      if (got == 0) break;
      for (const char* p = chunk.data(); (p = static_cast<const char*>(std::memchr(p, '\n', chunk.data() + got - p)));) {
        ++newlines;
        ++p;
      }
      left -= got;
    }
    line_base_ = newlines;
  }
  return line_base_ + line;
}

// No header and several layouts: the first row's column count picks one, then the row is read
// again as data.
bool PhotoCsvReader::refill() {
  if (eof_) return false;
  if (pos_ > 0) {
    std::memmove(buf_.data(), buf_.data() + pos_, end_ - pos_);
    buf_offset_ += pos_;
    end_ -= pos_;
    pos_ = 0;
  }
  if (end_ == buf_.size()) buf_.resize(buf_.size() * 2);  // one record longer than the buffer
  in_.read(buf_.data() + end_, static_cast<std::streamsize>(buf_.size() - end_));
  const auto got = static_cast<std::size_t>(in_.gcount());
  end_ += got;
  if (got == 0) eof_ = true;
  return got > 0;
}

// Splits the next record into fields. Unquoted fields view the buffer; quoted ones are
// unescaped into scratch_, sized up front so the views stay valid until the next call.
bool PhotoCsvReader::read_record(std::vector<std::string_view>& fields, int& line) {
  fields.clear();
  for (;;) {
    // Sharded: the records starting from here on are later ranks'.
    if (buf_offset_ + pos_ >= stop_at_) return false;
    // Find the end of the record, refilling until it is in the buffer.
    std::size_t rec_end = std::string::npos;
    bool quoted = false;
    std::size_t scan = pos_;
    for (;;) {
      const char* base = buf_.data();
      if (!quoted) {
        const void* nl = std::memchr(base + scan, '\n', end_ - scan);
        const std::size_t stop = nl ? static_cast<const char*>(nl) - base : end_;
        const void* q = options_.quoting ? std::memchr(base + scan, '"', stop - scan) : nullptr;
        if (!q) {
          if (nl) { rec_end = stop; break; }
          scan = end_;
        } else {
          quoted = true;
          scan = static_cast<const char*>(q) - base + 1;
          continue;
        }
      } else {
        const void* q = std::memchr(base + scan, '"', end_ - scan);
        if (q) {
          scan = static_cast<const char*>(q) - base + 1;
          // A doubled quote is an escaped quote; it needs the next character to decide.
          if (scan == end_ && !eof_) {
            const std::size_t off = scan - pos_;
            if (!refill() && !eof_) return false;
            scan = pos_ + off;
            if (scan < end_ && buf_[scan] == '"') { ++scan; continue; }
            quoted = false;
            continue;
          }
          if (scan < end_ && buf_[scan] == '"') { ++scan; continue; }
          quoted = false;
          continue;
        }
        scan = end_;
      }
      // Need more data.
      const std::size_t off = scan - pos_;
      if (!refill()) {
        if (end_ == pos_) return false;  // clean end of file
        if (quoted) {
          line = line_;
          const int start_line = line_;
          line_ += static_cast<int>(std::count(buf_.data() + pos_, buf_.data() + end_, '\n'));
          pos_ = end_;
          throw DataError(cat(at(start_line), ": unterminated quoted field at end of file"));
        }
        rec_end = end_;  // last line without a newline
        break;
      }
      scan = pos_ + off;
    }

    line = line_;
    const char* base = buf_.data();
    const std::size_t rec_begin = pos_;
    std::size_t rec_stop = rec_end;
    const int breaks = static_cast<int>(std::count(base + rec_begin, base + rec_end, '\n'));
    line_ += 1 + breaks;
    pos_ = rec_end < end_ ? rec_end + 1 : rec_end;
    if (breaks > 0 && options_.shard.world_size > 1)
      throw DataError(cat(at(line), ": this record spans ", breaks + 1,
                          " lines (a quoted field holds a line break, or a '\"' is unmatched); a sharded read "
                          "(shard_world_size ", options_.shard.world_size,
                          ") splits the file at line starts, so each record must be one line"));
    if (rec_stop > rec_begin && base[rec_stop - 1] == '\r') --rec_stop;
    if (rec_stop == rec_begin) continue;  // blank line

    // NUL bytes, invalid UTF-8 and text after a closing quote make the record bad (reported by
    // next(), which honours on_bad_row: skip), never garbage in a column.
    record_problem_ = csv_bytes_problem(std::string_view(base + rec_begin, rec_stop - rec_begin));
    scratch_.resize(rec_stop - rec_begin);
    std::size_t sc = 0;
    std::size_t i = rec_begin;
    const char delim = options_.delimiter;
    for (;;) {
      if (options_.quoting && i < rec_stop && base[i] == '"') {
        std::size_t start = sc;
        ++i;
        for (;;) {
          if (i >= rec_stop) break;
          if (base[i] == '"') {
            if (i + 1 < rec_stop && base[i + 1] == '"') { scratch_[sc++] = '"'; i += 2; continue; }
            ++i;
            break;
          }
          scratch_[sc++] = base[i++];
        }
        // Padding between the closing quote and the delimiter is kept; other text is an error.
        while (i < rec_stop && base[i] != delim) {
          if (base[i] != ' ' && base[i] != '\t' && record_problem_.empty())
            record_problem_ = cat("text after the closing quote of field ", fields.size() + 1);
          scratch_[sc++] = base[i++];
        }
        fields.emplace_back(scratch_.data() + start, sc - start);
      } else {
        const void* comma = std::memchr(base + i, delim, rec_stop - i);
        const std::size_t stop = comma ? static_cast<const char*>(comma) - base : rec_stop;
        fields.emplace_back(base + i, stop - i);
        i = stop;
      }
      if (i >= rec_stop) break;
      ++i;  // the delimiter
      if (i == rec_stop) { fields.emplace_back(); break; }
    }
    return true;
  }
}

int IdLines::insert(std::int64_t id, int line) {
  if (2 * (used_ + 1) > ids_.size()) grow();
  const std::size_t mask = ids_.size() - 1;
  // splitmix64's finaliser: sequential ids spread over the table.
  std::uint64_t h = static_cast<std::uint64_t>(id) + 0x9E3779B97F4A7C15ull;
  h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
  h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
  h ^= h >> 31;
  for (std::size_t i = static_cast<std::size_t>(h) & mask;; i = (i + 1) & mask) {
    if (lines_[i] == 0) {
      ids_[i] = id;
      lines_[i] = line;
      ++used_;
      return 0;
    }
    if (ids_[i] == id) return lines_[i];
  }
}

void IdLines::grow() {
  std::vector<std::int64_t> ids = std::move(ids_);
  std::vector<int> lines = std::move(lines_);
  const std::size_t size = std::max<std::size_t>(64, 2 * ids.size());
  ids_.assign(size, 0);
  lines_.assign(size, 0);
  used_ = 0;
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (lines[i] != 0) insert(ids[i], lines[i]);
}

void PhotoCsvReader::bad_row(int line, const std::string& reason) {
  std::string where = cat(at(line), ": ", reason);
  if (!options_.skip_bad_rows) throw DataError(where + " (on_bad_row: skip skips such rows)");
  ++stats_.bad_rows;
  if (stats_.first_bad.size() < 5) stats_.first_bad.push_back(std::move(where));
}

bool PhotoCsvReader::next(std::size_t max_rows, PhotoColumns& out) {
  out.clear();
  std::vector<std::string_view> f;
  int line = 0;
  while (out.size() < max_rows) {
    if (!read_record(f, line)) break;
    ++stats_.rows;
    if (!record_problem_.empty()) {
      bad_row(line, record_problem_);
      continue;
    }
    if (static_cast<int>(f.size()) != n_columns_) {
      bad_row(line, cat("expected ", n_columns_, " fields, got ", f.size()));
      continue;
    }
    std::int64_t id, t, acc = -1;
    double lat, lon;
    if (options_.id_from == IdSource::hash) {
      const std::string_view text = trim(f[col_id_]);
      if (text.empty()) { bad_row(line, cat(column_label(col_id_, "id"), " is empty")); continue; }
      id = photo_id(text);
    } else if (!parse_int(f[col_id_], id)) {
      bad_row(line, cat(column_label(col_id_, "id"), " '", f[col_id_], "' is not an integer",
                        header_.empty() ? "" : " (id_from: hash derives ids from text)"));
      continue;
    }
    if (col_marker_ >= 0) {
      const std::string_view m = trim(f[col_marker_]);
      if (m != "0" && m != "1") { bad_row(line, cat("photo/video marker '", m, "' is not 0 or 1")); continue; }
      if (m == "1") { ++stats_.videos; continue; }
    }
    if (!options_.missing_coordinates_bad && (trim(f[col_lat_]).empty() || trim(f[col_lon_]).empty())) {
      ++stats_.no_coordinates;
      continue;
    }
    if (!parse_double(f[col_lat_], lat) || lat < -90 || lat > 90) {
      bad_row(line, cat(column_label(col_lat_, "lat"), " '", f[col_lat_], "' is not a latitude in [-90, 90]"));
      continue;
    }
    if (!parse_double(f[col_lon_], lon) || lon < -180 || lon > 180) {
      bad_row(line, cat(column_label(col_lon_, "lon"), " '", f[col_lon_], "' is not a longitude in [-180, 180]"));
      continue;
    }
    if (!parse_time(f[col_time_], options_.time_format, t)) {
      const std::string_view text = trim(f[col_time_]);
      const std::string label = column_label(col_time_, "time");
      if (options_.time_format == TimeFormat::automatic && time_is_ambiguous(text))
        bad_row(line, cat(label, " '", text, "' is ambiguous: unix seconds or the compact date-time ",
                          text.substr(0, 4), "-", text.substr(4, 2), "-", text.substr(6, 2),
                          " (time_format: unix or iso decides)"));
      else
        bad_row(line, cat(label, " '", text, "' is not ",
                          options_.time_format == TimeFormat::unix_seconds ? "unix seconds"
                          : options_.time_format == TimeFormat::iso8601    ? "an ISO 8601 date-time"
                          : options_.time_format == TimeFormat::exif       ? "an EXIF date-time YYYY:MM:DD HH:MM:SS[+HH:MM]"
                                                                           : "ISO 8601, an EXIF date-time or unix seconds"));
      continue;
    }
    if (col_accuracy_ >= 0 && !trim(f[col_accuracy_]).empty() && !parse_int(f[col_accuracy_], acc)) {
      bad_row(line, cat(column_label(col_accuracy_, "accuracy"), " '", f[col_accuracy_], "' is not an integer"));
      continue;
    }
    if (options_.bbox && !options_.bbox->contains(lat, lon)) { ++stats_.outside_bbox; continue; }
    if (options_.min_accuracy > 0 && acc < options_.min_accuracy) { ++stats_.low_accuracy; continue; }
    if (const int first = seen_ids_.insert(id, line)) {
      std::string where = cat(at(line), ": photo id ", id, " repeats the id of line ", file_line(first));
      if (options_.duplicate_ids == DuplicateIds::error)
        throw DataError(where + " (duplicate_ids: keep_first keeps the first row of each id and drops the others)");
      ++stats_.duplicate_ids;
      if (stats_.first_duplicates.size() < 5) stats_.first_duplicates.push_back(std::move(where));
      continue;
    }
    out.id.push_back(id);
    out.lat.push_back(lat);
    out.lon.push_back(lon);
    out.time.push_back(t);
    out.user.emplace_back(f[col_user_]);
    out.accuracy.push_back(acc);
    if (options_.keep_text) {
      const std::string_view title = col_title_ >= 0 ? f[col_title_] : std::string_view();
      const std::string_view description = col_description_ >= 0 ? f[col_description_] : std::string_view();
      out.title.push_back(options_.url_decode_text ? url_decode(title) : std::string(title));
      out.description.push_back(options_.url_decode_text ? url_decode(description) : std::string(description));
    }
    if (!image_template_.empty()) {
      out.path.push_back(image_path(f, id));
    } else if (col_path_ >= 0) {
      const std::string_view p = trim(f[col_path_]);
      // Relative to the CSV's folder, so the metadata and its images move together.
      if (p.empty() || csv_dir_.empty() || std::filesystem::path(p).is_absolute()) out.path.emplace_back(p);
      else out.path.push_back((std::filesystem::path(csv_dir_) / p).string());
    }
    ++stats_.emitted;
  }
  return !out.id.empty();
}

Record photo_record(PhotoColumns& cols, bool has_path) {
  const auto n = static_cast<std::int64_t>(cols.size());
  Record r;
  r.set("id", Array::from_vector<std::int64_t>({n}, std::move(cols.id)));
  r.set("lat", Array::from_vector<double>({n}, std::move(cols.lat)));
  r.set("lon", Array::from_vector<double>({n}, std::move(cols.lon)));
  r.set("time", Array::from_vector<std::int64_t>({n}, std::move(cols.time)));
  r.set("user", Array::strings(std::move(cols.user)));
  r.set("accuracy", Array::from_vector<std::int64_t>({n}, std::move(cols.accuracy)));
  if (!cols.title.empty() || n == 0) {
    r.set("title", Array::strings(std::move(cols.title)));
    r.set("description", Array::strings(std::move(cols.description)));
  }
  if (has_path) r.set("path", Array::strings(std::move(cols.path)));
  cols = PhotoColumns();
  return r;
}

std::string describe(const CsvReadStats& s) {
  std::string out = cat(s.emitted, " of ", s.rows, " rows emitted; ");
  if (s.no_coordinates > 0) out += cat(s.no_coordinates, " without coordinates, ");
  if (s.videos > 0) out += cat(s.videos, " videos, ");
  if (s.duplicate_ids > 0) out += cat(s.duplicate_ids, " repeated ids (first row kept), ");
  return out + cat(s.outside_bbox, " outside bbox, ", s.low_accuracy, " below min_accuracy, ", s.bad_rows,
                   " bad rows skipped");
}

PhotoColumns read_photos_csv(const std::string& path, const CsvReadOptions& options, CsvReadStats* stats) {
  PhotoCsvReader reader(path, options);
  PhotoColumns all, batch;
  while (reader.next(1 << 16, batch)) {
    auto append = [](auto& dst, auto& src) {
      dst.insert(dst.end(), std::make_move_iterator(src.begin()), std::make_move_iterator(src.end()));
    };
    append(all.id, batch.id); append(all.lat, batch.lat); append(all.lon, batch.lon);
    append(all.time, batch.time); append(all.user, batch.user); append(all.accuracy, batch.accuracy);
    append(all.title, batch.title); append(all.description, batch.description); append(all.path, batch.path);
  }
  if (stats) *stats = reader.stats();
  return all;
}

}  // namespace embedflow::geo
