// image.pixel_embedding — an embedding without training: each image's own pixels, area-resized
// to height x width and scaled to [0, 1]. The "raw pixels" baseline: what any learnt embedding
// must beat before it can claim to have learnt anything.
//
// Inputs: in — records or batches with a u8 image field
// Outputs: out — the same records, the image field replaced by embedding f32 [B, height*width*C]
// Caveats: deterministic; parallel-safe.
//
//   nodes:
//     images: {type: image.idx_reader, params: {split: test, limit: 8, batch_size: 4}}
//     pixels: {type: image.pixel_embedding, params: {height: 7, width: 7, channels: 1}}
//     show:   {type: core.sink, params: {mode: print}}
//   edges: [images.out -> pixels.in, pixels.out -> show.in]
#include "core/handcrafted.hpp"
#include "image_types.hpp"

namespace embedflow::image {
namespace {

class PixelEmbedding final : public Node {
 public:
  void open(NodeContext& ctx) override {
    field_ = ctx.params().string("field");
    h_ = static_cast<int>(ctx.params().integer("height"));
    w_ = static_cast<int>(ctx.params().integer("width"));
    c_ = static_cast<int>(ctx.params().integer("channels"));
  }
  void process(std::size_t, const RecordPtr& in, Emitter& out) override {
    out.emit(embed_image_field(*in, field_, static_cast<std::int64_t>(h_) * w_ * c_, [&](const cv::Mat& img, float* dst) {
      if (img.channels() != c_)
        throw DataError(cat("image.pixel_embedding: images have ", img.channels(), " channels, channels says ", c_));
      pixel_vector(img, h_, w_, dst);
    }));
  }

 private:
  std::string field_;
  int h_ = 12, w_ = 16, c_ = 3;
};

}  // namespace

NodeType pixel_embedding_type() {
  return NodeTypeBuilder("image.pixel_embedding")
      .deterministic()
      .doc("Each image's downsampled pixels as its embedding: the raw-pixel baseline.")
      .example(
          "nodes:\n"
          "  images: {type: image.idx_reader, params: {split: test, limit: 8, batch_size: 4}}\n"
          "  pixels: {type: image.pixel_embedding, params: {height: 7, width: 7, channels: 1}}\n"
          "  show:   {type: core.sink, params: {mode: print}}\n"
          "edges: [images.out -> pixels.in, pixels.out -> show.in]\n")
      .param(Param::string("field").default_value("image").doc("the u8 HWC image field"))
      .param(Param::integer("height").default_value(12).range(1, 1024).doc("rows after the area resize"))
      .param(Param::integer("width").default_value(16).range(1, 1024).doc("columns after the area resize"))
      .param(Param::integer("channels").default_value(3).range(1, 4).doc("channels of the images (3: RGB, 1: grey)"))
      .input("in", "*", "records or batches with a u8 image field")
      .output("out", "*", "the image field replaced by embedding f32[B,height*width*channels]")
      .parallel()
      .check([](SchemaContext& c) {
        const Params& p = c.params();
        check_image_embedding_schema(c, p.string("field"), p.integer("height") * p.integer("width") * p.integer("channels"));
      })
      .create<PixelEmbedding>();
}

}  // namespace embedflow::image
