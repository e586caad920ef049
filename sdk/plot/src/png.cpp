#include "embedflow/plot/png.hpp"

#include <opencv2/imgproc.hpp>

#include "chart_style.hpp"
#include "embedflow/error.hpp"

namespace embedflow {

void save_png(const std::string& path, const std::uint8_t* pixels, int height, int width, int channels,
              PixelOrder order) {
  if (channels != 1 && channels != 3) throw Error(cat(path, ": a PNG of ", channels, " channels; 1 or 3 can be written"));
  if (height <= 0 || width <= 0) throw Error(cat(path, ": an empty image (", height, " x ", width, ") cannot be written"));
  const cv::Mat view(height, width, channels == 1 ? CV_8UC1 : CV_8UC3, const_cast<std::uint8_t*>(pixels));
  cv::Mat bgr;
  if (channels == 3 && order == PixelOrder::rgb) cv::cvtColor(view, bgr, cv::COLOR_RGB2BGR);  // OpenCV encodes BGR
  else bgr = view;
  plot_style::write_image(path, bgr);
}

}  // namespace embedflow
