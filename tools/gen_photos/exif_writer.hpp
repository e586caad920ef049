// The EXIF block gen_photos --exif writes into each rendered JPEG, built with libexif: what a
// phone camera records (GPS position with its references and horizontal error, the time with
// its UTC offset, the photographer, the orientation), so the folder reader and the decoders'
// orientation handling are tested on real EXIF files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gen_photos {

struct ExifRecord {
  double lat = 0, lon = 0;          // signed degrees
  double h_error_m = -1;            // GPSHPositioningError; < 0: not written
  std::int64_t utc_time = 0;        // unix seconds
  int offset_seconds = 0;           // OffsetTimeOriginal; DateTimeOriginal is utc_time + this
  std::string artist;
  int orientation = 1;              // 1..8
  bool little_endian = false;       // TIFF byte order: II (true) or MM
};

// "Exif\0\0" + TIFF, as an APP1 segment's payload.
std::vector<unsigned char> make_exif_block(const ExifRecord& r);

// The JPEG `jpeg` with an APP1 segment holding `block` inserted right after SOI.
std::vector<unsigned char> with_exif(const std::vector<unsigned char>& jpeg, const std::vector<unsigned char>& block);

// New York's UTC offset at `utc_time`: -04:00 under daylight saving time, else -05:00. US rules:
// since 2007 from the second Sunday of March (02:00 local) to the first Sunday of November;
// before, from the first Sunday of April to the last Sunday of October.
int new_york_offset(std::int64_t utc_time);

}  // namespace gen_photos
