// PNG figures for geo.pair_stats: distance histograms (embedflow::plot bar charts) and a
// photo-density map drawn with OpenCV, so they need no plotting stack at run time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace embedflow::geo {

struct Histogram {
  double lo = 0, hi = 0;
  std::vector<std::int64_t> counts;  // equal-width bins over [lo, hi]; values outside are left out
  std::int64_t total() const;
};

Histogram make_histogram(const std::vector<double>& values, double lo, double hi, int bins);

// The histogram as embedflow::plot's bar chart (one bar per bin, both axes labelled, units in the
// labels). Throws embedflow::Error when the file cannot be written.
void write_histogram_png(const std::string& path, const Histogram& h, const std::string& title,
                         const std::string& x_label, const std::string& y_label);

struct DensityGrid {
  int width = 0, height = 0;
  double min_lon = 0, min_lat = 0, max_lon = 0, max_lat = 0;
  std::vector<std::int64_t> counts;  // row-major, row 0 = north
  std::int64_t max_count() const;
};

// Counts photos per pixel over the bounding box; the height follows the box's metric aspect.
DensityGrid make_density_grid(const std::vector<double>& lat, const std::vector<double>& lon, double min_lon,
                              double min_lat, double max_lon, double max_lat, int width);

// Log-scaled colour heat map of the grid.
void write_density_png(const std::string& path, const DensityGrid& g, const std::string& title);

}  // namespace embedflow::geo
