// image.triplet_join — joins a triplet stream (geo.pair_sampler with output: triplets: anchor,
// positive, negative, positive_m, negative_m) with images by id, giving the triplet batches of
// the contract: anchor_id, positive_id, negative_id i64[B], anchor_image, positive_image,
// negative_image [B,...]; anchor_label, positive_label, negative_label i64[B] come along when the
// table has labels, and every other triplet field (positive_m, negative_m, epoch, core.shard's
// unsharded_rows, ...) passes through, as in image.pair_join.
//
// Inputs: triplets — triplet batches (or single triplets) of ids;
//         table — side port: one record with every image (id [N], image [N,...], label [N]
//         optional), e.g. image.idx_reader with batch_size: -1
// Outputs: out — one triplet batch per input batch (single triplets give single records)
// Caveats: holds the table in memory for the whole run (Fashion-MNIST train: 47 MB as u8);
// an id missing from the table is a DataError naming it. Serial (see image.pair_join).
//
// Example (needs the geo plugin):
//   nodes:
//     photos:   {type: geo.csv_photos, params: {path: tests/geo/data/photos_small.csv, on_bad_row: skip}}
//     triplets: {type: geo.pair_sampler, params: {positive_radius_m: 10, negative_min_m: 2000, output: triplets, batch_size: 64}}
//     images:   {type: image.idx_reader, params: {split: test, batch_size: -1}}
//     join:     {type: image.triplet_join}
//     show:     {type: core.sink, params: {mode: print}}
//   edges: [photos.out -> triplets.photos, triplets.out -> join.triplets, images.out -> join.table, join.out -> show.in]
#include "core/arrays.hpp"
#include "core/join.hpp"
#include "image_types.hpp"

namespace embedflow::image {

namespace {

// The triplet fields the join turns into others; every other field passes through.
bool is_consumed(const std::string& name) { return name == "anchor" || name == "positive" || name == "negative"; }

class TripletJoin final : public ImageJoinNode {
 public:
  TripletJoin() : ImageJoinNode(is_consumed) {}

 protected:
  void join_fields(const ImageTable& table, const Record& t, std::uint64_t sequence, Record& r) const override {
    const bool scalar = t.get("anchor").rank() == 0;
    try {
      for (const char* role : {"anchor", "positive", "negative"}) join_role(table, t.get(role), role, role, image_field(), scalar, r);
    } catch (const DataError& e) {
      throw DataError(cat("triplet record ", sequence, ": ", e.what()));
    }
  }
};

}  // namespace

NodeType triplet_join_type() {
  return NodeTypeBuilder("image.triplet_join")
      .deterministic()
      .doc("Joins triplets (anchor, positive, negative ids) with images by id into triplet batches.")
      .example(
          "nodes:\n"
          "  photos:   {type: geo.csv_photos, params: {path: tests/geo/data/photos_small.csv, on_bad_row: skip}}\n"
          "  triplets: {type: geo.pair_sampler, params: {positive_radius_m: 10, negative_min_m: 2000, output: triplets, batch_size: 64}}\n"
          "  images:   {type: image.idx_reader, params: {split: test, batch_size: -1}}\n"
          "  join:     {type: image.triplet_join}\n"
          "  show:     {type: core.sink, params: {mode: print}}\n"
          "edges: [photos.out -> triplets.photos, triplets.out -> join.triplets, images.out -> join.table, join.out -> show.in]\n")
      .param(Param::string("image_field").default_value("image").doc("table field holding the images"))
      .input("triplets", "anchor: i64, positive: i64, negative: i64", "triplet batches [B] or single triplets")
      .side_input("table", "id: i64[N]", "one record with every image: id [N], image [N,...], label [N] optional")
      .output("out", "anchor_id: i64, positive_id: i64, negative_id: i64", "triplet batches")
      .check([](SchemaContext& c) {
        PortSchema out = join_schema(c, "triplets", "anchor", {"anchor", "positive", "negative"}, {});
        add_pass_through_fields(c.input("triplets"), is_consumed, out);
        c.set_output("out", out);
      })
      .create<TripletJoin>();
}

}  // namespace embedflow::image
