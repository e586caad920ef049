// image.to_tensor — converts HWC images to the CHW float layout models take: u8 [H,W,C] ->
// f32 [C,H,W] scaled by 1/255 (f32 input is transposed unscaled); batches u8 [B,H,W,C] ->
// f32 [B,C,H,W]. As torchvision's ToTensor, and the form the torch family wraps without copying.
//
// Inputs: in — records or batches with HWC image fields
// Outputs: out — the same records with the image fields as f32 CHW / BCHW
// Caveats: deterministic; parallel-safe. Inside image.augment, `to_tensor` converts to f32
// [0,1] and the CHW transpose happens once at the end of the op list.
//
//   nodes:
//     images: {type: image.idx_reader, params: {split: test, limit: 8}}
//     tensor: {type: image.to_tensor}
//     show:   {type: core.sink, params: {mode: print}}
//   edges: [images.out -> tensor.in, tensor.out -> show.in]
#include "core/arrays.hpp"
#include "core/kernels.hpp"
#include "core/ops.hpp"
#include "image_types.hpp"

namespace embedflow::image {

// HWC (or BHWC) u8/f32 -> CHW (or BCHW) f32, u8 scaled by 1/255. Exposed for tests.
Array hwc_to_chw_f32(const Array& a) {
  if (!is_hwc_image(a)) throw DataError(cat("to_tensor expects a u8 or f32 image [H,W,C] or batch [B,H,W,C], got ", a.describe()));
  const bool batch = a.rank() == 4;
  const std::int64_t b = batch ? a.dim(0) : 1;
  const std::size_t o = batch ? 1 : 0;
  const std::int64_t h = a.dim(o), w = a.dim(o + 1), c = a.dim(o + 2);
  Shape shape = batch ? Shape{b, c, h, w} : Shape{c, h, w};
  Array out = uninitialized_array(DType::f32, shape);
  float* dst = out.mutable_data<float>();
  const std::size_t hw = static_cast<std::size_t>(h * w), img = hw * static_cast<std::size_t>(c);
  auto convert = [&](auto* src, float scale) {
    for (std::int64_t i = 0; i < b; ++i) {
      const auto* s = src + static_cast<std::size_t>(i) * img;
      float* d = dst + static_cast<std::size_t>(i) * img;
      if (c == 1) {
        for (std::size_t p = 0; p < hw; ++p) d[p] = static_cast<float>(s[p]) * scale;
        continue;
      }
      for (std::size_t p = 0; p < hw; ++p)
        for (std::int64_t ch = 0; ch < c; ++ch)
          d[static_cast<std::size_t>(ch) * hw + p] = static_cast<float>(s[p * static_cast<std::size_t>(c) + static_cast<std::size_t>(ch)]) * scale;
    }
  };
  if (a.dtype() == DType::u8) convert(a.data<std::uint8_t>(), 1.0f / 255.0f);
  else convert(a.data<float>(), 1.0f);
  return out;
}

namespace {

class ToTensorOp final : public ImageOp {
 public:
  cv::Mat apply(const cv::Mat& in, Rng&) const override {
    if (in.depth() == CV_32F) return in;
    cv::Mat out;
    in.convertTo(out, CV_32F, 1.0 / 255.0);
    return out;
  }
};

class ToTensor final : public Node {
 public:
  void open(NodeContext& ctx) override { fields_ = ctx.params().strings("fields"); }
  void process(std::size_t, const RecordPtr& in, Emitter& out) override {
    Record r = *in;
    for (const std::string& f : fields_) {
      try {
        r.set(f, hwc_to_chw_f32(in->get(f)));
      } catch (const DataError& e) {
        throw DataError(cat("field '", f, "' of record ", out.sequence(), ": ", e.what()));
      }
    }
    out.emit(std::move(r));
  }

 private:
  std::vector<std::string> fields_;
};

}  // namespace

const OpSpec& to_tensor_op() {
  static const OpSpec op = [] {
    OpSpec s;
    s.name = "to_tensor";
    s.doc = "u8 [H,W,C] -> f32 [C,H,W] scaled by 1/255 (f32 input transposed unscaled); batches [B,H,W,C] -> [B,C,H,W].";
    s.effect = OpSpec::Effect::to_tensor;
    s.create = [](const Params&) -> std::unique_ptr<ImageOp> { return std::make_unique<ToTensorOp>(); };
    return s;
  }();
  return op;
}

NodeType to_tensor_type() {
  return NodeTypeBuilder("image.to_tensor")
      .deterministic()
      .doc(to_tensor_op().doc)
      .example(
          "nodes:\n"
          "  images: {type: image.idx_reader, params: {split: test, limit: 8}}\n"
          "  tensor: {type: image.to_tensor}\n"
          "  show:   {type: core.sink, params: {mode: print}}\n"
          "edges: [images.out -> tensor.in, tensor.out -> show.in]\n")
      .param(fields_param())
      .input("in", "*", "records or batches with HWC image fields (u8 or f32)")
      .output("out", "*", "the image fields as f32 [C,H,W] or [B,C,H,W]")
      .parallel()
      .check([](SchemaContext& c) {
        ImageSchemaRule rule;
        rule.to_tensor = true;
        infer_image_schema(c, c.params().strings("fields"), rule);
      })
      .create<ToTensor>();
}

}  // namespace embedflow::image
