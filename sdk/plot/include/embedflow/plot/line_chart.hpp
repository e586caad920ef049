// Small chart writer (OpenCV drawing, PNG out) for CMC curves, loss curves and 2-D scatter plots:
// title, axis labels, "nice" ticks with a light grid, one colour per series (a polyline, or dots
// only for scatter series) and a legend.
#pragma once

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "embedflow/results.hpp"

namespace embedflow {

struct PlotSeries {
  std::string name;
  std::vector<double> x, y;
  bool dashed = false;  // reference lines (baselines) are dashed
  bool line = true;     // false: dots only (a scatter series), drawn whatever their number
};

struct LineChart {
  std::string title, x_label, y_label;
  // NaN = fit to the data.
  double x_min = std::numeric_limits<double>::quiet_NaN(), x_max = std::numeric_limits<double>::quiet_NaN();
  double y_min = std::numeric_limits<double>::quiet_NaN(), y_max = std::numeric_limits<double>::quiet_NaN();
  bool log_x = false;
  bool markers = true;  // dots at data points when a series has few of them
  int marker_radius = 3;
  bool legend_outside = false;  // legend right of the plot area (scatter plots fill the whole area)
  int width = 960, height = 640;
  std::vector<PlotSeries> series;
};

// Writes a PNG; throws embedflow::Error naming the path when it cannot be written.
void save_line_chart(const std::string& path, const LineChart& chart);

// The same chart as the run report draws it (publish_chart): title, axes, series; the PNG's
// ranges and styling stay with the PNG.
ResultChart result_chart(const LineChart& chart);

// Tick positions covering [lo, hi] with a 1-2-5 step, about `target` of them.
std::vector<double> nice_ticks(double lo, double hi, int target);

}  // namespace embedflow
