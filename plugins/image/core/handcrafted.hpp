// Embeddings that need no training, the baselines a learnt embedding must beat: an image's own
// pixels (downsampled) and its colour histogram. Plain functions over one HWC image, and the
// glue that turns an image field (one image or a batch) into an `embedding` field.
#pragma once

#include <functional>
#include <string>

#include <opencv2/core.hpp>

#include <embedflow/embedflow.hpp>

namespace embedflow::image {

// RGB (or grey) u8 image -> its pixels after an area resize to height x width, scaled to
// [0, 1], row-major HWC: height * width * channels values.
void pixel_vector(const cv::Mat& rgb, int height, int width, float* out);

// RGB u8 image -> the joint hue x saturation histogram (OpenCV's HSV: hue in [0, 180),
// saturation in [0, 256)), h_bins * s_bins values summing to 1 (hue slowest). A grey image
// counts every pixel in hue bin 0, saturation bin 0.
void hs_histogram(const cv::Mat& rgb, int h_bins, int s_bins, float* out);

// The record with `field` (u8 [H,W,C] or [B,H,W,C]) replaced by `embedding` f32 [D] or [B,D],
// each row filled by `fill(image, row)`.
Record embed_image_field(const Record& in, const std::string& field, std::int64_t dim,
                         const std::function<void(const cv::Mat&, float*)>& fill);

// Load-time schema: the input with `field` removed and `embedding: f32[B,dim]` (or [dim]) added;
// an error when the field is not a u8 image.
void check_image_embedding_schema(SchemaContext& c, const std::string& field, std::int64_t dim);

}  // namespace embedflow::image
