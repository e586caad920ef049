// Accumulates the batches an evaluator or learner receives (embedding f32[B,D] or f32[D], label
// i64[B], optional camera i64[B], optional id i64[B] or str[B]) into contiguous arrays, with
// errors that name the port, the batch and the field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "embedflow/record.hpp"

namespace embedflow {

// Row-major rows x cols floats, not owned.
struct MatrixView {
  const float* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  const float* row(std::int64_t i) const { return data + i * cols; }
};

struct FeatureSet {
  std::string what;  // "query", "gallery", "train": used in messages
  std::int64_t dim = -1;
  std::vector<float> x;
  std::vector<std::int64_t> label, camera;
  std::vector<std::string> id;
  bool has_camera = false, has_id = false;
  std::int64_t batches = 0;

  std::int64_t rows() const { return dim > 0 ? static_cast<std::int64_t>(x.size()) / dim : 0; }
  MatrixView view() const { return {x.data(), rows(), dim}; }
  // need_label: the batch must carry `label`. Cameras and ids must be present in every batch or
  // in none.
  void append(const Record& batch, bool need_label);
  void append(const float* rows, std::int64_t n, std::int64_t d);  // labels left empty
};

}  // namespace embedflow
