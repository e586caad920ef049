// image.augment — a list of image ops applied in order in one node, like torchvision's
// Compose. Each item is {op: NAME, ...that op's parameters} (or just NAME for an op without
// required parameters); the ops and their parameters are exactly those of the single-op nodes:
// resize, random_resized_crop, flip, rotate, color_jitter, gaussian_blur, to_tensor, normalize.
// One node instead of a chain saves a record per op and keeps the pipeline in one place.
//
// Inputs: in — records or batches with HWC image fields (u8 or f32)
// Outputs: out — the same records; with to_tensor in the list the fields leave as f32 [C,H,W]
//          ([B,C,H,W] for batches), otherwise HWC as they came.
// Caveats: after to_tensor the ops see f32 images in [0,1] (HWC internally; the CHW transpose
// happens once at the end), so normalize must follow to_tensor. One generator per image,
// seeded from (node seed, record sequence, field, index in batch), feeds the ops in order:
// identical output for any --threads.
//
//   nodes:
//     images: {type: image.idx_reader, params: {split: test, limit: 8}}
//     aug:    {type: image.augment, params: {ops: [{op: random_resized_crop, height: 28, width: 28, scale: [0.7, 1.0]},
//                                                  {op: flip, horizontal_p: 0.5}, to_tensor,
//                                                  {op: normalize, mean: [0.2860], std: [0.3530]}]}}
//     show:   {type: core.sink, params: {mode: print}}
//   edges: [images.out -> aug.in, aug.out -> show.in]
#include <embedflow/suggest.hpp>

#include "core/arrays.hpp"
#include "core/ops.hpp"
#include "image_types.hpp"

namespace embedflow::image {
namespace {

struct ParsedOp {
  const OpSpec* spec = nullptr;
  Value params;  // the item without its `op` key
};

// Splits the `ops` list into (op, params) items; problems name the item.
std::vector<ParsedOp> parse_ops(const Value& ops, std::vector<std::string>& problems) {
  std::vector<ParsedOp> out;
  if (!ops.is_list()) {
    problems.push_back(cat("ops must be a list of {op: NAME, ...params}, got ", ops.kind_name()));
    return out;
  }
  std::vector<std::string> names;
  for (const OpSpec* s : all_ops()) names.push_back(s->name);
  std::string known;
  for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
  std::size_t index = 0;
  for (const Value& item : ops.as_list()) {
    ParsedOp p;
    std::string name;
    Value rest = Value::map({});
    rest.at(item.where());
    if (item.is_string()) {
      name = item.as_string();
    } else if (item.is_map() && item.get("op") && item.get("op")->is_string()) {
      name = item.get("op")->as_string();
      for (const auto& [k, v] : item.as_map())
        if (k != "op") rest.set(k, v);
    } else {
      problems.push_back(cat("ops[", index, "] must be {op: NAME, ...params} or NAME, got ", item.str()));
      ++index;
      continue;
    }
    p.spec = find_op(name);
    if (!p.spec) {
      problems.push_back(cat("ops[", index, "]: unknown op '", name, "'", did_you_mean(name, names),
                             " (ops: ", known, ")"));
    }
    p.params = rest;
    out.push_back(std::move(p));
    ++index;
  }
  if (out.empty() && problems.empty()) problems.push_back("ops is empty; give at least one op");
  return out;
}

class Augment final : public Node {
 public:
  void open(NodeContext& ctx) override {
    std::vector<std::string> problems;
    for (ParsedOp& p : parse_ops(ctx.params().value("ops"), problems)) {
      if (!p.spec) continue;
      if (p.spec->effect == OpSpec::Effect::to_tensor) chw_ = true;
      ops_.push_back(make_op(*p.spec, p.params));
    }
    if (!problems.empty()) throw ConfigError(problems.front());
    // A to_tensor ending the list is done while writing the output (u8 -> f32 CHW in one pass),
    // so u8 images never become f32 HWC copies first.
    std::vector<ParsedOp> parsed = parse_ops(ctx.params().value("ops"), problems);
    if (!parsed.empty() && parsed.back().spec && parsed.back().spec->effect == OpSpec::Effect::to_tensor) {
      ops_.pop_back();
      to_tensor_last_ = true;
    }
    fields_ = ctx.params().strings("fields");
    seed_ = ctx.seed();
  }
  void process(std::size_t, const RecordPtr& in, Emitter& out) override {
    Record r = *in;
    auto fn = [this](const cv::Mat& m, Rng& rng) {
      cv::Mat x = m;
      for (const auto& op : ops_) x = op->apply(x, rng);
      return x;
    };
    for (const std::string& f : fields_) {
      const Array& a = in->get(f);
      try {
        r.set(f, map_images(a, record_seed(seed_, out.sequence(), f), fn, chw_, to_tensor_last_));
      } catch (const cv::Exception& e) {
        throw DataError(cat("field '", f, "' (", a.describe(), ") of record ", out.sequence(), ": OpenCV: ", e.what()));
      }
    }
    out.emit(std::move(r));
  }

 private:
  std::vector<std::unique_ptr<ImageOp>> ops_;
  std::vector<std::string> fields_;
  std::uint64_t seed_ = 0;
  bool chw_ = false, to_tensor_last_ = false;
};

}  // namespace

NodeType augment_type() {
  std::string ops_doc = "list of {op: NAME, ...params} (or NAME) applied in order; ops: ";
  for (const OpSpec* s : all_ops()) ops_doc += s->name + (s == all_ops().back() ? "" : ", ");
  ops_doc += " (parameters as the image.<op> nodes)";
  return NodeTypeBuilder("image.augment")
      .doc("Applies a list of image ops in order in one node (torchvision Compose): resize, random_resized_crop, flip, "
           "rotate, color_jitter, gaussian_blur, to_tensor, normalize.")
      .example(
          "nodes:\n"
          "  images: {type: image.idx_reader, params: {split: test, limit: 8}}\n"
          "  aug:    {type: image.augment, params: {ops: [{op: random_resized_crop, height: 28, width: 28, scale: [0.7, 1.0]},\n"
          "                                               {op: flip, horizontal_p: 0.5}, to_tensor,\n"
          "                                               {op: normalize, mean: [0.2860], std: [0.3530]}]}}\n"
          "  show:   {type: core.sink, params: {mode: print}}\n"
          "edges: [images.out -> aug.in, aug.out -> show.in]\n")
      .param(Param::any("ops").doc(ops_doc))
      .param(fields_param())
      .input("in", "*", "records or batches with HWC image fields (u8 or f32)")
      .output("out", "*", "the transformed records (f32 CHW after to_tensor)")
      .parallel()
      .check([](SchemaContext& c) {
        std::vector<std::string> problems;
        std::vector<ParsedOp> ops = parse_ops(c.params().value("ops"), problems);
        for (const auto& p : problems) c.error(p, "ops");
        ImageSchemaRule rule;
        bool f32 = false;
        const PortSchema& in = c.input("in");
        if (!in.is_any()) {
          // f32 from the start only when every transformed field is declared f32.
          f32 = true;
          for (const auto& name : c.params().strings("fields")) {
            const FieldSchema* f = in.find(name);
            f32 = f32 && f && f->dtype && *f->dtype == DType::f32;
          }
        }
        std::size_t index = 0;
        for (const ParsedOp& p : ops) {
          if (!p.spec) {
            ++index;
            continue;
          }
          Params resolved;
          try {
            make_op(*p.spec, p.params, &resolved);
          } catch (const ConfigError& e) {
            c.error(cat("ops[", index, "]: ", e.what()), "ops");
            ++index;
            continue;
          }
          if (p.spec->effect == OpSpec::Effect::to_tensor) {
            rule.to_tensor = true;
            f32 = true;
          }
          if (p.spec->effect == OpSpec::Effect::normalize && !f32)
            c.error(cat("ops[", index, "]: normalize needs f32 images; put to_tensor before it"), "ops");
          std::int64_t h = 0, w = 0;
          if (p.spec->size && p.spec->size(resolved, h, w)) {
            rule.has_size = true;
            rule.height = h;
            rule.width = w;
          }
          ++index;
        }
        infer_image_schema(c, c.params().strings("fields"), rule);
      })
      .create<Augment>();
}

}  // namespace embedflow::image
