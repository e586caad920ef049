#include "embedflow/plot/bar_chart.hpp"

#include <algorithm>
#include <cmath>
#include <opencv2/imgproc.hpp>

#include "chart_style.hpp"
#include "embedflow/plot/line_chart.hpp"

namespace embedflow {

using namespace plot_style;

void save_bar_chart(const std::string& path, const BarChart& chart) {
  require_axis_labels(path, chart.title, chart.x_label, chart.y_label);
  const double x0 = chart.lo, x1 = chart.hi > chart.lo ? chart.hi : chart.lo + 1;
  double tallest = 0;
  for (double v : chart.values)
    if (std::isfinite(v)) tallest = std::max(tallest, v);
  // Bars stand on 0, so y starts there; the top fits the data.
  const double y1 = std::isnan(chart.y_max) ? (tallest > 0 ? tallest * 1.05 : 1.0) : chart.y_max;

  std::vector<Tick> xt, yt;
  const auto xv = nice_ticks(x0, x1, 8), yv = nice_ticks(0, y1, 6);
  for (double t : xv) xt.push_back({t, format_tick(t, xv.size() > 1 ? xv[1] - xv[0] : 1)});
  for (double t : yv) yt.push_back({t, format_tick(t, yv.size() > 1 ? yv[1] - yv[0] : 1)});

  const Frame f = plan_frame(chart.title, yt, chart.width, chart.height, 0);
  auto px = [&](double x) { return f.area.x + static_cast<int>(std::lround((x - x0) / (x1 - x0) * f.area.width)); };
  auto py = [&](double y) {
    return f.area.y + f.area.height - static_cast<int>(std::lround(std::clamp(y / y1, 0.0, 1.0) * f.area.height));
  };
  cv::Mat img(f.height, f.width, CV_8UC3, kWhite);
  draw_frame(img, f, xt, yt, chart.x_label, chart.y_label, px, py);
  const std::size_t bins = chart.values.size();
  for (std::size_t b = 0; b < bins; ++b) {
    const double v = chart.values[b];
    if (!(std::isfinite(v) && v > 0)) continue;
    const int left = px(x0 + (x1 - x0) * static_cast<double>(b) / static_cast<double>(bins));
    const int right = px(x0 + (x1 - x0) * static_cast<double>(b + 1) / static_cast<double>(bins)) - 1;
    cv::rectangle(img, {left, py(v)}, {std::max(left, right), f.area.y + f.area.height}, kPalette[0], cv::FILLED);
  }
  cv::rectangle(img, f.area, kAxis, 1, cv::LINE_AA);
  write_image(path, img);
}

}  // namespace embedflow
