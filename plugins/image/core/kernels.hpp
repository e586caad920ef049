// Pure kernels defined beside their nodes (to_tensor.cpp, normalize.cpp, color_jitter.cpp,
// random_resized_crop.cpp) and declared here so tests call them without a graph.
#pragma once

#include <vector>

#include <opencv2/core.hpp>

#include <embedflow/embedflow.hpp>

namespace embedflow::image {

// HWC (or BHWC) u8/f32 -> CHW (or BCHW) f32; u8 scaled by 1/255.
Array hwc_to_chw_f32(const Array& a);
// (v - mean[c]) / std[c] over an f32 CHW image or BCHW batch (one value: every channel).
Array normalize_chw(const Array& a, const std::vector<double>& mean, const std::vector<double>& std_dev);
// Colour jitter with the given factors (1 = unchanged): brightness, contrast, saturation.
cv::Mat color_jitter_apply(const cv::Mat& in, double brightness, double contrast, double saturation);
// torchvision's RandomResizedCrop.get_params for a w x h image.
cv::Rect random_resized_crop_rect(int w, int h, double scale_lo, double scale_hi, double ratio_lo, double ratio_hi, Rng& rng);

}  // namespace embedflow::image
