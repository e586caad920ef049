// image.pair_join — joins a pair stream (geo.pair_sampler's output: anchor, other, label, and
// distance_m) with images by id, giving the siamese pair batches of the contract:
// a_id, b_id i64[B], a_image, b_image [B,...], pair_label f32[B] (1 similar, 0 dissimilar),
// and a_label, b_label i64[B] (class labels) when the table has labels. Every other field of the
// pair record (distance_m, and crowd.grid_reader's worker, grid, epoch, members, ...) passes
// through unchanged, so a CEN trainer sees who labelled the pair on which grid.
//
// Inputs: pairs — pair batches (or single pairs) with anchor, other i64, label i64 (0/1);
//         table — side port: one record with every image (id [N], image [N,...], label [N]
//         optional), e.g. image.idx_reader with batch_size: -1 (then image.to_tensor on the
//         table, or augmenters with fields [a_image, b_image] after this node)
// Outputs: out — one pair batch per input batch (single pairs give single records); a pair field
//          whose name the join itself produces (a_id, a_image, pair_label, ...) is not passed
//          through: the join's value wins.
// Caveats: holds the table in memory for the whole run (Fashion-MNIST train: 47 MB as u8,
// 188 MB as f32) plus one output batch; set the sampler's batch_size to the training
// batch size. An id missing from the table is a DataError naming it; duplicate table ids too.
// Pair streams wait until the table has arrived. Serial: gathering a batch costs little next to
// training on it, and the engine checks a side port's end of stream before a parallel node
// may have processed its value.
//
// Example (geotagged photo ids 1..2000 from the geo tests, joined with Fashion-MNIST test images
// of the same ids; needs the geo plugin):
//   nodes:
//     photos: {type: geo.csv_photos, params: {path: tests/geo/data/photos_small.csv, on_bad_row: skip}}
//     pairs:  {type: geo.pair_sampler, params: {positive_radius_m: 10, negative_min_m: 2000, batch_size: 64}}
//     images: {type: image.idx_reader, params: {split: test, batch_size: -1}}
//     join:   {type: image.pair_join}
//     show:   {type: core.sink, params: {mode: print}}
//   edges: [photos.out -> pairs.photos, pairs.out -> join.pairs, images.out -> join.table, join.out -> show.in]
#include "core/arrays.hpp"
#include "core/join.hpp"
#include "image_types.hpp"

namespace embedflow::image {

namespace {

// The pair fields the join turns into others; every other field passes through.
bool is_consumed(const std::string& name) { return name == "anchor" || name == "other" || name == "label"; }

class PairJoin final : public ImageJoinNode {
 public:
  PairJoin() : ImageJoinNode(is_consumed) {}

 protected:
  void join_fields(const ImageTable& table, const Record& p, std::uint64_t sequence, Record& r) const override {
    const Array& anchor = p.get("anchor");
    const bool scalar = anchor.rank() == 0;
    try {
      join_role(table, anchor, "anchor", "a", image_field(), scalar, r);
      join_role(table, p.get("other"), "other", "b", image_field(), scalar, r);
    } catch (const DataError& e) {
      throw DataError(cat("pair record ", sequence, ": ", e.what()));
    }
    const Array& label = p.get("label");
    const std::int64_t n = label.numel();
    std::vector<float> pl(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) pl[static_cast<std::size_t>(i)] = static_cast<float>(label.as_double(i));
    Array pair_label = Array::from_vector<float>({n}, std::move(pl));
    r.set("pair_label", scalar ? pair_label.row(0) : pair_label);
  }
};

}  // namespace

NodeType pair_join_type() {
  return NodeTypeBuilder("image.pair_join")
      .deterministic()
      .doc("Joins pairs (anchor, other, label) with images by id into pair batches: a_id, b_id, a_image, b_image, "
           "pair_label (f32); every other pair field (distance_m, worker, grid, epoch, ...) passes through.")
      .example(
          "nodes:\n"
          "  photos: {type: geo.csv_photos, params: {path: tests/geo/data/photos_small.csv, on_bad_row: skip}}\n"
          "  pairs:  {type: geo.pair_sampler, params: {positive_radius_m: 10, negative_min_m: 2000, batch_size: 64}}\n"
          "  images: {type: image.idx_reader, params: {split: test, batch_size: -1}}\n"
          "  join:   {type: image.pair_join}\n"
          "  show:   {type: core.sink, params: {mode: print}}\n"
          "edges: [photos.out -> pairs.photos, pairs.out -> join.pairs, images.out -> join.table, join.out -> show.in]\n")
      .param(Param::string("image_field").default_value("image").doc("table field holding the images"))
      .input("pairs", "anchor: i64, other: i64, label: i64", "pair batches [B] or single pairs, as geo.pair_sampler emits")
      .side_input("table", "id: i64[N]", "one record with every image: id [N], image [N,...], label [N] optional")
      .output("out", "a_id: i64, b_id: i64, pair_label: f32", "pair batches")
      .check([](SchemaContext& c) {
        PortSchema out = join_schema(c, "pairs", "anchor", {"a", "b"}, {{"pair_label", DType::f32}});
        add_pass_through_fields(c.input("pairs"), is_consumed, out);
        c.set_output("out", out);
      })
      .create<PairJoin>();
}

}  // namespace embedflow::image
