#include "draw.hpp"

#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include <embedflow/error.hpp>
#include <embedflow/plot/png.hpp>

namespace embedflow::crowd {
namespace {

const cv::Scalar kBlack(0, 0, 0), kGrey(190, 190, 190);
const int kFont = cv::FONT_HERSHEY_SIMPLEX;

void text(cv::Mat& m, const std::string& s, int x, int y, double scale = 0.45, cv::Scalar colour = kBlack) {
  cv::putText(m, s, cv::Point(x, y), kFont, scale, colour, 1, cv::LINE_AA);
}

// Drawn in BGR, OpenCV's order; the plot library encodes and writes it like every other image.
void save(const std::string& path, const cv::Mat& m) {
  save_png(path, m.ptr<std::uint8_t>(), m.rows, m.cols, m.channels(), PixelOrder::bgr);
}

std::string fmt(double v, const char* f = "%.2f") {
  char b[32];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

}  // namespace

void make_parent(const std::string& path) {
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
}

void write_heatmap(const std::string& path, const std::string& title, const std::vector<std::vector<double>>& values,
                   const std::vector<std::string>& row_labels, const std::vector<std::string>& col_labels,
                   const std::string& row_axis, const std::string& col_axis) {
  const int cell = 64, left = 150, top = 110;
  const int rows = static_cast<int>(values.size()), cols = rows ? static_cast<int>(values[0].size()) : 0;
  cv::Mat m(top + rows * cell + 20, left + cols * cell + 20, CV_8UC3, cv::Scalar(255, 255, 255));
  text(m, title, 10, 24, 0.6);
  text(m, col_axis, left, 52);
  text(m, row_axis, 10, top - 8);
  for (int j = 0; j < cols; ++j) text(m, col_labels[static_cast<std::size_t>(j)].substr(0, 9), left + j * cell + 4, top - 12, 0.4);
  for (int i = 0; i < rows; ++i) {
    text(m, row_labels[static_cast<std::size_t>(i)].substr(0, 18), 10, top + i * cell + cell / 2 + 5, 0.45);
    for (int j = 0; j < cols; ++j) {
      const double v = std::clamp(values[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)], 0.0, 1.0);
      const cv::Scalar c(255, 255 - 190 * v, 255 - 230 * v);  // BGR: white -> blue
      cv::Rect r(left + j * cell, top + i * cell, cell, cell);
      cv::rectangle(m, r, c, cv::FILLED);
      cv::rectangle(m, r, kGrey, 1);
      text(m, fmt(v), r.x + 14, r.y + cell / 2 + 5, 0.45, v > 0.6 ? cv::Scalar(255, 255, 255) : kBlack);
    }
  }
  save(path, m);
}

void write_strips(const std::string& path, const std::vector<std::string>& labels,
                  const std::vector<std::vector<Thumb>>& strips, int width, int strip_height, int scale) {
  const int label_h = 22;
  cv::Mat m(static_cast<int>(strips.size()) * (strip_height + label_h) + 10, width, CV_8UC3, cv::Scalar(255, 255, 255));
  for (std::size_t k = 0; k < strips.size(); ++k) {
    const int top = static_cast<int>(k) * (strip_height + label_h);
    text(m, labels[k], 8, top + 16, 0.5);
    cv::line(m, {0, top + label_h + strip_height / 2}, {width, top + label_h + strip_height / 2}, kGrey, 1);
    for (const Thumb& t : strips[k]) {
      cv::Mat tile(t.h, t.w, t.c == 3 ? CV_8UC3 : CV_8UC1, const_cast<unsigned char*>(t.pixels)), bgr, big;
      if (t.c == 3) cv::cvtColor(tile, bgr, cv::COLOR_RGB2BGR);
      else cv::cvtColor(tile, bgr, cv::COLOR_GRAY2BGR);
      cv::resize(bgr, big, cv::Size(t.w * scale, t.h * scale), 0, 0, cv::INTER_NEAREST);
      const int x = std::clamp(static_cast<int>(t.x * (width - big.cols)), 0, width - big.cols);
      const int y = top + label_h + std::clamp(static_cast<int>(t.y * (strip_height - big.rows)), 0, std::max(0, strip_height - big.rows));
      if (y + big.rows <= m.rows) big.copyTo(m(cv::Rect(x, y, big.cols, big.rows)));
    }
  }
  save(path, m);
}

}  // namespace embedflow::crowd
