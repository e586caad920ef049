#include "core/ops.hpp"

#include <algorithm>
#include <cstring>

#include <opencv2/imgproc.hpp>

#include "core/arrays.hpp"

namespace embedflow::image {

const std::vector<const OpSpec*>& all_ops() {
  static const std::vector<const OpSpec*> ops{&resize_op(),       &random_resized_crop_op(), &flip_op(),
                                              &rotate_op(),       &color_jitter_op(),        &gaussian_blur_op(),
                                              &to_tensor_op(),    &normalize_op()};
  return ops;
}

const OpSpec* find_op(const std::string& name) {
  for (const OpSpec* op : all_ops())
    if (op->name == name) return op;
  return nullptr;
}

std::unique_ptr<ImageOp> make_op(const OpSpec& op, const Value& given, Params* resolved) {
  Params p;
  std::vector<Diagnostic> problems;
  validate_params(op.params, given, nullptr, p, problems, "");
  if (problems.empty() && op.validate) {
    std::string param;
    std::string why = op.validate(p, param);
    if (!why.empty()) problems.push_back(Diagnostic{given.where(), "", why});
  }
  if (!problems.empty()) {
    std::string all;
    for (const auto& d : problems) all += (all.empty() ? "" : "; ") + d.message;
    throw ConfigError(cat("op '", op.name, "': ", all));
  }
  if (resolved) *resolved = p;
  return op.create(p);
}

std::uint64_t record_seed(std::uint64_t node_seed, std::uint64_t sequence, const std::string& field) {
  return derive_seed(derive_seed(node_seed, sequence), field);
}

namespace {

// u8 HWC -> f32 CHW / 255 into dst (what to_tensor does, in one pass).
void u8_hwc_to_f32_chw(const cv::Mat& m, float* dst) {
  const int c = m.channels();
  const std::size_t hw = static_cast<std::size_t>(m.rows) * static_cast<std::size_t>(m.cols);
  const float scale = 1.0f / 255.0f;
  for (int y = 0; y < m.rows; ++y) {
    const std::uint8_t* s = m.ptr<std::uint8_t>(y);
    const std::size_t row = static_cast<std::size_t>(y) * static_cast<std::size_t>(m.cols);
    for (int k = 0; k < c; ++k) {
      float* d = dst + static_cast<std::size_t>(k) * hw + row;
      for (int x = 0; x < m.cols; ++x) d[x] = static_cast<float>(s[x * c + k]) * scale;
    }
  }
}

}  // namespace

Array map_images(const Array& a, std::uint64_t seed, const ImageFn& fn, bool chw_out, bool u8_to_f32) {
  if (!is_hwc_image(a))
    throw DataError(cat("expected a u8 or f32 image [H,W,C] or batch [B,H,W,C], got ", a.describe()));
  auto place = [&](const cv::Mat& m, Shape& shape) {
    const std::int64_t h = m.rows, w = m.cols, c = m.channels();
    shape = chw_out ? Shape{c, h, w} : Shape{h, w, c};
  };
  if (a.rank() == 3) {
    const cv::Mat in = image_view(a);
    Rng rng(seed);
    cv::Mat m = fn(in, rng);
    if (!chw_out) return m.data == in.data ? a : array_from_mat(std::move(m));
    Shape shape;
    place(m, shape);
    const bool convert = u8_to_f32 && m.depth() == CV_8U;
    Array out = uninitialized_array(m.depth() == CV_8U && !convert ? DType::u8 : DType::f32, shape);
    if (convert) u8_hwc_to_f32_chw(m, out.mutable_data<float>());
    else mat_to_chw(m, out.mutable_raw());
    return out;
  }
  const std::int64_t b = a.dim(0);
  Array out;
  Shape first;
  std::size_t image_bytes = 0;
  for (std::int64_t i = 0; i < b; ++i) {
    Rng rng(derive_seed(seed, static_cast<std::uint64_t>(i)));
    cv::Mat m = fn(image_view(a, i), rng);
    if (!m.isContinuous()) m = m.clone();
    Shape shape;
    place(m, shape);
    const bool convert = chw_out && u8_to_f32 && m.depth() == CV_8U;
    if (i == 0) {
      first = shape;
      Shape all = shape;
      all.insert(all.begin(), b);
      out = uninitialized_array(m.depth() == CV_8U && !convert ? DType::u8 : DType::f32, all);
      image_bytes = m.total() * static_cast<std::size_t>(m.channels()) * (convert ? sizeof(float) : m.elemSize1());
    } else if (shape != first) {
      throw DataError(cat("image ", i, " of the batch came out ", shape_str(shape), " but image 0 came out ",
                          shape_str(first), "; give the op a fixed output size"));
    }
    auto* dst = static_cast<std::uint8_t*>(out.mutable_raw()) + static_cast<std::size_t>(i) * image_bytes;
    if (convert) u8_hwc_to_f32_chw(m, reinterpret_cast<float*>(dst));
    else if (chw_out) mat_to_chw(m, dst);
    else std::memcpy(dst, m.data, image_bytes);
  }
  if (b == 0) {  // an empty batch keeps its shape
    Shape s = a.shape();
    if (chw_out) s = {0, s[3], s[1], s[2]};
    return Array::zeros(a.dtype(), s);
  }
  return out;
}

ParamSpec fields_param() {
  return Param::strings("fields")
      .default_value(std::vector<std::string>{"image"})
      .doc("image fields to transform ([H,W,C] images or [B,H,W,C] batches), e.g. [a_image, b_image] after image.pair_join");
}

namespace {
Dim fixed(std::int64_t v) { return Dim{Dim::Kind::fixed, v, ""}; }
}  // namespace

void infer_image_schema(SchemaContext& c, const std::vector<std::string>& fields, const ImageSchemaRule& rule,
                        const std::string& in, const std::string& out) {
  PortSchema s = c.input(in);
  if (s.is_any()) return;
  for (const std::string& name : fields) {
    const FieldSchema* f = s.find(name);
    if (!f) {
      c.error(cat("input has no field '", name, "' (it carries ", s.str(), ")"), "fields");
      continue;
    }
    FieldSchema g = *f;
    if (g.dtype && *g.dtype != DType::u8 && *g.dtype != DType::f32) {
      c.error(cat("field '", name, "' is ", f->str(), "; images must be u8 or f32"), "fields");
      continue;
    }
    if (rule.needs_f32 && g.dtype && *g.dtype != DType::f32)
      c.error(cat("field '", name, "' is ", f->str(), ": normalize needs f32 images (put to_tensor before it)"), "fields");
    if (rule.to_tensor) g.dtype = DType::f32;
    if (g.shape) {
      std::vector<Dim>& d = *g.shape;
      bool rest = std::any_of(d.begin(), d.end(), [](const Dim& x) { return x.kind == Dim::Kind::rest; });
      if (rest) {
        g.shape.reset();
      } else if (d.size() != 3 && d.size() != 4) {
        c.error(cat("field '", name, "' is ", f->str(), "; images are [H,W,C] or batches [B,H,W,C]"), "fields");
        continue;
      } else {
        const std::size_t o = d.size() == 4 ? 1 : 0;
        if (rule.has_size) {
          d[o] = fixed(rule.height);
          d[o + 1] = fixed(rule.width);
        }
        if (rule.to_tensor) {
          Dim ch = d[o + 2];
          d.erase(d.begin() + static_cast<std::ptrdiff_t>(o + 2));
          d.insert(d.begin() + static_cast<std::ptrdiff_t>(o), ch);
        }
      }
    } else if (rule.has_size || rule.to_tensor) {
      g.shape.reset();
    }
    s.add(std::move(g));
  }
  c.set_output(out, s);
}

namespace {

class OpNode final : public Node {
 public:
  OpNode() = default;
  explicit OpNode(const OpSpec* spec) : spec_(spec) {}
  void open(NodeContext& ctx) override {
    op_ = spec_->create(ctx.params());
    fields_ = ctx.params().strings("fields");
    seed_ = ctx.seed();
  }
  void process(std::size_t, const RecordPtr& in, Emitter& out) override {
    Record r = *in;
    const ImageOp& op = *op_;
    for (const std::string& f : fields_) {
      const Array& a = in->get(f);
      try {
        r.set(f, map_images(a, record_seed(seed_, out.sequence(), f),
                            [&op](const cv::Mat& m, Rng& rng) { return op.apply(m, rng); }, false));
      } catch (const cv::Exception& e) {
        throw DataError(cat("field '", f, "' (", a.describe(), ") of record ", out.sequence(), ": OpenCV: ", e.what()));
      }
    }
    out.emit(std::move(r));
  }

 private:
  const OpSpec* spec_ = nullptr;
  std::unique_ptr<ImageOp> op_;
  std::vector<std::string> fields_;
  std::uint64_t seed_ = 0;
};

}  // namespace

NodeType op_node_type(const OpSpec& op) {
  NodeTypeBuilder b("image." + op.name);
  b.doc(op.doc).example(op.example);
  for (const ParamSpec& p : op.params) b.param(p);
  b.param(fields_param());
  b.input("in", "*", "records or batches with HWC image fields (u8 or f32)");
  b.output("out", "*", "the same records with the image fields transformed");
  b.parallel();
  const OpSpec* spec = &op;
  b.check([spec](SchemaContext& c) {
    const Params& p = c.params();
    if (spec->validate) {
      std::string param;
      std::string why = spec->validate(p, param);
      if (!why.empty()) c.error(why, param);
    }
    ImageSchemaRule rule;
    if (spec->size) rule.has_size = spec->size(p, rule.height, rule.width);
    infer_image_schema(c, p.strings("fields"), rule);
  });
  NodeType t = b.create<OpNode>();
  t.create = [spec] { return std::unique_ptr<Node>(new OpNode(spec)); };
  return t;
}

cv::Mat resize_image(const cv::Mat& in, cv::Size size, int interpolation, bool antialias) {
  cv::Mat out;
  const bool shrink_x = size.width < in.cols, shrink_y = size.height < in.rows;
  const bool smooth = interpolation == cv::INTER_LINEAR || interpolation == cv::INTER_CUBIC;
  if (!antialias || !smooth || (!shrink_x && !shrink_y)) {
    cv::resize(in, out, size, 0, 0, interpolation);
  } else if (shrink_x && shrink_y) {
    cv::resize(in, out, size, 0, 0, cv::INTER_AREA);
  } else {
    // One axis shrinks, the other grows: area along the first, then the interpolation along
    // the second (each pass leaves the other axis untouched).
    cv::Mat half;
    const cv::Size first = shrink_x ? cv::Size(size.width, in.rows) : cv::Size(in.cols, size.height);
    cv::resize(in, half, first, 0, 0, cv::INTER_AREA);
    cv::resize(half, out, size, 0, 0, interpolation);
  }
  return out;
}

ParamSpec antialias_param() {
  return Param::boolean("antialias").default_value(true).doc(
      "when shrinking with linear or cubic, average the covered area (INTER_AREA) as PIL and torchvision's "
      "antialias=True do; false: plain cv::resize, which aliases below half size");
}

ParamSpec interpolation_param(const std::string& default_value) {
  return Param::choice("interpolation", {"nearest", "linear", "cubic", "area"})
      .default_value(default_value)
      .doc("OpenCV interpolation: nearest, linear (bilinear), cubic (bicubic) or area (best for shrinking)");
}

int interpolation_flag(const std::string& name) {
  if (name == "nearest") return cv::INTER_NEAREST;
  if (name == "cubic") return cv::INTER_CUBIC;
  if (name == "area") return cv::INTER_AREA;
  return cv::INTER_LINEAR;
}

std::string check_range(const Params& p, const std::string& name, double min, double max, std::string& param) {
  const auto v = p.numbers(name);
  if (v.size() != 2) {
    param = name;
    return cat(name, " must be [lo, hi], got ", v.size(), " numbers");
  }
  if (v[0] > v[1]) {
    param = name;
    return cat(name, " [", v[0], ", ", v[1], "] runs backwards");
  }
  if (v[0] < min || v[1] > max) {
    param = name;
    return cat(name, " [", v[0], ", ", v[1], "] must lie within [", min, ", ", max, "]");
  }
  return "";
}

}  // namespace embedflow::image
