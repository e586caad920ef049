// image.rotate — rotates images about their centre by an angle drawn uniformly from
// `degrees` [lo, hi] (counter-clockwise positive, as torchvision's RandomRotation), with
// probability p; the canvas keeps its size and uncovered corners take `fill`.
//
// Inputs: in — records or batches with HWC image fields (u8 or f32)
// Outputs: out — the same records, same shapes
// Caveats: bilinear by default; seeded per image from (node seed, record sequence, field,
// index in batch), so identical for any --threads.
//
//   nodes:
//     images: {type: image.idx_reader, params: {split: test, limit: 8}}
//     turn:   {type: image.rotate, params: {degrees: [-15, 15]}}
//     show:   {type: core.sink, params: {mode: print}}
//   edges: [images.out -> turn.in, turn.out -> show.in]
#include <opencv2/imgproc.hpp>

#include "core/arrays.hpp"
#include "core/ops.hpp"
#include "image_types.hpp"

namespace embedflow::image {
namespace {

class Rotate final : public ImageOp {
 public:
  explicit Rotate(const Params& p)
      : degrees_(p.numbers("degrees")),
        p_(p.number("p")),
        fill_(p.number("fill")),
        interp_(interpolation_flag(p.string("interpolation"))) {}
  cv::Mat apply(const cv::Mat& in, Rng& rng) const override {
    const bool go = uniform(rng, 0, 1) < p_;
    const double angle = uniform(rng, degrees_[0], degrees_[1]);
    if (!go || angle == 0) return in;
    // Centre of the pixel grid, as torchvision uses for rotate(center=None).
    const cv::Point2f centre(static_cast<float>(in.cols - 1) / 2.0f, static_cast<float>(in.rows - 1) / 2.0f);
    const cv::Mat m = cv::getRotationMatrix2D(centre, angle, 1.0);
    cv::Mat out;
    cv::warpAffine(in, out, m, in.size(), interp_, cv::BORDER_CONSTANT, cv::Scalar::all(fill_));
    return out;
  }

 private:
  std::vector<double> degrees_;
  double p_, fill_;
  int interp_;
};

}  // namespace

const OpSpec& rotate_op() {
  static const OpSpec op = [] {
    OpSpec s;
    s.name = "rotate";
    s.doc = "Rotates images by a random angle in `degrees` (counter-clockwise positive) about the centre (cv::warpAffine).";
    s.example =
        "nodes:\n"
        "  images: {type: image.idx_reader, params: {split: test, limit: 8}}\n"
        "  turn:   {type: image.rotate, params: {degrees: [-15, 15]}}\n"
        "  show:   {type: core.sink, params: {mode: print}}\n"
        "edges: [images.out -> turn.in, turn.out -> show.in]\n";
    s.params = {Param::numbers("degrees").default_value(std::vector<double>{-10.0, 10.0})
                    .doc("[lo, hi] angle range in degrees, drawn uniformly"),
                Param::number("p").default_value(1.0).range(0, 1).doc("probability of rotating an image at all"),
                Param::number("fill").default_value(0.0).doc("value of pixels the rotation uncovers"),
                interpolation_param("linear")};
    s.validate = [](const Params& p, std::string& param) { return check_range(p, "degrees", -360, 360, param); };
    s.create = [](const Params& p) -> std::unique_ptr<ImageOp> { return std::make_unique<Rotate>(p); };
    return s;
  }();
  return op;
}

NodeType rotate_type() { return op_node_type(rotate_op()); }

}  // namespace embedflow::image
