// image.batch_pairs — labels for all pairs in a batch, for losses that want explicit pair labels
// (contrastive over all pairs, mu-weighted all-pairs contrastive):
//   mode matrix: the batch passes through with pair_labels f32[B,B], 1 where label[i] == label[j]
//                (the diagonal included), else 0;
//   mode list:   a new record with every pair i < j: a_index, b_index i64[P] (rows in the batch),
//                pair_label f32[P], a_label, b_label i64[P], a_id, b_id i64[P] (when the batch has
//                id), epoch i64[P] (when it has epoch) and, with images: true, a_image, b_image
//                [P,...] gathered from the batch: the contract's pair batch form, P = B(B-1)/2.
//
// Inputs: in — batches with label [B] (e.g. from image.class_batches / image.pk_batches)
// Outputs: out — as above
// Caveats: list mode with images copies each image B-1 times (a batch of 256 f32 28x28 images
// becomes 32640 pairs, 205 MB); prefer the matrix or indices and gather in the loss. Parallel-safe.
//
//   nodes:
//     train:   {type: image.idx_reader, params: {split: train, limit: 2000, batch_size: -1}}
//     batches: {type: image.class_batches, params: {classes_per_batch: 4, per_class: 4}}
//     pairs:   {type: image.batch_pairs, params: {mode: list}}
//     show:    {type: core.sink, params: {mode: print}}
//   edges: [train.out -> batches.table, batches.out -> pairs.in, pairs.out -> show.in]
#include "core/arrays.hpp"
#include "image_types.hpp"

namespace embedflow::image {
namespace {

class BatchPairs final : public Node {
 public:
  void open(NodeContext& ctx) override {
    const Params& p = ctx.params();
    list_ = p.string("mode") == "list";
    images_ = p.boolean("images");
    label_field_ = p.string("label_field");
    image_field_ = p.string("image_field");
  }
  void process(std::size_t, const RecordPtr& in, Emitter& out) override {
    const Array& label_array = in->get(label_field_);
    if (label_array.rank() != 1)
      throw DataError(cat("record ", out.sequence(), ": batch_pairs needs a batch with ", label_field_, " [B], got ", label_array.describe()));
    const std::vector<std::int64_t> label = int_values(label_array, label_field_);
    const auto b = static_cast<std::int64_t>(label.size());
    if (!list_) {
      std::vector<float> m(static_cast<std::size_t>(b * b));
      for (std::int64_t i = 0; i < b; ++i)
        for (std::int64_t j = 0; j < b; ++j)
          m[static_cast<std::size_t>(i * b + j)] = label[static_cast<std::size_t>(i)] == label[static_cast<std::size_t>(j)] ? 1.0f : 0.0f;
      Record r = *in;
      r.set("pair_labels", Array::from_vector<float>({b, b}, std::move(m)));
      out.emit(std::move(r));
      return;
    }
    std::vector<std::int64_t> ai, bi;
    std::vector<float> same;
    const std::size_t pairs = static_cast<std::size_t>(b * (b - 1) / 2);
    ai.reserve(pairs);
    bi.reserve(pairs);
    same.reserve(pairs);
    for (std::int64_t i = 0; i < b; ++i)
      for (std::int64_t j = i + 1; j < b; ++j) {
        ai.push_back(i);
        bi.push_back(j);
        same.push_back(label[static_cast<std::size_t>(i)] == label[static_cast<std::size_t>(j)] ? 1.0f : 0.0f);
      }
    const auto p = static_cast<std::int64_t>(pairs);
    Record r;
    r.set("a_index", Array::from_vector<std::int64_t>({p}, ai));
    r.set("b_index", Array::from_vector<std::int64_t>({p}, bi));
    r.set("pair_label", Array::from_vector<float>({p}, std::move(same)));
    r.set("a_label", take_rows(label_array, ai));
    r.set("b_label", take_rows(label_array, bi));
    if (const Array* id = in->find("id")) {
      r.set("a_id", take_rows(*id, ai));
      r.set("b_id", take_rows(*id, bi));
    }
    if (const Array* epoch = in->find("epoch")) r.set("epoch", take_rows(*epoch, ai));
    if (images_) {
      const Array& image = in->get(image_field_);
      r.set("a_image", take_rows(image, ai));
      r.set("b_image", take_rows(image, bi));
    }
    out.emit(std::move(r));
  }

 private:
  bool list_ = false, images_ = false;
  std::string label_field_, image_field_;
};

}  // namespace

NodeType batch_pairs_type() {
  return NodeTypeBuilder("image.batch_pairs")
      .deterministic()
      .doc("Labels for all pairs of a batch: a B x B same-class matrix, or the i < j pair list with pair_label "
           "(optionally with the pair images).")
      .example(
          "nodes:\n"
          "  train:   {type: image.idx_reader, params: {split: train, limit: 2000, batch_size: -1}}\n"
          "  batches: {type: image.class_batches, params: {classes_per_batch: 4, per_class: 4}}\n"
          "  pairs:   {type: image.batch_pairs, params: {mode: list}}\n"
          "  show:    {type: core.sink, params: {mode: print}}\n"
          "edges: [train.out -> batches.table, batches.out -> pairs.in, pairs.out -> show.in]\n")
      .param(Param::choice("mode", {"matrix", "list"}).default_value("matrix")
                 .doc("matrix: add pair_labels f32[B,B]; list: emit the i<j pairs with pair_label f32[P]"))
      .param(Param::boolean("images").default_value(false).doc("list mode: also gather a_image, b_image (copies each image B-1 times)"))
      .param(Param::string("label_field").default_value("label").doc("field holding the class labels"))
      .param(Param::string("image_field").default_value("image").doc("list mode with images: field holding the images"))
      .input("in", "label: i64[B]", "batches with class labels")
      .output("out", "*", "matrix: the batch plus pair_labels [B,B]; list: pair records")
      .parallel()
      .check([](SchemaContext& c) {
        const PortSchema& in = c.input("in");
        const Params& p = c.params();
        const Dim b{Dim::Kind::symbol, -1, "B"}, pn{Dim::Kind::symbol, -1, "P"};
        if (p.string("mode") == "matrix") {
          PortSchema s = in;
          if (s.is_any()) s = PortSchema::parse("label: i64[B]");
          s.add(FieldSchema{"pair_labels", DType::f32, std::vector<Dim>{b, b}});
          c.set_output("out", s);
          return;
        }
        PortSchema s;
        for (const char* f : {"a_index", "b_index", "a_label", "b_label"}) s.add(FieldSchema{f, DType::i64, std::vector<Dim>{pn}});
        s.add(FieldSchema{"pair_label", DType::f32, std::vector<Dim>{pn}});
        if (!in.is_any() && in.find("id"))
          for (const char* f : {"a_id", "b_id"}) s.add(FieldSchema{f, DType::i64, std::vector<Dim>{pn}});
        if (p.boolean("images")) {
          const FieldSchema* img = in.is_any() ? nullptr : in.find(p.string("image_field"));
          if (!in.is_any() && !img) c.error(cat("input has no field '", p.string("image_field"), "'"), "image_field");
          for (const char* f : {"a_image", "b_image"}) {
            FieldSchema g{f, img ? img->dtype : std::nullopt, std::nullopt};
            if (img && img->shape && !img->shape->empty()) {
              std::vector<Dim> d = *img->shape;
              d[0] = pn;
              g.shape = d;
            }
            s.add(g);
          }
        }
        c.set_output("out", s);
      })
      .create<BatchPairs>();
}

}  // namespace embedflow::image
