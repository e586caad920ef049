#include "exif_writer.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include <libexif/exif-data.h>
#include <libexif/exif-utils.h>

namespace gen_photos {
namespace {

// Days since 1970-01-01 (Howard Hinnant's days_from_civil).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  return era * 146097 + static_cast<std::int64_t>(yoe * 365 + yoe / 4 - yoe / 100 + doy) - 719468;
}

void civil_from_days(std::int64_t z, int& y, unsigned& m, unsigned& d) {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  d = doy - (153 * mp + 2) / 5 + 1;
  m = mp < 10 ? mp + 3 : mp - 9;
  y = static_cast<int>(static_cast<std::int64_t>(yoe) + era * 400 + (m <= 2));
}

// Day of month of the n-th Sunday of (y, m).
unsigned nth_sunday(int y, unsigned m, int n) {
  const std::int64_t first = days_from_civil(y, m, 1);
  const int weekday = static_cast<int>(((first % 7) + 11) % 7);  // 0 = Sunday (1970-01-01 was a Thursday)
  return static_cast<unsigned>(1 + (7 - weekday) % 7 + 7 * (n - 1));
}

ExifEntry* add_entry(ExifData* ed, ExifIfd ifd, ExifTag tag, ExifFormat format, unsigned long components) {
  ExifMem* mem = exif_mem_new_default();
  ExifEntry* e = exif_entry_new_mem(mem);
  const unsigned int size = exif_format_get_size(format) * static_cast<unsigned int>(components);
  e->data = static_cast<unsigned char*>(exif_mem_alloc(mem, size));
  if (!e->data) throw std::runtime_error("out of memory building EXIF");
  e->size = size;
  e->tag = tag;
  e->format = format;
  e->components = components;
  exif_content_add_entry(ed->ifd[ifd], e);
  exif_mem_unref(mem);
  exif_entry_unref(e);  // the IFD holds it
  return e;
}

void add_ascii(ExifData* ed, ExifIfd ifd, ExifTag tag, const std::string& text) {
  ExifEntry* e = add_entry(ed, ifd, tag, EXIF_FORMAT_ASCII, text.size() + 1);
  std::memcpy(e->data, text.c_str(), text.size() + 1);
}

void add_degrees(ExifData* ed, ExifTag tag, double degrees, ExifByteOrder order) {
  ExifEntry* e = add_entry(ed, EXIF_IFD_GPS, tag, EXIF_FORMAT_RATIONAL, 3);
  // Whole degrees and minutes, seconds to 1/10000 (about 3 mm): as phones write them.
  const double a = std::fabs(degrees);
  const auto total = static_cast<std::uint64_t>(std::llround(a * 3600.0 * 10000.0));
  const ExifRational parts[3] = {{static_cast<ExifLong>(total / 36000000), 1},
                                 {static_cast<ExifLong>(total / 600000 % 60), 1},
                                 {static_cast<ExifLong>(total % 600000), 10000}};
  for (int i = 0; i < 3; ++i) exif_set_rational(e->data + 8 * i, order, parts[i]);
}

}  // namespace

int new_york_offset(std::int64_t utc_time) {
  const std::int64_t day = (utc_time >= 0 ? utc_time : utc_time - 86399) / 86400;
  int y;
  unsigned m, d;
  civil_from_days(day, y, m, d);
  const std::int64_t start = days_from_civil(y, 3, nth_sunday(y, 3, 2)) * 86400 + 7 * 3600;   // 02:00 EST
  const std::int64_t end = days_from_civil(y, 11, nth_sunday(y, 11, 1)) * 86400 + 6 * 3600;   // 02:00 EDT
  return utc_time >= start && utc_time < end ? -4 * 3600 : -5 * 3600;
}

std::vector<unsigned char> make_exif_block(const ExifRecord& r) {
  ExifData* ed = exif_data_new();
  if (!ed) throw std::runtime_error("out of memory building EXIF");
  exif_data_unset_option(ed, EXIF_DATA_OPTION_FOLLOW_SPECIFICATION);
  const ExifByteOrder order = r.little_endian ? EXIF_BYTE_ORDER_INTEL : EXIF_BYTE_ORDER_MOTOROLA;
  exif_data_set_byte_order(ed, order);

  ExifEntry* o = add_entry(ed, EXIF_IFD_0, EXIF_TAG_ORIENTATION, EXIF_FORMAT_SHORT, 1);
  exif_set_short(o->data, order, static_cast<ExifShort>(r.orientation));
  add_ascii(ed, EXIF_IFD_0, EXIF_TAG_ARTIST, r.artist);

  const std::int64_t local = r.utc_time + r.offset_seconds;
  const std::int64_t day = (local >= 0 ? local : local - 86399) / 86400;
  const std::int64_t sec = local - day * 86400;
  int y;
  unsigned m, d;
  civil_from_days(day, y, m, d);
  char text[32];
  std::snprintf(text, sizeof text, "%04d:%02u:%02u %02d:%02d:%02d", y, m, d, static_cast<int>(sec / 3600),
                static_cast<int>(sec / 60 % 60), static_cast<int>(sec % 60));
  add_ascii(ed, EXIF_IFD_EXIF, EXIF_TAG_DATE_TIME_ORIGINAL, text);
  const int off = std::abs(r.offset_seconds);
  std::snprintf(text, sizeof text, "%c%02d:%02d", r.offset_seconds < 0 ? '-' : '+', off / 3600, off / 60 % 60);
  add_ascii(ed, EXIF_IFD_EXIF, EXIF_TAG_OFFSET_TIME_ORIGINAL, text);

  ExifEntry* v = add_entry(ed, EXIF_IFD_GPS, static_cast<ExifTag>(EXIF_TAG_GPS_VERSION_ID), EXIF_FORMAT_BYTE, 4);
  const unsigned char version[4] = {2, 3, 0, 0};
  std::memcpy(v->data, version, 4);
  add_ascii(ed, EXIF_IFD_GPS, static_cast<ExifTag>(EXIF_TAG_GPS_LATITUDE_REF), r.lat < 0 ? "S" : "N");
  add_degrees(ed, static_cast<ExifTag>(EXIF_TAG_GPS_LATITUDE), r.lat, order);
  add_ascii(ed, EXIF_IFD_GPS, static_cast<ExifTag>(EXIF_TAG_GPS_LONGITUDE_REF), r.lon < 0 ? "W" : "E");
  add_degrees(ed, static_cast<ExifTag>(EXIF_TAG_GPS_LONGITUDE), r.lon, order);
  if (r.h_error_m >= 0) {
    ExifEntry* h = add_entry(ed, EXIF_IFD_GPS, static_cast<ExifTag>(EXIF_TAG_GPS_H_POSITIONING_ERROR), EXIF_FORMAT_RATIONAL, 1);
    exif_set_rational(h->data, order, ExifRational{static_cast<ExifLong>(std::llround(r.h_error_m * 100)), 100});
  }

  unsigned char* raw = nullptr;
  unsigned int size = 0;
  exif_data_save_data(ed, &raw, &size);
  exif_data_unref(ed);
  if (!raw || size == 0) throw std::runtime_error("libexif could not write the EXIF block");
  std::vector<unsigned char> block(raw, raw + size);
  std::free(raw);
  return block;
}

std::vector<unsigned char> with_exif(const std::vector<unsigned char>& jpeg, const std::vector<unsigned char>& block) {
  if (jpeg.size() < 2 || jpeg[0] != 0xFF || jpeg[1] != 0xD8) throw std::runtime_error("not a JPEG");
  const std::size_t length = block.size() + 2;
  if (length > 0xFFFF) throw std::runtime_error("EXIF block too large for one APP1 segment");
  std::vector<unsigned char> out;
  out.reserve(jpeg.size() + length + 2);
  out.insert(out.end(), jpeg.begin(), jpeg.begin() + 2);
  out.push_back(0xFF);
  out.push_back(0xE1);
  out.push_back(static_cast<unsigned char>(length >> 8));
  out.push_back(static_cast<unsigned char>(length & 0xFF));
  out.insert(out.end(), block.begin(), block.end());
  out.insert(out.end(), jpeg.begin() + 2, jpeg.end());
  return out;
}

}  // namespace gen_photos
