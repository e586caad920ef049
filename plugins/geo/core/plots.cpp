#include "plots.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "embedflow/error.hpp"
#include "embedflow/plot/bar_chart.hpp"
#include "embedflow/plot/png.hpp"
#include "geodesy.hpp"

namespace embedflow::geo {

std::int64_t Histogram::total() const { return std::accumulate(counts.begin(), counts.end(), std::int64_t(0)); }

Histogram make_histogram(const std::vector<double>& values, double lo, double hi, int bins) {
  Histogram h;
  h.lo = lo;
  h.hi = hi;
  h.counts.assign(static_cast<std::size_t>(std::max(1, bins)), 0);
  const double width = (hi - lo) / static_cast<double>(h.counts.size());
  for (double v : values) {
    if (!(v >= lo && v <= hi)) continue;
    auto b = static_cast<std::size_t>((v - lo) / width);
    if (b >= h.counts.size()) b = h.counts.size() - 1;  // v == hi
    ++h.counts[b];
  }
  return h;
}

namespace {

// The density map is drawn in BGR, OpenCV's order.
void save(const std::string& path, const cv::Mat& img) {
  save_png(path, img.ptr<std::uint8_t>(), img.rows, img.cols, img.channels(), PixelOrder::bgr);
}

}  // namespace

void write_histogram_png(const std::string& path, const Histogram& h, const std::string& title,
                         const std::string& x_label, const std::string& y_label) {
  BarChart chart;
  chart.title = title;
  chart.x_label = x_label;
  chart.y_label = y_label;
  chart.lo = h.lo;
  chart.hi = h.hi;
  chart.values.assign(h.counts.begin(), h.counts.end());
  chart.width = 800;
  chart.height = 500;
  save_bar_chart(path, chart);
}

std::int64_t DensityGrid::max_count() const {
  return counts.empty() ? 0 : *std::max_element(counts.begin(), counts.end());
}

DensityGrid make_density_grid(const std::vector<double>& lat, const std::vector<double>& lon, double min_lon,
                              double min_lat, double max_lon, double max_lat, int width) {
  DensityGrid g;
  g.min_lon = min_lon; g.min_lat = min_lat; g.max_lon = max_lon; g.max_lat = max_lat;
  g.width = std::max(1, width);
  const double mid = 0.5 * (min_lat + max_lat) * kDegToRad;
  const double aspect = (max_lat - min_lat) / std::max(1e-12, (max_lon - min_lon) * std::cos(mid));
  g.height = std::max(1, static_cast<int>(std::lround(g.width * aspect)));
  g.counts.assign(static_cast<std::size_t>(g.width) * g.height, 0);
  const double sx = g.width / std::max(1e-12, max_lon - min_lon), sy = g.height / std::max(1e-12, max_lat - min_lat);
  for (std::size_t i = 0; i < lat.size(); ++i) {
    if (lat[i] < min_lat || lat[i] > max_lat || lon[i] < min_lon || lon[i] > max_lon) continue;
    const int x = std::min(g.width - 1, static_cast<int>((lon[i] - min_lon) * sx));
    const int y = std::min(g.height - 1, static_cast<int>((max_lat - lat[i]) * sy));
    ++g.counts[static_cast<std::size_t>(y) * g.width + x];
  }
  return g;
}

void write_density_png(const std::string& path, const DensityGrid& g, const std::string& title) {
  cv::Mat level(g.height, g.width, CV_8UC1, cv::Scalar(0));
  const double lmax = std::log1p(static_cast<double>(g.max_count()));
  for (int y = 0; y < g.height; ++y)
    for (int x = 0; x < g.width; ++x) {
      const auto c = g.counts[static_cast<std::size_t>(y) * g.width + x];
      if (c > 0 && lmax > 0) level.at<std::uint8_t>(y, x) = static_cast<std::uint8_t>(std::lround(40 + 215 * std::log1p(static_cast<double>(c)) / lmax));
    }
  cv::Mat color;
  cv::applyColorMap(level, color, cv::COLORMAP_INFERNO);
  color.setTo(cv::Scalar(0, 0, 0), level == 0);
  cv::putText(color, title, {10, 22}, cv::FONT_HERSHEY_SIMPLEX, 0.55, cv::Scalar(255, 255, 255), 1, cv::LINE_AA);
  save(path, color);
}

}  // namespace embedflow::geo
