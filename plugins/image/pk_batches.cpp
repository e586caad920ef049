// image.pk_batches — PK batches for batch-hard / batch-all triplet mining (Hermans et al., "In
// Defense of the Triplet Loss"): each batch draws P distinct classes uniformly and K images of
// each (without replacement when the class has K, else with), K consecutive rows per class.
// Unlike image.class_batches it does not cover the data: an "epoch" is batches_per_epoch random
// batches (default: table size / (P K)).
//
// Inputs: table — side port: one record with every image (id [N], label [N], image [N,...])
// Outputs: out — batches {id: i64[B], label: i64[B], epoch: i64[B], image: [B,...], ...}, B = P K
// Caveats: a source with back-pressure (starts when the table arrives); holds the table. Batch j
// of epoch e is seeded from (node seed, e, j). Fewer than P classes in the table is an error.
//
//   nodes:
//     train: {type: image.idx_reader, params: {split: train, classes: "0-4", batch_size: -1}}
//     pk:    {type: image.pk_batches, params: {p: 4, k: 8, batches_per_epoch: 100}}
//     count: {type: core.sink, params: {mode: count, expect: 100}}
//   edges: [train.out -> pk.table, pk.out -> count.in]
#include "core/class_batcher.hpp"
#include "image_types.hpp"

namespace embedflow::image {
namespace {

class PkBatches final : public ClassBatcher {
 public:
  PkBatches() : ClassBatcher("pk_batches samples from one table per run") {}
  void open(NodeContext& ctx) override {
    open_batcher(ctx);
    const Params& p = ctx.params();
    p_ = static_cast<int>(p.integer("p"));
    k_ = static_cast<int>(p.integer("k"));
    per_epoch_ = p.integer("batches_per_epoch");
  }
  bool produce(Emitter& out) override {
    if (!loaded_) load();
    if (batch_ >= per_epoch_) {
      if (++epoch_ >= epochs_) return false;
      batch_ = 0;
    }
    Rng rng(derive_seed(derive_seed(ctx_->seed(), static_cast<std::uint64_t>(epoch_)), static_cast<std::uint64_t>(batch_)));
    out.emit(table_.batch(pk_batch(table_.index, p_, k_, rng), epoch_));
    ++batch_;
    return true;
  }

 private:
  void load() {
    const std::size_t classes = load_table(p_, "p");
    if (per_epoch_ == 0) per_epoch_ = std::max<std::int64_t>(1, static_cast<std::int64_t>(table_.rows.size()) / (p_ * k_));
    ctx_->set_expected_items(static_cast<std::uint64_t>(per_epoch_ * epochs_));
    log_info(ctx_->id(), table_.rows.size(), " images in ", classes, " classes; ", per_epoch_, " batches of P=", p_, " x K=", k_,
             " per epoch, ", epochs_, " epochs");
  }

  int p_ = 8, k_ = 4;
  std::int64_t per_epoch_ = 0, batch_ = 0;
};

}  // namespace

NodeType pk_batches_type() {
  NodeTypeBuilder b("image.pk_batches");
  b.doc("PK batches for batch-hard mining: P random classes x K random images each.")
      .example(
          "nodes:\n"
          "  train: {type: image.idx_reader, params: {split: train, classes: \"0-4\", batch_size: -1}}\n"
          "  pk:    {type: image.pk_batches, params: {p: 4, k: 8, batches_per_epoch: 100}}\n"
          "  count: {type: core.sink, params: {mode: count, expect: 100}}\n"
          "edges: [train.out -> pk.table, pk.out -> count.in]\n")
      .source()
      .param(Param::integer("p").default_value(8).min(1).doc("P: distinct classes per batch"))
      .param(Param::integer("k").default_value(4).min(1).doc("K: images per class per batch"))
      .param(Param::integer("batches_per_epoch").default_value(0).min(0).doc("batches per epoch; 0: table size / (P K)"))
      .param(Param::integer("epochs").default_value(1).min(1).doc("epochs; batches carry their epoch"));
  add_class_batcher_ports(b, "batches of P x K images with every table field");
  return b.create<PkBatches>();
}

}  // namespace embedflow::image
