#include "embedflow/plot/heatmap.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "chart_style.hpp"
#include "embedflow/error.hpp"

namespace embedflow {

namespace {

const int kFont = cv::FONT_HERSHEY_SIMPLEX;

std::string short_number(double v) {
  char buf[32];
  if (v == std::floor(v) && std::fabs(v) < 1e7) std::snprintf(buf, sizeof buf, "%.0f", v);
  else std::snprintf(buf, sizeof buf, "%.2g", v);
  return buf;
}

void centred(cv::Mat& img, const std::string& s, cv::Point centre, double scale, cv::Scalar color) {
  int base = 0;
  const cv::Size sz = cv::getTextSize(s, kFont, scale, 1, &base);
  cv::putText(img, s, {centre.x - sz.width / 2, centre.y + sz.height / 2}, kFont, scale, color, 1, cv::LINE_AA);
}

}  // namespace

void save_heatmap(const std::string& path, const HeatMap& map) {
  const std::size_t rows = map.values.size(), cols = rows ? map.values[0].size() : 0;
  if (map.row_names.size() != rows || map.col_names.size() != cols)
    throw Error(cat(path, ": heat map has ", rows, " x ", cols, " values but ", map.row_names.size(), " row and ",
                    map.col_names.size(), " column names"));
  for (const auto& r : map.values)
    if (r.size() != cols) throw Error(cat(path, ": heat map rows differ in length"));
  // Keep the picture under about 1600 pixels whatever the number of labels.
  const int cell = std::max(4, std::min(map.cell, static_cast<int>(1400 / std::max<std::size_t>(1, std::max(rows, cols)))));
  const bool labels = cell >= 14, numbers = cell >= 28;
  const int left = 110, right = 30, bottom = 70;
  const int W = left + cell * static_cast<int>(cols) + right;
  // The title wraps to the grid's width instead of running off a narrow picture.
  const plot_style::TitleLayout title = plot_style::layout_title(map.title, W);
  const int top = 50 + std::max(20, title.height());
  const int H = top + cell * static_cast<int>(rows) + bottom;
  cv::Mat img(H, W, CV_8UC3, cv::Scalar(255, 255, 255));
  const cv::Scalar ink(30, 30, 30);
  double hi = 0;
  for (const auto& r : map.values)
    for (double v : r)
      if (std::isfinite(v)) hi = std::max(hi, v);
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j) {
      const double v = map.values[i][j];
      const double t = hi > 0 && std::isfinite(v) ? std::clamp(v / hi, 0.0, 1.0) : 0.0;
      // White to a dark blue (BGR).
      const cv::Scalar color(255 - t * (255 - 140), 255 - t * (255 - 60), 255 - t * (255 - 20));
      const cv::Rect box(left + static_cast<int>(j) * cell, top + static_cast<int>(i) * cell, cell, cell);
      cv::rectangle(img, box, color, cv::FILLED);
      cv::rectangle(img, box, cv::Scalar(210, 210, 210), 1);
      if (numbers)
        centred(img, short_number(v), {box.x + cell / 2, box.y + cell / 2}, 0.4,
                t > 0.55 ? cv::Scalar(255, 255, 255) : ink);
    }
  if (labels) {
    for (std::size_t i = 0; i < rows; ++i)
      centred(img, map.row_names[i].substr(0, 10), {left - 40, top + static_cast<int>(i) * cell + cell / 2}, 0.4, ink);
    for (std::size_t j = 0; j < cols; ++j)
      centred(img, map.col_names[j].substr(0, 6), {left + static_cast<int>(j) * cell + cell / 2, top - 12}, 0.4, ink);
  }
  plot_style::draw_title(img, title, 6);
  centred(img, map.x_label, {left + cell * static_cast<int>(cols) / 2, top - 38}, 0.5, ink);
  centred(img, map.y_label, {left / 2 - 10, H - bottom / 2}, 0.5, ink);
  plot_style::write_image(path, img);
}

}  // namespace embedflow
