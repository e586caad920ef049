// image.flip — mirrors images left-right with probability horizontal_p and top-bottom with
// probability vertical_p (independent draws; both may happen).
//
// Inputs: in — records or batches with HWC image fields (u8 or f32)
// Outputs: out — the same records, same shapes
// Caveats: seeded per image from (node seed, record sequence, field, index in batch), so
// identical for any --threads. An image drawn "no flip" is forwarded without a copy.
//
//   nodes:
//     images: {type: image.idx_reader, params: {split: test, limit: 8}}
//     mirror: {type: image.flip, params: {horizontal_p: 0.5}}
//     show:   {type: core.sink, params: {mode: print}}
//   edges: [images.out -> mirror.in, mirror.out -> show.in]
#include "core/arrays.hpp"
#include "core/ops.hpp"
#include "image_types.hpp"

namespace embedflow::image {
namespace {

class Flip final : public ImageOp {
 public:
  Flip(double h, double v) : h_(h), v_(v) {}
  cv::Mat apply(const cv::Mat& in, Rng& rng) const override {
    // Both draws always happen, so one probability's value never shifts the other's stream.
    const bool h = uniform(rng, 0, 1) < h_;
    const bool v = uniform(rng, 0, 1) < v_;
    if (!h && !v) return in;
    cv::Mat out;
    cv::flip(in, out, h && v ? -1 : h ? 1 : 0);
    return out;
  }

 private:
  double h_, v_;
};

}  // namespace

const OpSpec& flip_op() {
  static const OpSpec op = [] {
    OpSpec s;
    s.name = "flip";
    s.doc = "Mirrors images horizontally and/or vertically, each with its own probability (cv::flip).";
    s.example =
        "nodes:\n"
        "  images: {type: image.idx_reader, params: {split: test, limit: 8}}\n"
        "  mirror: {type: image.flip, params: {horizontal_p: 0.5}}\n"
        "  show:   {type: core.sink, params: {mode: print}}\n"
        "edges: [images.out -> mirror.in, mirror.out -> show.in]\n";
    s.params = {Param::number("horizontal_p").default_value(0.5).range(0, 1).doc("probability of a left-right flip"),
                Param::number("vertical_p").default_value(0.0).range(0, 1).doc("probability of a top-bottom flip")};
    s.create = [](const Params& p) -> std::unique_ptr<ImageOp> {
      return std::make_unique<Flip>(p.number("horizontal_p"), p.number("vertical_p"));
    };
    return s;
  }();
  return op;
}

NodeType flip_type() { return op_node_type(flip_op()); }

}  // namespace embedflow::image
