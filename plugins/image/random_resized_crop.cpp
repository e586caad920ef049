// image.random_resized_crop — crops a random area and aspect ratio, then resizes the crop to
// height x width (torchvision's RandomResizedCrop, same sampling: up to 10 tries of area
// fraction ~ U(scale) and log aspect ratio ~ U(log ratio), then a centre crop fallback).
//
// Inputs: in — records or batches with HWC image fields (u8 or f32)
// Outputs: out — image fields [height, width, C] (batches [B, height, width, C])
// Caveats: shrinking is antialiased (area averaging, as PIL's bilinear and torchvision's
// antialias=True) unless antialias: false. Seeded per image from (node seed, record sequence,
// field, index in batch), so identical for any --threads.
//
//   nodes:
//     images: {type: image.idx_reader, params: {split: test, limit: 8}}
//     crop:   {type: image.random_resized_crop, params: {height: 28, width: 28, scale: [0.6, 1.0]}}
//     show:   {type: core.sink, params: {mode: print}}
//   edges: [images.out -> crop.in, crop.out -> show.in]
#include <cmath>

#include <opencv2/imgproc.hpp>

#include "core/arrays.hpp"
#include "core/kernels.hpp"
#include "core/ops.hpp"
#include "image_types.hpp"

namespace embedflow::image {

// The crop rectangle for an image of w x h (exposed for tests through the op's behaviour).
cv::Rect random_resized_crop_rect(int w, int h, double scale_lo, double scale_hi, double ratio_lo, double ratio_hi,
                                  Rng& rng) {
  const double area = static_cast<double>(w) * h;
  const double log_lo = std::log(ratio_lo), log_hi = std::log(ratio_hi);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * uniform(rng, scale_lo, scale_hi);
    const double aspect = std::exp(uniform(rng, log_lo, log_hi));
    const int cw = static_cast<int>(std::lround(std::sqrt(target * aspect)));
    const int ch = static_cast<int>(std::lround(std::sqrt(target / aspect)));
    if (cw > 0 && ch > 0 && cw <= w && ch <= h) {
      const int y = static_cast<int>(uniform_int(rng, 0, h - ch));
      const int x = static_cast<int>(uniform_int(rng, 0, w - cw));
      return cv::Rect(x, y, cw, ch);
    }
  }
  // Fallback: the largest centre crop whose ratio lies in range.
  const double in_ratio = static_cast<double>(w) / h;
  int cw = w, ch = h;
  if (in_ratio < ratio_lo) ch = static_cast<int>(std::lround(w / ratio_lo));
  else if (in_ratio > ratio_hi) cw = static_cast<int>(std::lround(h * ratio_hi));
  cw = std::max(1, std::min(cw, w));
  ch = std::max(1, std::min(ch, h));
  return cv::Rect((w - cw) / 2, (h - ch) / 2, cw, ch);
}

namespace {

class RandomResizedCrop final : public ImageOp {
 public:
  RandomResizedCrop(const Params& p)
      : h_(static_cast<int>(p.integer("height"))),
        w_(static_cast<int>(p.integer("width"))),
        interp_(interpolation_flag(p.string("interpolation"))),
        antialias_(p.boolean("antialias")),
        scale_(p.numbers("scale")),
        ratio_(p.numbers("ratio")) {}
  cv::Mat apply(const cv::Mat& in, Rng& rng) const override {
    const cv::Rect r = random_resized_crop_rect(in.cols, in.rows, scale_[0], scale_[1], ratio_[0], ratio_[1], rng);
    return resize_image(in(r), cv::Size(w_, h_), interp_, antialias_);
  }

 private:
  int h_, w_, interp_;
  bool antialias_;
  std::vector<double> scale_, ratio_;
};

}  // namespace

const OpSpec& random_resized_crop_op() {
  static const OpSpec op = [] {
    OpSpec s;
    s.name = "random_resized_crop";
    s.doc = "Crops a random area fraction and aspect ratio, resized to height x width (torchvision RandomResizedCrop).";
    s.example =
        "nodes:\n"
        "  images: {type: image.idx_reader, params: {split: test, limit: 8}}\n"
        "  crop:   {type: image.random_resized_crop, params: {height: 28, width: 28, scale: [0.6, 1.0]}}\n"
        "  show:   {type: core.sink, params: {mode: print}}\n"
        "edges: [images.out -> crop.in, crop.out -> show.in]\n";
    s.params = {Param::integer("height").range(1, 65536).doc("output height in pixels"),
                Param::integer("width").range(1, 65536).doc("output width in pixels"),
                Param::numbers("scale").default_value(std::vector<double>{0.08, 1.0})
                    .doc("[lo, hi] fraction of the image area the crop covers"),
                Param::numbers("ratio").default_value(std::vector<double>{3.0 / 4.0, 4.0 / 3.0})
                    .doc("[lo, hi] crop aspect ratio (width / height), drawn log-uniformly"),
                interpolation_param("linear"), antialias_param()};
    s.validate = [](const Params& p, std::string& param) {
      std::string why = check_range(p, "scale", 1e-6, 1.0, param);
      if (why.empty()) why = check_range(p, "ratio", 1e-3, 1e3, param);
      return why;
    };
    s.size = [](const Params& p, std::int64_t& h, std::int64_t& w) {
      h = p.integer("height");
      w = p.integer("width");
      return true;
    };
    s.create = [](const Params& p) -> std::unique_ptr<ImageOp> { return std::make_unique<RandomResizedCrop>(p); };
    return s;
  }();
  return op;
}

NodeType random_resized_crop_type() { return op_node_type(random_resized_crop_op()); }

}  // namespace embedflow::image
