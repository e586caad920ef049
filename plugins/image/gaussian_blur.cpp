// image.gaussian_blur — with probability p, blurs images with a Gaussian of sigma drawn
// uniformly from `sigma` [lo, hi] (torchvision's GaussianBlur inside RandomApply). The kernel is
// kernel_size wide, or 2*ceil(3 sigma)+1 when kernel_size is 0; borders reflect (BORDER_REFLECT_101,
// torchvision's "reflect").
//
// Inputs: in — records or batches with HWC image fields (u8 or f32)
// Outputs: out — the same records, same shapes
// Caveats: seeded per image from (node seed, record sequence, field, index in batch), so
// identical for any --threads.
//
//   nodes:
//     images: {type: image.idx_reader, params: {split: test, limit: 8}}
//     blur:   {type: image.gaussian_blur, params: {sigma: [0.1, 2.0], p: 0.5}}
//     show:   {type: core.sink, params: {mode: print}}
//   edges: [images.out -> blur.in, blur.out -> show.in]
#include <cmath>

#include <opencv2/imgproc.hpp>

#include "core/arrays.hpp"
#include "core/ops.hpp"
#include "image_types.hpp"

namespace embedflow::image {
namespace {

class GaussianBlur final : public ImageOp {
 public:
  explicit GaussianBlur(const Params& p)
      : sigma_(p.numbers("sigma")), p_(p.number("p")), k_(static_cast<int>(p.integer("kernel_size"))) {}
  cv::Mat apply(const cv::Mat& in, Rng& rng) const override {
    const bool go = uniform(rng, 0, 1) < p_;
    const double sigma = uniform(rng, sigma_[0], sigma_[1]);
    if (!go || sigma <= 0) return in;
    const int k = k_ > 0 ? k_ : 2 * static_cast<int>(std::ceil(3 * sigma)) + 1;
    cv::Mat out;
    cv::GaussianBlur(in, out, cv::Size(k, k), sigma, sigma, cv::BORDER_REFLECT_101);
    return out;
  }

 private:
  std::vector<double> sigma_;
  double p_;
  int k_;
};

}  // namespace

const OpSpec& gaussian_blur_op() {
  static const OpSpec op = [] {
    OpSpec s;
    s.name = "gaussian_blur";
    s.doc = "With probability p, Gaussian blur with sigma ~ U[sigma] (cv::GaussianBlur, reflected borders).";
    s.example =
        "nodes:\n"
        "  images: {type: image.idx_reader, params: {split: test, limit: 8}}\n"
        "  blur:   {type: image.gaussian_blur, params: {sigma: [0.1, 2.0], p: 0.5}}\n"
        "  show:   {type: core.sink, params: {mode: print}}\n"
        "edges: [images.out -> blur.in, blur.out -> show.in]\n";
    s.params = {Param::numbers("sigma").default_value(std::vector<double>{0.1, 2.0}).doc("[lo, hi] sigma range in pixels"),
                Param::number("p").default_value(1.0).range(0, 1).doc("probability of blurring an image at all"),
                Param::integer("kernel_size").default_value(0).range(0, 255)
                    .doc("odd kernel width in pixels; 0: 2*ceil(3 sigma)+1")};
    s.validate = [](const Params& p, std::string& param) {
      std::string why = check_range(p, "sigma", 0, 100, param);
      const auto k = p.integer("kernel_size");
      if (why.empty() && k > 0 && k % 2 == 0) {
        param = "kernel_size";
        why = cat("kernel_size must be odd (or 0 for automatic), got ", k);
      }
      return why;
    };
    s.create = [](const Params& p) -> std::unique_ptr<ImageOp> { return std::make_unique<GaussianBlur>(p); };
    return s;
  }();
  return op;
}

NodeType gaussian_blur_type() { return op_node_type(gaussian_blur_op()); }

}  // namespace embedflow::image
