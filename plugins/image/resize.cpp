// image.resize — resizes every image to height x width (OpenCV cv::resize; antialiased when
// shrinking, as PIL and torchvision are, unless antialias: false).
//
// Inputs: in — records or batches with HWC image fields (u8 or f32)
// Outputs: out — the same records, image fields [height, width, C] (batches [B, height, width, C])
// Caveats: the aspect ratio is not kept; crop first (image.random_resized_crop) when it matters.
// Deterministic, so the seed plays no part.
//
//   nodes:
//     images: {type: image.idx_reader, params: {split: test, limit: 8}}
//     bigger: {type: image.resize, params: {height: 32, width: 32}}
//     show:   {type: core.sink, params: {mode: print}}
//   edges: [images.out -> bigger.in, bigger.out -> show.in]
#include <opencv2/imgproc.hpp>

#include "core/ops.hpp"
#include "image_types.hpp"

namespace embedflow::image {
namespace {

class Resize final : public ImageOp {
 public:
  Resize(int h, int w, int interp, bool antialias) : h_(h), w_(w), interp_(interp), antialias_(antialias) {}
  cv::Mat apply(const cv::Mat& in, Rng&) const override {
    if (in.rows == h_ && in.cols == w_) return in;
    return resize_image(in, cv::Size(w_, h_), interp_, antialias_);
  }

 private:
  int h_, w_, interp_;
  bool antialias_;
};

}  // namespace

const OpSpec& resize_op() {
  static const OpSpec op = [] {
    OpSpec s;
    s.name = "resize";
    s.doc = "Resizes images to height x width (cv::resize).";
    s.example =
        "nodes:\n"
        "  images: {type: image.idx_reader, params: {split: test, limit: 8}}\n"
        "  bigger: {type: image.resize, params: {height: 32, width: 32}}\n"
        "  show:   {type: core.sink, params: {mode: print}}\n"
        "edges: [images.out -> bigger.in, bigger.out -> show.in]\n";
    s.params = {Param::integer("height").range(1, 65536).doc("output height in pixels"),
                Param::integer("width").range(1, 65536).doc("output width in pixels"),
                interpolation_param("linear"), antialias_param()};
    s.size = [](const Params& p, std::int64_t& h, std::int64_t& w) {
      h = p.integer("height");
      w = p.integer("width");
      return true;
    };
    s.create = [](const Params& p) -> std::unique_ptr<ImageOp> {
      return std::make_unique<Resize>(static_cast<int>(p.integer("height")), static_cast<int>(p.integer("width")),
                                      interpolation_flag(p.string("interpolation")), p.boolean("antialias"));
    };
    return s;
  }();
  return op;
}

NodeType resize_type() { return op_node_type(resize_op()); }

}  // namespace embedflow::image
