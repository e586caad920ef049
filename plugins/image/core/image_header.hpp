// Image dimensions from a file's first bytes, without decoding: the size check every node that
// decodes files runs before it lets a decoder allocate (a 1 MB PNG may declare 32768 x 32768
// pixels, several GB decoded). Plain C++ with no library behind it, so the fuzz target
// (fuzz/image_header.cpp) builds it alone.
//
// Formats: the ones the image readers decode (cv::imdecode or libjpeg-turbo) and whose size the
// header states -- PNG (IHDR), JPEG (the first SOF marker), BMP (core and info headers), TIFF
// (the first IFD's ImageWidth/ImageLength, classic and BigTIFF, either byte order), WebP (VP8,
// VP8L, VP8X), PNM (P1-P6), PAM (P7), PFM (PF, Pf), Sun raster and Radiance HDR. Any other
// bytes are refused: a format whose size cannot be known before decoding is not decoded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace embedflow::image {

struct ImageHeader {
  const char* format = "";  // "PNG", "JPEG", ...
  std::uint64_t width = 0, height = 0;
  // width x height, saturated at UINT64_MAX.
  std::uint64_t pixels() const;
};

// Reads the format and size. False with `error` set (no format or file name in it: callers add
// those) when the bytes are no format listed above or the header is cut off or inconsistent.
bool read_image_header(const unsigned char* data, std::size_t size, ImageHeader& header, std::string& error);

}  // namespace embedflow::image
