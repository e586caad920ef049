#include "core/exif.hpp"

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <vector>

#include <libexif/exif-data.h>
#include <libexif/exif-log.h>
#include <libexif/exif-utils.h>

namespace embedflow::image {
namespace {

const unsigned char kExifHeader[6] = {'E', 'x', 'i', 'f', 0, 0};
const unsigned char kPngSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

bool starts_with(const unsigned char* data, std::size_t size, const unsigned char* prefix, std::size_t n) {
  return size >= n && std::memcmp(data, prefix, n) == 0;
}

bool is_tiff_header(const unsigned char* data, std::size_t size) {
  return size >= 4 && ((data[0] == 'I' && data[1] == 'I' && data[2] == 42 && data[3] == 0) ||
                       (data[0] == 'M' && data[1] == 'M' && data[2] == 0 && data[3] == 42));
}

std::uint32_t be32(const unsigned char* p) {
  return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) | p[3];
}

ExifBlock block_at(std::size_t offset, std::size_t size) {
  ExifBlock b;
  b.status = ExifBlock::Status::found;
  b.offset = offset;
  b.size = size;
  return b;
}

ExifBlock need(std::size_t bytes) {
  ExifBlock b;
  b.status = ExifBlock::Status::need_more;
  b.need = bytes;
  return b;
}

ExifBlock malformed(std::string problem) {
  ExifBlock b;
  b.status = ExifBlock::Status::malformed;
  b.problem = std::move(problem);
  return b;
}

std::string hex_byte(unsigned char b) {
  char h[3];
  std::snprintf(h, sizeof h, "%02x", b);
  return h;
}

ExifBlock locate_in_jpeg(const unsigned char* data, std::size_t size) {
  std::size_t pos = 2;  // after SOI
  for (;;) {
    if (pos + 2 > size) return need(pos + 4);
    if (data[pos] != 0xFF) return malformed("JPEG: expected a marker at byte " + std::to_string(pos) + ", found 0x" + hex_byte(data[pos]));
    const unsigned char marker = data[pos + 1];
    if (marker == 0xFF) {  // fill byte before a marker
      ++pos;
      continue;
    }
    // Markers without a length: TEM, RSTn. SOS starts the scan and EOI ends the file: the
    // metadata segments all come before them.
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) {
      pos += 2;
      continue;
    }
    if (marker == 0xDA || marker == 0xD9) return ExifBlock{};
    if (pos + 4 > size) return need(pos + 4);
    const std::size_t length = (std::size_t(data[pos + 2]) << 8) | data[pos + 3];
    if (length < 2)
      return malformed("JPEG: segment 0xFF" + hex_byte(marker) + " at byte " + std::to_string(pos) + " declares length " +
                       std::to_string(length));
    const std::size_t payload = pos + 4, end = pos + 2 + length;
    if (marker == 0xE1 && end >= payload + 6 && payload + 6 <= size && starts_with(data + payload, size - payload, kExifHeader, 6)) {
      if (end > size) return need(end);
      return block_at(payload, length - 2);
    }
    if (marker == 0xE1 && payload + 6 > size && end >= payload + 6) return need(std::max(end, payload + 6));
    pos = end;
  }
}

ExifBlock locate_in_png(const unsigned char* data, std::size_t size) {
  std::size_t pos = 8;
  for (;;) {
    if (pos + 8 > size) return need(pos + 8);
    const std::uint32_t length = be32(data + pos);
    if (length > 0x7fffffffu) return malformed("PNG: chunk at byte " + std::to_string(pos) + " declares " +
                                               std::to_string(length) + " bytes (more than 2^31 - 1)");
    const std::string type(reinterpret_cast<const char*>(data + pos + 4), 4);
    const std::size_t payload = pos + 8, end = payload + length + 4;  // + CRC
    if (type == "IDAT" || type == "IEND") return ExifBlock{};
    if (type == "eXIf") {
      if (payload + length > size) return need(payload + length);
      return block_at(payload, length);
    }
    pos = end;
  }
}

// libexif reports what it finds wrong through its log; the first complaint of corrupt data is
// kept for the message when the block turns out unusable.
struct LogCapture {
  std::string first_corruption;
};

void capture_log(ExifLog*, ExifLogCode code, const char* domain, const char* format, va_list args, void* user) {
  auto* capture = static_cast<LogCapture*>(user);
  if (code != EXIF_LOG_CODE_CORRUPT_DATA || !capture->first_corruption.empty()) return;
  char text[512];
  std::vsnprintf(text, sizeof text, format, args);
  capture->first_corruption = std::string(domain ? domain : "libexif") + ": " + text;
}

struct ExifDataDeleter {
  void operator()(ExifData* d) const { exif_data_unref(d); }
};
struct ExifLogDeleter {
  void operator()(ExifLog* l) const { exif_log_unref(l); }
};

// The entry's values as text (ASCII tags), without trailing NULs and spaces.
std::string ascii_value(const ExifEntry* e) {
  std::string s(reinterpret_cast<const char*>(e->data), e->size);
  const std::size_t nul = s.find('\0');
  if (nul != std::string::npos) s.resize(nul);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.pop_back();
  std::size_t start = 0;
  while (start < s.size() && s[start] == ' ') ++start;
  return s.substr(start);
}

class TagReader {
 public:
  TagReader(ExifData* data, std::string& error) : data_(data), order_(exif_data_get_byte_order(data)), error_(error) {}

  ExifEntry* entry(ExifIfd ifd, ExifTag tag) const { return exif_content_get_entry(data_->ifd[ifd], tag); }

  // Checks an entry's format and count; false with the error set.
  bool expect(const ExifEntry* e, const char* name, ExifFormat format, unsigned long components, bool at_least = false) {
    if (e->format != format) return fail(name, std::string("expected format ") + exif_format_get_name(format) + ", found " +
                                                   (exif_format_get_name(e->format) ? exif_format_get_name(e->format) : "unknown"));
    if (at_least ? e->components < components : e->components != components)
      return fail(name, "expected " + std::string(at_least ? "at least " : "") + std::to_string(components) +
                            " components, found " + std::to_string(e->components));
    if (!e->data || e->size < exif_format_get_size(format) * e->components)
      return fail(name, "value cut off (" + std::to_string(e->size) + " bytes)");
    return true;
  }

  bool rational(const ExifEntry* e, const char* name, unsigned long i, double& out) {
    const ExifRational r = exif_get_rational(e->data + 8 * i, order_);
    if (r.denominator == 0)
      return fail(name, "zero denominator in component " + std::to_string(i + 1) + " (" + std::to_string(r.numerator) + "/0)");
    out = double(r.numerator) / double(r.denominator);
    return true;
  }

  bool fail(const char* name, const std::string& what) {
    error_ = std::string(name) + ": " + what;
    return false;
  }

 private:
  ExifData* data_;
  ExifByteOrder order_;
  std::string& error_;
};

bool parse_digits(const std::string& s, std::size_t at, std::size_t n, int& out) {
  out = 0;
  for (std::size_t i = at; i < at + n; ++i) {
    if (i >= s.size() || s[i] < '0' || s[i] > '9') return false;
    out = out * 10 + (s[i] - '0');
  }
  return true;
}

// "YYYY:MM:DD HH:MM:SS" (EXIF 2.32, 4.6.5) as seconds of the local clock since 1970.
bool parse_exif_datetime(const std::string& s, std::int64_t& out) {
  int y, mo, d, h, mi, se;
  if (s.size() < 19 || s[4] != ':' || s[7] != ':' || (s[10] != ' ' && s[10] != 'T') || s[13] != ':' || s[16] != ':') return false;
  if (!parse_digits(s, 0, 4, y) || !parse_digits(s, 5, 2, mo) || !parse_digits(s, 8, 2, d) || !parse_digits(s, 11, 2, h) ||
      !parse_digits(s, 14, 2, mi) || !parse_digits(s, 17, 2, se))
    return false;
  static const int kDays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (mo < 1 || mo > 12 || d < 1 || d > kDays[mo - 1] || h > 23 || mi > 59 || se > 60) return false;
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (mo == 2 && d == 29 && !leap) return false;
  // timegm: the calendar arithmetic of the C library, with no time zone involved.
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = se;
  out = static_cast<std::int64_t>(::timegm(&tm));
  return true;
}

// "+HH:MM" / "-HH:MM" (EXIF 2.31 OffsetTime*). Blank ("   :  ") counts as absent.
enum class OffsetText { ok, blank, bad };
OffsetText parse_offset(const std::string& s, int& seconds) {
  if (s.find_first_not_of(" :") == std::string::npos) return OffsetText::blank;
  int h, m;
  if (s.size() != 6 || (s[0] != '+' && s[0] != '-') || s[3] != ':' || !parse_digits(s, 1, 2, h) || !parse_digits(s, 4, 2, m) ||
      h > 14 || m > 59)
    return OffsetText::bad;
  seconds = (s[0] == '-' ? -1 : 1) * (h * 3600 + m * 60);
  return OffsetText::ok;
}

bool read_gps(TagReader& t, ExifFields& f) {
  ExifEntry* lat_ref = t.entry(EXIF_IFD_GPS, ExifTag(EXIF_TAG_GPS_LATITUDE_REF));
  ExifEntry* lat = t.entry(EXIF_IFD_GPS, ExifTag(EXIF_TAG_GPS_LATITUDE));
  ExifEntry* lon_ref = t.entry(EXIF_IFD_GPS, ExifTag(EXIF_TAG_GPS_LONGITUDE_REF));
  ExifEntry* lon = t.entry(EXIF_IFD_GPS, ExifTag(EXIF_TAG_GPS_LONGITUDE));
  f.has_gps_tags = lat_ref || lat || lon_ref || lon;
  if (!f.has_gps_tags) return true;
  // A position needs all four; some phones write the references alone when the fix failed.
  if (!lat) return t.fail("GPSLatitude", "missing (the GPS IFD has other position tags)");
  if (!lon) return t.fail("GPSLongitude", "missing (the GPS IFD has other position tags)");
  if (!lat_ref) return t.fail("GPSLatitudeRef", "missing (needed to tell N from S)");
  if (!lon_ref) return t.fail("GPSLongitudeRef", "missing (needed to tell E from W)");
  struct Axis {
    ExifEntry* value;
    ExifEntry* ref;
    const char* name;
    const char* ref_name;
    char positive, negative;
    double limit;
    double* out;
  } axes[] = {{lat, lat_ref, "GPSLatitude", "GPSLatitudeRef", 'N', 'S', 90, &f.lat},
              {lon, lon_ref, "GPSLongitude", "GPSLongitudeRef", 'E', 'W', 180, &f.lon}};
  for (Axis& a : axes) {
    if (!t.expect(a.ref, a.ref_name, EXIF_FORMAT_ASCII, 1, true)) return false;
    const std::string ref = ascii_value(a.ref);
    if (ref.size() != 1 || (ref[0] != a.positive && ref[0] != a.negative))
      return t.fail(a.ref_name, "'" + ref + "' is not " + a.positive + " or " + a.negative);
    if (!t.expect(a.value, a.name, EXIF_FORMAT_RATIONAL, 3)) return false;
    double dms[3];
    for (unsigned long i = 0; i < 3; ++i)
      if (!t.rational(a.value, a.name, i, dms[i])) return false;
    if (dms[1] >= 60 || dms[2] >= 60)
      return t.fail(a.name, "minutes and seconds must be below 60 (" + std::to_string(dms[1]) + ", " + std::to_string(dms[2]) + ")");
    const double degrees = dms[0] + dms[1] / 60.0 + dms[2] / 3600.0;
    if (!std::isfinite(degrees) || degrees > a.limit)
      return t.fail(a.name, std::to_string(degrees) + " degrees is outside [0, " + std::to_string(int(a.limit)) + "]");
    *a.out = ref[0] == a.negative ? -degrees : degrees;
  }
  f.has_gps = true;
  if (ExifEntry* e = t.entry(EXIF_IFD_GPS, ExifTag(EXIF_TAG_GPS_H_POSITIONING_ERROR))) {
    double m = 0;
    if (!t.expect(e, "GPSHPositioningError", EXIF_FORMAT_RATIONAL, 1) || !t.rational(e, "GPSHPositioningError", 0, m)) return false;
    f.h_positioning_error_m = m;
  }
  return true;
}

}  // namespace

ExifBlock locate_exif_block(const unsigned char* data, std::size_t size) {
  if (starts_with(data, size, kExifHeader, 6) || is_tiff_header(data, size)) return block_at(0, size);
  if (size >= 2 && data[0] == 0xFF && data[1] == 0xD8) return locate_in_jpeg(data, size);
  if (starts_with(data, size, kPngSignature, 8)) return locate_in_png(data, size);
  if (size < 8) return need(8);
  return malformed("neither a JPEG nor a PNG nor an EXIF block");
}

bool parse_exif_block(const unsigned char* data, std::size_t size, ExifFields& f, std::string& error) {
  f = ExifFields{};
  // libexif takes "Exif\0\0" + TIFF; PNG's eXIf chunk and HEIF's Exif item hold the TIFF alone.
  std::vector<unsigned char> prefixed;
  if (!starts_with(data, size, kExifHeader, 6)) {
    if (!is_tiff_header(data, size)) {
      error = "EXIF: the block starts with neither \"Exif\\0\\0\" nor a TIFF header (II*\\0 or MM\\0*)";
      return false;
    }
    prefixed.assign(kExifHeader, kExifHeader + 6);
    prefixed.insert(prefixed.end(), data, data + size);
    data = prefixed.data();
    size = prefixed.size();
  } else if (!is_tiff_header(data + 6, size - 6)) {
    error = "EXIF: no TIFF header (II*\\0 or MM\\0*) after \"Exif\\0\\0\"";
    return false;
  }
  if (size > 0xFFFFFFFFu) {
    error = "EXIF: block larger than 4 GiB";
    return false;
  }
  std::unique_ptr<ExifData, ExifDataDeleter> ed(exif_data_new());
  std::unique_ptr<ExifLog, ExifLogDeleter> log(exif_log_new());
  if (!ed || !log) {
    error = "EXIF: out of memory";
    return false;
  }
  LogCapture capture;
  exif_log_set_func(log.get(), capture_log, &capture);
  exif_data_log(ed.get(), log.get());
  // Keep the tags as stored: FOLLOW_SPECIFICATION would add default values for missing
  // mandatory tags, and tags newer than libexif's table (none of ours in 0.6.24) would be dropped.
  exif_data_unset_option(ed.get(), EXIF_DATA_OPTION_FOLLOW_SPECIFICATION);
  exif_data_unset_option(ed.get(), EXIF_DATA_OPTION_IGNORE_UNKNOWN_TAGS);
  exif_data_set_option(ed.get(), EXIF_DATA_OPTION_DONT_CHANGE_MAKER_NOTE);
  exif_data_load_data(ed.get(), data, static_cast<unsigned int>(size));

  bool any = false;
  for (int i = 0; i < EXIF_IFD_COUNT; ++i) any = any || (ed->ifd[i] && ed->ifd[i]->count > 0);
  if (!any) {
    error = "EXIF: no readable tag" + (capture.first_corruption.empty() ? std::string() : " (" + capture.first_corruption + ")");
    return false;
  }
  TagReader t(ed.get(), error);
  auto with_log = [&](bool ok) {
    // A damaged block often loses the tag that the message names; libexif's own complaint says why.
    if (!ok && !capture.first_corruption.empty()) error += " (" + capture.first_corruption + ")";
    return ok;
  };
  // The orientation first: a caller that only rotates pixels keeps it when a later tag is bad.
  if (ExifEntry* e = t.entry(EXIF_IFD_0, EXIF_TAG_ORIENTATION)) {
    if (!t.expect(e, "Orientation", EXIF_FORMAT_SHORT, 1)) return with_log(false);
    const int o = exif_get_short(e->data, exif_data_get_byte_order(ed.get()));
    if (o < 1 || o > 8) return with_log(t.fail("Orientation", std::to_string(o) + " is not 1..8"));
    f.orientation = o;
  }
  if (!read_gps(t, f)) return with_log(false);
  // No GPS tag, and libexif found damage: the position may be in the part it could not read
  // (a GPS IFD pointer past the block), so this is a damaged file, not a photo without a fix.
  if (!f.has_gps_tags && !capture.first_corruption.empty())
    return t.fail("EXIF", "damaged, no GPS tag readable (" + capture.first_corruption + ")");
  if (ExifEntry* e = t.entry(EXIF_IFD_EXIF, EXIF_TAG_DATE_TIME_ORIGINAL)) {
    if (!t.expect(e, "DateTimeOriginal", EXIF_FORMAT_ASCII, 1, true)) return with_log(false);
    const std::string text = ascii_value(e);
    // All blanks or zeros: the camera's clock was not set ("0000:00:00 00:00:00"); as absent.
    if (!text.empty() && text.find_first_not_of(" :0") != std::string::npos) {
      if (!parse_exif_datetime(text, f.local_time))
        return with_log(t.fail("DateTimeOriginal", "'" + text + "' is not YYYY:MM:DD HH:MM:SS"));
      f.has_time = true;
    }
  }
  if (ExifEntry* e = t.entry(EXIF_IFD_EXIF, EXIF_TAG_OFFSET_TIME_ORIGINAL)) {
    if (!t.expect(e, "OffsetTimeOriginal", EXIF_FORMAT_ASCII, 1, true)) return with_log(false);
    const std::string text = ascii_value(e);
    switch (parse_offset(text, f.offset_seconds)) {
      case OffsetText::ok: f.has_offset = true; break;
      case OffsetText::blank: break;
      case OffsetText::bad: return with_log(t.fail("OffsetTimeOriginal", "'" + text + "' is not +HH:MM or -HH:MM"));
    }
  }
  if (ExifEntry* e = t.entry(EXIF_IFD_0, EXIF_TAG_ARTIST)) {
    if (!t.expect(e, "Artist", EXIF_FORMAT_ASCII, 1, true)) return with_log(false);
    f.artist = ascii_value(e);
  }
  if (ExifEntry* e = t.entry(EXIF_IFD_EXIF, EXIF_TAG_BODY_SERIAL_NUMBER)) {
    if (!t.expect(e, "BodySerialNumber", EXIF_FORMAT_ASCII, 1, true)) return with_log(false);
    f.body_serial = ascii_value(e);
  }
  return true;
}

bool read_exif_header(const unsigned char* data, std::size_t size, ExifFields& fields, bool& found, std::string& error) {
  fields = ExifFields{};
  found = false;
  const ExifBlock b = locate_exif_block(data, size);
  switch (b.status) {
    case ExifBlock::Status::absent: return true;
    case ExifBlock::Status::malformed: error = b.problem; return false;
    case ExifBlock::Status::need_more:
      error = "EXIF: the file ends at byte " + std::to_string(size) + ", before its metadata does (byte " + std::to_string(b.need) +
              "): truncated";
      return false;
    case ExifBlock::Status::found: break;
  }
  found = true;
  return parse_exif_block(data + b.offset, b.size, fields, error);
}

int exif_orientation(const unsigned char* data, std::size_t size) {
  const ExifBlock b = locate_exif_block(data, size);
  if (b.status != ExifBlock::Status::found) return 1;
  ExifFields f;
  std::string error;
  // A bad GPS or time tag does not make the pixels sideways: parse_exif_block reads the
  // orientation before them, so it is kept whatever follows.
  parse_exif_block(data + b.offset, b.size, f, error);
  return f.orientation == 0 ? 1 : f.orientation;
}

}  // namespace embedflow::image
