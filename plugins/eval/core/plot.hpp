// Small line-chart writer (OpenCV drawing, PNG out) for CMC curves and loss curves: title, axis
// labels, "nice" ticks with a light grid, one coloured polyline per series and a legend.
#pragma once

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace embedflow::evalcore {

struct PlotSeries {
  std::string name;
  std::vector<double> x, y;
  bool dashed = false;  // reference lines (baselines) are dashed
};

struct LineChart {
  std::string title, x_label, y_label;
  // NaN = fit to the data.
  double x_min = std::numeric_limits<double>::quiet_NaN(), x_max = std::numeric_limits<double>::quiet_NaN();
  double y_min = std::numeric_limits<double>::quiet_NaN(), y_max = std::numeric_limits<double>::quiet_NaN();
  bool log_x = false;
  bool markers = true;  // dots at data points when a series has few of them
  int width = 960, height = 640;
  std::vector<PlotSeries> series;
};

// Writes a PNG; throws embedflow::Error naming the path when it cannot be written.
void save_line_chart(const std::string& path, const LineChart& chart);

// Tick positions covering [lo, hi] with a 1-2-5 step, about `target` of them.
std::vector<double> nice_ticks(double lo, double hi, int target);

}  // namespace embedflow::evalcore
