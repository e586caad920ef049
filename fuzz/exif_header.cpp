// A photo file's first bytes through the EXIF reader geo.photo_folder and the decoders run
// (plugins/image/core/exif.cpp over libexif): any input must give fields or an error naming
// what is wrong, never read outside the buffer, overflow or leak. Fields once accepted must be
// in range: a position within [-90, 90] x [-180, 180], an orientation 0..8, a valid UTC offset.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/exif.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace embedflow::image;
  // An exact-size heap copy, so AddressSanitizer catches a read one byte past the end.
  const std::vector<unsigned char> bytes(data, data + size);
  ExifFields f;
  bool found = false;
  std::string error;
  const bool ok = read_exif_header(bytes.data(), bytes.size(), f, found, error);
  if (!ok && error.empty()) std::abort();  // a refusal always says why
  if (ok && f.has_gps &&
      (!std::isfinite(f.lat) || !std::isfinite(f.lon) || std::fabs(f.lat) > 90 || std::fabs(f.lon) > 180))
    std::abort();
  if (ok && (f.orientation < 0 || f.orientation > 8)) std::abort();
  if (ok && f.has_offset && std::abs(f.offset_seconds) > 14 * 3600) std::abort();
  // The bytes as a bare EXIF block (a PNG eXIf chunk or a HEIF Exif item), and the decoders' check.
  ExifFields g;
  std::string e2;
  if (!parse_exif_block(bytes.data(), bytes.size(), g, e2) && e2.empty()) std::abort();
  const int o = exif_orientation(bytes.data(), bytes.size());
  if (o < 1 || o > 8) std::abort();
  return 0;
}
