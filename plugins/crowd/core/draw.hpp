// Small PNG writers for the crowd evaluators (OpenCV drawing): a heatmap with row/column labels
// and values (confusion matrices) and a thumbnail strip canvas (1-D embedding plots). Torch-free.
#pragma once

#include <string>
#include <vector>

namespace embedflow::crowd {

// values [rows][cols] in [0,1], printed in each cell; a white-to-blue scale.
void write_heatmap(const std::string& path, const std::string& title, const std::vector<std::vector<double>>& values,
                   const std::vector<std::string>& row_labels, const std::vector<std::string>& col_labels,
                   const std::string& row_axis, const std::string& col_axis);

// One strip per row: thumbnails (u8 RGB or grey, h x w x c, row-major) placed at x positions in
// [0,1] with a seeded vertical jitter, under a label. Each strip is `strip_height` pixels.
struct Thumb {
  const unsigned char* pixels;
  int h, w, c;
  double x;     // in [0,1]
  double y;     // in [0,1] (vertical jitter, randomly assigned as in the paper's plots)
};
void write_strips(const std::string& path, const std::vector<std::string>& labels,
                  const std::vector<std::vector<Thumb>>& strips, int width, int strip_height, int scale);

// Creates the parent directory of `path` when it has one.
void make_parent(const std::string& path);

}  // namespace embedflow::crowd
