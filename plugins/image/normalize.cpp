// image.normalize — per-channel standardisation of f32 CHW tensors: v' = (v - mean[c]) / std[c]
// (torchvision's Normalize). Works on [C,H,W] records and [B,C,H,W] batches, i.e. after
// image.to_tensor; mean and std hold one value (every channel) or one per channel.
//
// Inputs: in — records or batches with f32 CHW image fields
// Outputs: out — the same records, same shapes
// Caveats: deterministic; parallel-safe. Inside image.augment, `normalize` runs on the f32 HWC
// image after `to_tensor` (the transpose to CHW happens at the end of the list).
//
//   nodes:
//     images: {type: image.idx_reader, params: {split: test, limit: 8}}
//     tensor: {type: image.to_tensor}
//     norm:   {type: image.normalize, params: {mean: [0.2860], std: [0.3530]}}
//     show:   {type: core.sink, params: {mode: print}}
//   edges: [images.out -> tensor.in, tensor.out -> norm.in, norm.out -> show.in]
#include "core/arrays.hpp"
#include "core/kernels.hpp"
#include "core/ops.hpp"
#include "image_types.hpp"

namespace embedflow::image {

// (v - mean[c]) / std[c] over an f32 CHW image or BCHW batch. Exposed for tests.
Array normalize_chw(const Array& a, const std::vector<double>& mean, const std::vector<double>& std_dev) {
  if (a.dtype() != DType::f32 || (a.rank() != 3 && a.rank() != 4))
    throw DataError(cat("normalize expects an f32 tensor [C,H,W] or [B,C,H,W] (after image.to_tensor), got ", a.describe()));
  const bool batch = a.rank() == 4;
  const std::size_t o = batch ? 1 : 0;
  const std::int64_t b = batch ? a.dim(0) : 1, c = a.dim(o), hw = a.dim(o + 1) * a.dim(o + 2);
  if (mean.size() != 1 && static_cast<std::int64_t>(mean.size()) != c)
    throw DataError(cat("normalize has ", mean.size(), " means for ", c, " channels (", a.describe(), ")"));
  if (std_dev.size() != 1 && static_cast<std::int64_t>(std_dev.size()) != c)
    throw DataError(cat("normalize has ", std_dev.size(), " stds for ", c, " channels (", a.describe(), ")"));
  Array out = Array::zeros(DType::f32, a.shape());
  const float* src = a.data<float>();
  float* dst = out.mutable_data<float>();
  for (std::int64_t i = 0; i < b; ++i)
    for (std::int64_t ch = 0; ch < c; ++ch) {
      const auto m = static_cast<float>(mean.size() == 1 ? mean[0] : mean[static_cast<std::size_t>(ch)]);
      const auto inv = static_cast<float>(1.0 / (std_dev.size() == 1 ? std_dev[0] : std_dev[static_cast<std::size_t>(ch)]));
      const std::size_t base = static_cast<std::size_t>((i * c + ch) * hw);
      for (std::int64_t p = 0; p < hw; ++p) dst[base + static_cast<std::size_t>(p)] = (src[base + static_cast<std::size_t>(p)] - m) * inv;
    }
  return out;
}

namespace {

std::string check_mean_std(const Params& p, std::string& param) {
  const auto m = p.numbers("mean"), s = p.numbers("std");
  if (m.empty()) {
    param = "mean";
    return "mean needs at least one value";
  }
  if (s.empty()) {
    param = "std";
    return "std needs at least one value";
  }
  for (double v : s)
    if (!(v > 0)) {
      param = "std";
      return cat("std values must be > 0, got ", v);
    }
  if (m.size() != 1 && s.size() != 1 && m.size() != s.size()) {
    param = "std";
    return cat("mean has ", m.size(), " values and std ", s.size(), "; give one each or one per channel");
  }
  return "";
}

// Inside image.augment: per-channel standardisation of the f32 HWC image.
class NormalizeOp final : public ImageOp {
 public:
  explicit NormalizeOp(const Params& p) : mean_(p.numbers("mean")), std_(p.numbers("std")) {}
  cv::Mat apply(const cv::Mat& in, Rng&) const override {
    if (in.depth() != CV_32F) throw DataError("normalize needs f32 images: put to_tensor before it in the op list");
    const int c = in.channels();
    if ((mean_.size() != 1 && static_cast<int>(mean_.size()) != c) || (std_.size() != 1 && static_cast<int>(std_.size()) != c))
      throw DataError(cat("normalize has ", mean_.size(), " means and ", std_.size(), " stds for ", c, " channels"));
    cv::Mat out(in.size(), in.type());
    cv::Mat src = in.isContinuous() ? in : in.clone();
    const float* s = src.ptr<float>();
    float* d = out.ptr<float>();
    const std::size_t pixels = src.total();
    for (std::size_t p = 0; p < pixels; ++p)
      for (int ch = 0; ch < c; ++ch) {
        const double m = mean_.size() == 1 ? mean_[0] : mean_[static_cast<std::size_t>(ch)];
        const double sd = std_.size() == 1 ? std_[0] : std_[static_cast<std::size_t>(ch)];
        const std::size_t k = p * static_cast<std::size_t>(c) + static_cast<std::size_t>(ch);
        d[k] = static_cast<float>((s[k] - m) / sd);
      }
    return out;
  }

 private:
  std::vector<double> mean_, std_;
};

class Normalize final : public Node {
 public:
  void open(NodeContext& ctx) override {
    fields_ = ctx.params().strings("fields");
    mean_ = ctx.params().numbers("mean");
    std_ = ctx.params().numbers("std");
  }
  void process(std::size_t, const RecordPtr& in, Emitter& out) override {
    Record r = *in;
    for (const std::string& f : fields_) {
      try {
        r.set(f, normalize_chw(in->get(f), mean_, std_));
      } catch (const DataError& e) {
        throw DataError(cat("field '", f, "' of record ", out.sequence(), ": ", e.what()));
      }
    }
    out.emit(std::move(r));
  }

 private:
  std::vector<std::string> fields_;
  std::vector<double> mean_, std_;
};

}  // namespace

const OpSpec& normalize_op() {
  static const OpSpec op = [] {
    OpSpec s;
    s.name = "normalize";
    s.doc = "Per-channel (v - mean) / std on f32 CHW tensors (torchvision Normalize).";
    s.effect = OpSpec::Effect::normalize;
    s.params = {Param::numbers("mean").doc("per-channel means (one value: every channel), e.g. [0.2860] for Fashion-MNIST"),
                Param::numbers("std").doc("per-channel standard deviations (> 0), e.g. [0.3530] for Fashion-MNIST")};
    s.validate = check_mean_std;
    s.create = [](const Params& p) -> std::unique_ptr<ImageOp> { return std::make_unique<NormalizeOp>(p); };
    return s;
  }();
  return op;
}

NodeType normalize_type() {
  NodeTypeBuilder b("image.normalize");
  b.doc(normalize_op().doc)
      .example(
          "nodes:\n"
          "  images: {type: image.idx_reader, params: {split: test, limit: 8}}\n"
          "  tensor: {type: image.to_tensor}\n"
          "  norm:   {type: image.normalize, params: {mean: [0.2860], std: [0.3530]}}\n"
          "  show:   {type: core.sink, params: {mode: print}}\n"
          "edges: [images.out -> tensor.in, tensor.out -> norm.in, norm.out -> show.in]\n");
  for (const ParamSpec& p : normalize_op().params) b.param(p);
  return b.param(fields_param())
      .input("in", "*", "records or batches with f32 [C,H,W] / [B,C,H,W] image fields")
      .output("out", "*", "the same records, standardised")
      .parallel()
      .forward("in", "out")
      .check([](SchemaContext& c) {
        std::string param;
        std::string why = check_mean_std(c.params(), param);
        if (!why.empty()) c.error(why, param);
        const PortSchema& s = c.input("in");
        if (s.is_any()) return;
        for (const std::string& name : c.params().strings("fields")) {
          const FieldSchema* f = s.find(name);
          if (!f) c.error(cat("input has no field '", name, "' (it carries ", s.str(), ")"), "fields");
          else if (f->dtype && *f->dtype != DType::f32)
            c.error(cat("field '", name, "' is ", f->str(), "; normalize needs f32 CHW tensors (put image.to_tensor before it)"), "fields");
        }
      })
      .create<Normalize>();
}

}  // namespace embedflow::image
