// A matrix drawn as a grid of shaded cells (OpenCV drawing, PNG out): confusion matrices and
// other small label-by-label tables. White is 0, the darkest blue the largest value; each cell
// shows its value when the grid is small enough to read.
#pragma once

#include <string>
#include <vector>

namespace embedflow {

struct HeatMap {
  std::string title, x_label, y_label;
  std::vector<std::string> row_names, col_names;  // one per row / column of `values`
  std::vector<std::vector<double>> values;         // rows x columns
  int cell = 48;                                   // cell size in pixels (shrunk for large grids)
};

// Writes a PNG; throws embedflow::Error naming the path when it cannot be written or the names
// and values disagree in size.
void save_heatmap(const std::string& path, const HeatMap& map);

}  // namespace embedflow
