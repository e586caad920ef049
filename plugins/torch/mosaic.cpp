#include "mosaic.hpp"

#include <embedflow/embedflow.hpp>
#include <embedflow/plot/png.hpp>
#include <opencv2/core.hpp>

#include <algorithm>

namespace embedflow::torchfam {

void write_reconstruction_mosaic(const std::string& path, const float* originals, const float* reconstructions,
                                 std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t cols,
                                 std::int64_t scale) {
  if (c != 1 && c != 3) throw DataError(cat("mosaic ", path, ": images have ", c, " channels; only 1 or 3 can be drawn"));
  if (n <= 0) return;
  cols = std::max<std::int64_t>(1, std::min(cols, n));
  const std::int64_t rows = (n + cols - 1) / cols, gap = 2;
  const std::int64_t cell_h = h * scale + gap, cell_w = w * scale + gap;
  cv::Mat canvas(int(2 * rows * cell_h + gap), int(cols * cell_w + gap), CV_8UC3, cv::Scalar(128, 128, 128));
  const std::int64_t plane = h * w;
  for (std::int64_t i = 0; i < n; ++i) {
    for (int which = 0; which < 2; ++which) {
      const float* img = (which == 0 ? originals : reconstructions) + i * c * plane;
      const std::int64_t top = (2 * (i / cols) + which) * cell_h + gap, left = (i % cols) * cell_w + gap;
      for (std::int64_t y = 0; y < h * scale; ++y) {
        auto* row = canvas.ptr<cv::Vec3b>(int(top + y));
        for (std::int64_t x = 0; x < w * scale; ++x) {
          const std::int64_t p = (y / scale) * w + x / scale;
          cv::Vec3b& px = row[left + x];
          for (int k = 0; k < 3; ++k) {
            // CHW RGB -> OpenCV's BGR; grey fills all three.
            float v = img[(c == 1 ? 0 : 2 - k) * plane + p];
            px[k] = static_cast<unsigned char>(std::clamp(v, 0.0f, 1.0f) * 255.0f + 0.5f);
          }
        }
      }
    }
  }
  save_png(path, canvas.data, canvas.rows, canvas.cols, 3, PixelOrder::bgr);
}

}  // namespace embedflow::torchfam
