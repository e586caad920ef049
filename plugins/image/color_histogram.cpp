// image.color_histogram — an embedding without training: each image's joint hue x saturation
// histogram (OpenCV HSV, h_bins x s_bins, summing to 1). The baseline a learnt photo embedding
// must beat: it matches light and colour, not places, so an embedding that only learnt colour
// scores like it.
//
// Inputs: in — records or batches with a u8 RGB image field (image.files_reader, mode color)
// Outputs: out — the same records, the image field replaced by embedding f32 [B, h_bins*s_bins]
// Caveats: deterministic; parallel-safe. Compare with cosine or chi-square distances.
//
//   nodes:
//     images: {type: image.idx_reader, params: {split: test, limit: 8, batch_size: 4}}
//     hist:   {type: image.color_histogram, params: {h_bins: 8, s_bins: 4}}
//     show:   {type: core.sink, params: {mode: print}}
//   edges: [images.out -> hist.in, hist.out -> show.in]
#include "core/handcrafted.hpp"
#include "image_types.hpp"

namespace embedflow::image {
namespace {

class ColorHistogram final : public Node {
 public:
  void open(NodeContext& ctx) override {
    field_ = ctx.params().string("field");
    h_ = static_cast<int>(ctx.params().integer("h_bins"));
    s_ = static_cast<int>(ctx.params().integer("s_bins"));
  }
  void process(std::size_t, const RecordPtr& in, Emitter& out) override {
    out.emit(embed_image_field(*in, field_, static_cast<std::int64_t>(h_) * s_,
                               [&](const cv::Mat& img, float* dst) { hs_histogram(img, h_, s_, dst); }));
  }

 private:
  std::string field_;
  int h_ = 16, s_ = 8;
};

}  // namespace

NodeType color_histogram_type() {
  return NodeTypeBuilder("image.color_histogram")
      .deterministic()
      .doc("Each image's hue x saturation histogram as its embedding: a colour baseline that needs no training.")
      .example(
          "nodes:\n"
          "  images: {type: image.idx_reader, params: {split: test, limit: 8, batch_size: 4}}\n"
          "  hist:   {type: image.color_histogram, params: {h_bins: 8, s_bins: 4}}\n"
          "  show:   {type: core.sink, params: {mode: print}}\n"
          "edges: [images.out -> hist.in, hist.out -> show.in]\n")
      .param(Param::string("field").default_value("image").doc("the u8 HWC image field"))
      .param(Param::integer("h_bins").default_value(16).range(1, 180).doc("hue bins"))
      .param(Param::integer("s_bins").default_value(8).range(1, 256).doc("saturation bins"))
      .input("in", "*", "records or batches with a u8 RGB image field")
      .output("out", "*", "the image field replaced by embedding f32[B,h_bins*s_bins]")
      .parallel()
      .check([](SchemaContext& c) {
        check_image_embedding_schema(c, c.params().string("field"), c.params().integer("h_bins") * c.params().integer("s_bins"));
      })
      .create<ColorHistogram>();
}

}  // namespace embedflow::image
