#include "core/jpeg.hpp"

#include <algorithm>
#include <csetjmp>
#include <cstdio>

#include <jpeglib.h>

namespace embedflow::image {
namespace {

// libjpeg reports errors through callbacks; setjmp/longjmp is its documented way out (C++
// exceptions would unwind through C frames). Everything with a destructor lives outside the
// jump region or in the frame that calls setjmp.
struct ErrorManager {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void on_error(j_common_ptr c) {
  auto* e = reinterpret_cast<ErrorManager*>(c->err);
  (*c->err->format_message)(c, e->message);
  std::longjmp(e->jump, 1);
}

// Level -1 is a warning: libjpeg's word for corrupt data it decoded anyway (a truncated file
// becomes grey rows). Strict decoding treats it as the error it is. Levels >= 0 are traces.
void on_message(j_common_ptr c, int level) {
  if (level < 0) on_error(c);
}

struct Decompressor {
  jpeg_decompress_struct info{};
  ErrorManager err{};
  Decompressor() {
    info.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = on_error;
    err.pub.emit_message = on_message;
    err.message[0] = '\0';
  }
  ~Decompressor() { jpeg_destroy_decompress(&info); }
  Decompressor(const Decompressor&) = delete;
  Decompressor& operator=(const Decompressor&) = delete;
};

bool plain_color_space(J_COLOR_SPACE s) { return s == JCS_GRAYSCALE || s == JCS_YCbCr || s == JCS_RGB; }

// Whether an EOI marker (FF D9) ends the data, allowing trailing bytes some cameras append.
// Entropy-coded data stuffs every FF with 00, so FF D9 only appears as a marker.
bool ends_with_eoi(const unsigned char* data, std::size_t size) {
  const std::size_t tail = std::min<std::size_t>(size, 4096);
  for (std::size_t i = size; i >= size - tail + 2; --i)
    if (data[i - 2] == 0xFF && data[i - 1] == 0xD9) return true;
  return false;
}

}  // namespace

bool looks_like_jpeg(const unsigned char* data, std::size_t size) {
  return size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF;
}

cv::Size reduced_size(int width, int height, int reduce) {
  return cv::Size((width + reduce - 1) / reduce, (height + reduce - 1) / reduce);
}

bool read_jpeg_header(const unsigned char* data, std::size_t size, JpegHeader& header, std::string& error) {
  Decompressor d;
  if (setjmp(d.err.jump)) {
    error = d.err.message;
    return false;
  }
  jpeg_create_decompress(&d.info);
  jpeg_mem_src(&d.info, data, static_cast<unsigned long>(size));
  jpeg_read_header(&d.info, TRUE);
  header.width = static_cast<int>(d.info.image_width);
  header.height = static_cast<int>(d.info.image_height);
  header.components = d.info.num_components;
  header.plain = plain_color_space(d.info.jpeg_color_space);
  return true;
}

cv::Mat decode_jpeg(const unsigned char* data, std::size_t size, const JpegDecodeOptions& o, std::string& error) {
  if (o.reduce != 1 && o.reduce != 2 && o.reduce != 4 && o.reduce != 8) {
    error = "JPEG reduce must be 1, 2, 4 or 8";
    return {};
  }
  Decompressor d;
  cv::Mat buffer;  // outlives a longjmp: declared before setjmp, only assigned through calls
  if (setjmp(d.err.jump)) {
    error = d.err.message;
    return {};
  }
  jpeg_create_decompress(&d.info);
  jpeg_mem_src(&d.info, data, static_cast<unsigned long>(size));
  jpeg_read_header(&d.info, TRUE);
  if (!plain_color_space(d.info.jpeg_color_space)) {
    error = "CMYK/YCCK JPEG (not decoded here)";
    return {};
  }
  d.info.out_color_space = o.color ? JCS_RGB : JCS_GRAYSCALE;
  d.info.scale_num = 1;
  d.info.scale_denom = static_cast<unsigned int>(o.reduce);
  jpeg_start_decompress(&d.info);
  const int full_w = static_cast<int>(d.info.output_width), full_h = static_cast<int>(d.info.output_height);
  const cv::Rect region = o.region.empty() ? cv::Rect(0, 0, full_w, full_h) : o.region;
  if (region.x < 0 || region.y < 0 || region.x + region.width > full_w || region.y + region.height > full_h) {
    error = "JPEG region outside the image";
    jpeg_abort_decompress(&d.info);
    return {};
  }
  // Chroma upsampling reads neighbouring samples: a decode cut exactly at the region's edges
  // would replicate its border instead. A margin of one iMCU (16 px) keeps the region's own
  // pixels identical to a full decode's.
  const cv::Rect padded = (region - cv::Point(16, 16) + cv::Size(32, 32)) & cv::Rect(0, 0, full_w, full_h);
  // Columns: libjpeg widens the span to whole iMCUs; the result is cut back below.
  JDIMENSION x0 = static_cast<JDIMENSION>(padded.x), span = static_cast<JDIMENSION>(padded.width);
  if (padded.width < full_w) jpeg_crop_scanline(&d.info, &x0, &span);
  const int channels = d.info.output_components;
  buffer.create(padded.height, static_cast<int>(span), CV_8UC(channels));
  if (padded.y > 0) jpeg_skip_scanlines(&d.info, static_cast<JDIMENSION>(padded.y));
  for (int row = 0; row < padded.height;) {
    JSAMPROW line = buffer.ptr<unsigned char>(row);
    row += static_cast<int>(jpeg_read_scanlines(&d.info, &line, 1));
  }
  if (d.info.output_scanline < d.info.output_height) {
    jpeg_abort_decompress(&d.info);
    if (!ends_with_eoi(data, size)) {
      error = "Premature end of JPEG file (no EOI marker)";
      return {};
    }
  } else {
    jpeg_finish_decompress(&d.info);
  }
  const cv::Rect inside(region.x - static_cast<int>(x0), region.y - padded.y, region.width, region.height);
  if (inside.size() == buffer.size()) return buffer;
  return buffer(inside);
}

}  // namespace embedflow::image
