// EXIF metadata from the first bytes of a photo file: the block's place in a JPEG (APP1
// "Exif\0\0" segment) or PNG (eXIf chunk, before the first IDAT), and the tags embedflow reads
// from it -- GPS position and its horizontal error, when and where the photo was taken, who took
// it, and how the pixels are oriented. libexif parses the block; this file finds it, checks every
// value it takes (formats, component counts, zero denominators, ranges) and names the tag that
// is wrong. Standalone (the C++ standard library and libexif), so the fuzz target
// (fuzz/exif_header.cpp) builds it alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace embedflow::image {

// Where the EXIF block of a file's first bytes is.
struct ExifBlock {
  enum class Status {
    found,      // [offset, offset + size) holds it (libexif's input: "Exif\0\0" + TIFF, or TIFF)
    absent,     // the file has no EXIF block (a JPEG's scan or a PNG's IDAT came first)
    need_more,  // the block, or the walk towards it, goes past the bytes given: read `need` bytes
    malformed,  // not a JPEG or PNG, or its segments/chunks are inconsistent: `problem` says how
  };
  Status status = Status::absent;
  std::size_t offset = 0, size = 0;
  std::size_t need = 0;
  std::string problem;
};

// Finds the EXIF block in a file's first `size` bytes: a JPEG, a PNG, or a bare EXIF block
// ("Exif\0\0" or a TIFF header, as HEIF files store it), which is found whole.
ExifBlock locate_exif_block(const unsigned char* data, std::size_t size);

// What embedflow takes from EXIF. Values absent from the file keep their defaults.
struct ExifFields {
  bool has_gps = false;          // GPSLatitude, GPSLongitude and both references, all valid
  bool has_gps_tags = false;     // any of the four present (a partial fix is an error, not "no GPS")
  double lat = 0, lon = 0;       // signed degrees (S and W negative)
  double h_positioning_error_m = -1;  // GPSHPositioningError in metres; -1 when absent
  bool has_time = false;
  std::int64_t local_time = 0;   // DateTimeOriginal as seconds since 1970-01-01 of the local clock
  bool has_offset = false;
  int offset_seconds = 0;        // OffsetTimeOriginal (east of UTC positive)
  std::string artist;            // Artist (IFD0), trimmed
  std::string body_serial;       // BodySerialNumber (EXIF IFD), trimmed
  int orientation = 0;           // Orientation 1..8; 0 when absent
};

// Parses an EXIF block (as located above) with libexif and checks the tags ExifFields holds.
// False with `error` naming the tag and what is wrong ("GPSLatitude: zero denominator in
// component 2 (10/0)", "GPSLongitudeRef: missing") when a tag present is unusable or the block
// is not EXIF at all; a tag that is merely absent is not an error.
bool parse_exif_block(const unsigned char* data, std::size_t size, ExifFields& fields, std::string& error);

// locate_exif_block + parse_exif_block over a file's first bytes. True with `found` false when
// the file has no EXIF block; false with `error` when the bytes end before the block does
// (a truncated file), the container is malformed, or parse_exif_block refuses the block.
bool read_exif_header(const unsigned char* data, std::size_t size, ExifFields& fields, bool& found, std::string& error);

// The Orientation tag of a JPEG or PNG (1..8), or 1 when it is absent or unreadable (a photo
// whose EXIF is damaged is shown as stored, as viewers do).
int exif_orientation(const unsigned char* data, std::size_t size);

}  // namespace embedflow::image
