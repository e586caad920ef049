// Array helpers shared by the image nodes: row gathers, zero-copy cv::Mat views of HWC images,
// CHW conversion, and portable random draws (the same numbers on every platform, unlike the
// std:: distributions, so seeded augmentations are reproducible anywhere).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include <embedflow/embedflow.hpp>

namespace embedflow::image {

// An array whose contents are left uninitialised (the caller writes every byte). Large ones
// (>= 1 MiB: image batches) come from a small pool of freed buffers of the same size: a batch
// of 64 f32 224 x 224 images is 38 MB, above glibc's largest mmap threshold, so without the
// pool every batch is a fresh mmap whose pages fault in (and were zeroed first by
// Array::zeros): half the CPU time of a photo pipeline.
Array uninitialized_array(DType dtype, Shape shape);

// Rows of `a` at `index` along the leading axis, copied into a new array (string columns too).
Array take_rows(const Array& a, const std::vector<std::int64_t>& index);
// Every field of a batch gathered at `index`; fields whose leading dim is not `rows` are
// refused (a table's fields must line up).
Record take_record_rows(const Record& r, const std::vector<std::int64_t>& index, std::int64_t rows);
// The integer values of a one-dimensional (or scalar) integer array, named in errors.
std::vector<std::int64_t> int_values(const Array& a, const std::string& field);

// True for u8/f32 arrays of rank 3 (HWC image) or 4 (BHWC batch).
bool is_hwc_image(const Array& a);
// A cv::Mat header over an HWC image (rank 3), or image i of a BHWC batch (rank 4); no copy.
// The Mat must be treated as read-only: its memory belongs to an emitted Array.
cv::Mat image_view(const Array& a, std::int64_t i = -1);
// Wraps a Mat as an HWC array [rows, cols, channels] without copying when it is continuous.
Array array_from_mat(cv::Mat m);
// Writes an HWC Mat as CHW planes to dst (element type of the Mat).
void mat_to_chw(const cv::Mat& m, void* dst);

// Uniform double in [lo, hi) and integer in [lo, hi] from 64-bit draws.
double uniform(Rng& rng, double lo, double hi);
std::int64_t uniform_int(Rng& rng, std::int64_t lo, std::int64_t hi);
template <class T>
void shuffle_in_place(std::vector<T>& v, Rng& rng) {
  for (std::size_t i = v.size(); i > 1; --i) {
    auto j = static_cast<std::size_t>(uniform_int(rng, 0, static_cast<std::int64_t>(i - 1)));
    std::swap(v[i - 1], v[j]);
  }
}

}  // namespace embedflow::image
