#include "exif_writer.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <stdexcept>

#include <libexif/exif-data.h>
#include <libexif/exif-utils.h>

namespace gen_photos {
namespace {

// The UTC calendar fields of a unix time, and back (the C library's, no time zone involved).
std::tm utc_fields(std::int64_t t) {
  const std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  ::gmtime_r(&tt, &tm);
  return tm;
}

std::int64_t utc_seconds(int year, int month, int day, int hour) {
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  return static_cast<std::int64_t>(::timegm(&tm));
}

// Day of month of the n-th Sunday of (year, month).
int nth_sunday(int year, int month, int n) {
  const int weekday = utc_fields(utc_seconds(year, month, 1, 0)).tm_wday;  // 0 = Sunday
  return 1 + (7 - weekday) % 7 + 7 * (n - 1);
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
  const int y = utc_fields(utc_time).tm_year + 1900;
  // From 2007 (Energy Policy Act of 2005); before, the first Sunday of April to the last of October.
  const std::int64_t start = y >= 2007 ? utc_seconds(y, 3, nth_sunday(y, 3, 2), 7)   // 02:00 EST
                                       : utc_seconds(y, 4, nth_sunday(y, 4, 1), 7);
  const std::int64_t end = y >= 2007 ? utc_seconds(y, 11, nth_sunday(y, 11, 1), 6)   // 02:00 EDT
                                     : utc_seconds(y, 10, 31 - utc_fields(utc_seconds(y, 10, 31, 0)).tm_wday, 6);
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

  const std::tm local = utc_fields(r.utc_time + r.offset_seconds);
  char text[32];
  std::snprintf(text, sizeof text, "%04d:%02d:%02d %02d:%02d:%02d", local.tm_year + 1900, local.tm_mon + 1, local.tm_mday,
                local.tm_hour, local.tm_min, local.tm_sec);
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
