// File bytes through the image header parser every image node runs before decoding
// (plugins/image/core/image_header.cpp): any input must give a size or an error, never read
// outside the buffer or overflow. A size once read must not change when bytes are appended
// (the parser reads a prefix of the file and nothing after it decides the size).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/image_header.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using embedflow::image::ImageHeader;
  ImageHeader h;
  std::string error;
  // An exact-size heap copy, so AddressSanitizer catches a read one byte past the end.
  std::vector<unsigned char> bytes(data, data + size);
  const bool ok = embedflow::image::read_image_header(bytes.data(), bytes.size(), h, error);
  if (!ok && error.empty()) std::abort();  // a refusal always says why
  if (ok) {
    (void)h.pixels();
    bytes.push_back('\n');  // ends a text header's last token, as it would in a file
    ImageHeader again;
    std::string e2;
    if (!embedflow::image::read_image_header(bytes.data(), bytes.size(), again, e2) || again.width != h.width ||
        again.height != h.height)
      std::abort();
  }
  return 0;
}
