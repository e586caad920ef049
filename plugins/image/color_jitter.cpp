// image.color_jitter — random brightness, contrast and saturation (torchvision's ColorJitter
// without hue). Each amount x gives a factor f ~ U[max(0, 1-x), 1+x], applied in this order
// with clamping to the value range after each step ([0,255] for u8, [0,1] for f32):
//   brightness: v' = f * v
//   contrast:   v' = f * v + (1 - f) * mean(grey(image))
//   saturation: v' = f * v + (1 - f) * grey(pixel)          (3-channel images only)
// where grey = 0.299 R + 0.587 G + 0.114 B (channels in RGB order; grey images are their own
// grey). u8 results are rounded.
//
// Inputs: in — records or batches with HWC image fields (u8 or f32 in [0,1])
// Outputs: out — the same records, same shapes
// Caveats: unlike torchvision, the order is fixed (not shuffled per image) and the contrast
// mean is taken over unrounded grey values. Seeded per image from (node seed, record sequence,
// field, index in batch), so identical for any --threads.
//
//   nodes:
//     images: {type: image.idx_reader, params: {split: test, limit: 8}}
//     jitter: {type: image.color_jitter, params: {brightness: 0.4, contrast: 0.4}}
//     show:   {type: core.sink, params: {mode: print}}
//   edges: [images.out -> jitter.in, jitter.out -> show.in]
#include <algorithm>

#include "core/arrays.hpp"
#include "core/kernels.hpp"
#include "core/ops.hpp"
#include "image_types.hpp"

namespace embedflow::image {

// The colour jitter kernel with given factors (1 = unchanged), exposed for tests.
cv::Mat color_jitter_apply(const cv::Mat& in, double brightness, double contrast, double saturation) {
  if (brightness == 1 && contrast == 1 && saturation == 1) return in;
  const int c = in.channels();
  const float top = in.depth() == CV_8U ? 255.0f : 1.0f;
  cv::Mat f;
  in.convertTo(f, CV_32F);
  float* v = f.ptr<float>();
  const std::size_t pixels = f.total(), n = pixels * static_cast<std::size_t>(c);
  auto clamp = [top](float x) { return std::min(top, std::max(0.0f, x)); };
  auto grey = [c](const float* px) {
    if (c == 3) return 0.299f * px[0] + 0.587f * px[1] + 0.114f * px[2];
    float s = 0;
    for (int k = 0; k < c; ++k) s += px[k];
    return s / static_cast<float>(c);
  };
  if (brightness != 1) {
    const auto b = static_cast<float>(brightness);
    for (std::size_t i = 0; i < n; ++i) v[i] = clamp(v[i] * b);
  }
  if (contrast != 1) {
    double sum = 0;
    for (std::size_t p = 0; p < pixels; ++p) sum += grey(v + p * static_cast<std::size_t>(c));
    const auto mean = static_cast<float>(pixels ? sum / static_cast<double>(pixels) : 0.0);
    const auto k = static_cast<float>(contrast);
    for (std::size_t i = 0; i < n; ++i) v[i] = clamp(k * v[i] + (1 - k) * mean);
  }
  if (saturation != 1 && c == 3) {
    const auto k = static_cast<float>(saturation);
    for (std::size_t p = 0; p < pixels; ++p) {
      float* px = v + p * 3;
      const float g = grey(px);
      for (int ch = 0; ch < 3; ++ch) px[ch] = clamp(k * px[ch] + (1 - k) * g);
    }
  }
  if (in.depth() == CV_32F) return f;
  cv::Mat out;
  f.convertTo(out, CV_8U);  // rounds to nearest
  return out;
}

namespace {

class ColorJitter final : public ImageOp {
 public:
  explicit ColorJitter(const Params& p)
      : b_(p.number("brightness")), c_(p.number("contrast")), s_(p.number("saturation")) {}
  cv::Mat apply(const cv::Mat& in, Rng& rng) const override {
    // Three draws always, so one amount being 0 never shifts the others' streams.
    const double fb = uniform(rng, std::max(0.0, 1 - b_), 1 + b_);
    const double fc = uniform(rng, std::max(0.0, 1 - c_), 1 + c_);
    const double fs = uniform(rng, std::max(0.0, 1 - s_), 1 + s_);
    return color_jitter_apply(in, b_ > 0 ? fb : 1, c_ > 0 ? fc : 1, s_ > 0 ? fs : 1);
  }

 private:
  double b_, c_, s_;
};

}  // namespace

const OpSpec& color_jitter_op() {
  static const OpSpec op = [] {
    OpSpec s;
    s.name = "color_jitter";
    s.doc = "Random brightness, contrast and saturation factors in [1-x, 1+x] (torchvision ColorJitter without hue).";
    s.example =
        "nodes:\n"
        "  images: {type: image.idx_reader, params: {split: test, limit: 8}}\n"
        "  jitter: {type: image.color_jitter, params: {brightness: 0.4, contrast: 0.4}}\n"
        "  show:   {type: core.sink, params: {mode: print}}\n"
        "edges: [images.out -> jitter.in, jitter.out -> show.in]\n";
    s.params = {Param::number("brightness").default_value(0.0).range(0, 10).doc("x: brightness factor ~ U[max(0,1-x), 1+x]"),
                Param::number("contrast").default_value(0.0).range(0, 10).doc("x: contrast factor ~ U[max(0,1-x), 1+x]"),
                Param::number("saturation").default_value(0.0).range(0, 10)
                    .doc("x: saturation factor ~ U[max(0,1-x), 1+x] (3-channel RGB images only)")};
    s.create = [](const Params& p) -> std::unique_ptr<ImageOp> { return std::make_unique<ColorJitter>(p); };
    return s;
  }();
  return op;
}

NodeType color_jitter_type() { return op_node_type(color_jitter_op()); }

}  // namespace embedflow::image
