// JPEG decoding through libjpeg(-turbo)'s own API rather than cv::imdecode, for three things
// OpenCV does not offer: (1) libjpeg's warnings ("Premature end of JPEG file", "Corrupt JPEG
// data: ...") are errors, so a truncated file is refused instead of decoding with grey rows;
// (2) DCT-domain downscaling by 1/2, 1/4 or 1/8 (libjpeg-turbo's scaled IDCT, as OpenCV's
// IMREAD_REDUCED_* modes); (3) decoding only a region: rows above it are skipped
// (jpeg_skip_scanlines), columns outside it are not transformed (jpeg_crop_scanline) and
// decoding stops after its last row.
//
// Pixels equal cv::imdecode's (same library, same DCT method and upsampling): RGB for colour,
// libjpeg's own luma for grey. CMYK/YCCK files are left to OpenCV (is_plain_jpeg).
#pragma once

#include <cstddef>
#include <string>

#include <opencv2/core.hpp>

namespace embedflow::image {

// True when the bytes start with a JPEG SOI marker.
bool looks_like_jpeg(const unsigned char* data, std::size_t size);

struct JpegHeader {
  int width = 0, height = 0;
  int components = 0;
  bool plain = false;  // grey or YCbCr/RGB: decodable here; CMYK/YCCK is not
};

// Reads the header only (cheap: no entropy decoding). Returns false and sets `error` when the
// header is unreadable.
bool read_jpeg_header(const unsigned char* data, std::size_t size, JpegHeader& header, std::string& error);

struct JpegDecodeOptions {
  bool color = true;  // RGB; false: grey
  int reduce = 1;     // 1, 2, 4 or 8: decode at 1/reduce of the size (scaled IDCT)
  // Only this rectangle of the reduced image (empty: all of it). The result is exactly this
  // rectangle.
  cv::Rect region;
};

// Size of the image decoded at 1/reduce (libjpeg rounds up).
cv::Size reduced_size(int width, int height, int reduce);

// Decodes; returns an empty Mat and sets `error` (libjpeg's message) on any error or warning.
// When decoding stops early (a region above the bottom), the file must still end with an EOI
// marker, so a truncated file is refused whichever rows were asked for.
cv::Mat decode_jpeg(const unsigned char* data, std::size_t size, const JpegDecodeOptions& o, std::string& error);

}  // namespace embedflow::image
