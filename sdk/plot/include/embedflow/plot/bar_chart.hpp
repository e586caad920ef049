// Histogram-style bar chart (OpenCV drawing, PNG out) in the same style as line_chart.hpp:
// equal-width bins over [lo, hi] on x, one bar per bin rising from 0, y fitted to the tallest
// bar. Used for distance histograms and other binned counts.
#pragma once

#include <limits>
#include <string>
#include <vector>

namespace embedflow {

struct BarChart {
  std::string title, x_label, y_label;  // both axis labels are required, with units where known
  double lo = 0, hi = 1;                // the bins' range on x
  std::vector<double> values;           // one bar per bin, equal-width bins over [lo, hi]
  // NaN = the tallest bar plus 5%.
  double y_max = std::numeric_limits<double>::quiet_NaN();
  int width = 960, height = 640;
};

// Writes a PNG; throws embedflow::Error naming the path when it cannot be written or an axis
// label is missing.
void save_bar_chart(const std::string& path, const BarChart& chart);

}  // namespace embedflow
