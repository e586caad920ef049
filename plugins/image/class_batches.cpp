// image.class_batches — class-stratified batches covering every image each epoch: each batch
// holds `per_class` (K) images from each of `classes_per_batch` (N) distinct classes, K
// consecutive rows per class. Per epoch, each class's images are shuffled and cut into groups of
// K; batches draw one group from each of the N classes with the most groups left (random ties),
// so N classes stay available as long as possible. A class whose size is not a multiple of K
// has its last group padded with other images of the class (incomplete: pad; every image then
// appears at least once, exactly once otherwise) or dropped (incomplete: drop).
//
// Inputs: table — side port: one record holding every image (id [N], label [N], image [N,...]
//         and any other fields), e.g. image.idx_reader with batch_size: -1, or image.collect
// Outputs: out — batches {id: i64[B], label: i64[B], epoch: i64[B], image: [B,...], ...}
// Caveats: a source: it starts once the table arrives and emits with the graph's back-pressure,
// so epochs are never queued ahead. Holds the table (Fashion-MNIST train: 47 MB as u8). Put
// augmenters after it so every epoch gets fresh augmentations. When fewer than N classes have
// groups left at the end of an epoch, their groups form smaller batches unless drop_last. Seeded
// from the node seed and the epoch; one table per run (a second one is an error).
//
//   nodes:
//     train:   {type: image.idx_reader, params: {split: train, classes: "0-4", batch_size: -1}}
//     batches: {type: image.class_batches, params: {classes_per_batch: 5, per_class: 8, epochs: 2}}
//     count:   {type: core.sink, params: {mode: count, expect: 1500}}
//   edges: [train.out -> batches.table, batches.out -> count.in]
#include "core/class_batcher.hpp"
#include "image_types.hpp"

namespace embedflow::image {
namespace {

class ClassBatches final : public ClassBatcher {
 public:
  ClassBatches() : ClassBatcher("class_batches plans its epochs over one table per run") {}
  void open(NodeContext& ctx) override {
    open_batcher(ctx);
    const Params& p = ctx.params();
    o_.classes_per_batch = static_cast<int>(p.integer("classes_per_batch"));
    o_.per_class = static_cast<int>(p.integer("per_class"));
    o_.incomplete = p.string("incomplete") == "drop" ? Incomplete::drop : Incomplete::pad;
    o_.drop_last = p.boolean("drop_last");
  }
  bool produce(Emitter& out) override {
    if (!loaded_) load();
    while (pos_ >= plan_.size()) {
      if (++epoch_ >= epochs_) return false;
      plan_epoch();
    }
    out.emit(table_.batch(plan_[pos_++], epoch_));
    return true;
  }

 private:
  void load() {
    const std::size_t classes = load_table(o_.classes_per_batch, "classes_per_batch");
    plan_epoch();
    ctx_->set_expected_items(plan_.size() * static_cast<std::uint64_t>(epochs_));
    std::size_t smaller = 0;
    for (const auto& b : plan_) smaller += b.size() < static_cast<std::size_t>(o_.classes_per_batch * o_.per_class);
    log_info(ctx_->id(), table_.rows.size(), " images in ", classes, " classes; ", plan_.size(), " batches of ",
             o_.classes_per_batch, " classes x ", o_.per_class, " per epoch", smaller ? cat(" (", smaller, " with fewer classes)") : "",
             ", ", epochs_, " epochs");
  }
  void plan_epoch() {
    Rng rng(derive_seed(ctx_->seed(), static_cast<std::uint64_t>(epoch_)));
    plan_ = class_batch_plan(table_.index, o_, rng);
    pos_ = 0;
  }

  ClassBatchOptions o_;
  std::vector<std::vector<std::int64_t>> plan_;
  std::size_t pos_ = 0;
};

}  // namespace

NodeType class_batches_type() {
  NodeTypeBuilder b("image.class_batches");
  b.doc("Class-stratified batches: K images from each of N classes per batch, covering every image each epoch.")
      .example(
          "nodes:\n"
          "  train:   {type: image.idx_reader, params: {split: train, classes: \"0-4\", batch_size: -1}}\n"
          "  batches: {type: image.class_batches, params: {classes_per_batch: 5, per_class: 8, epochs: 2}}\n"
          "  count:   {type: core.sink, params: {mode: count, expect: 1500}}\n"
          "edges: [train.out -> batches.table, batches.out -> count.in]\n")
      .source()
      .param(Param::integer("classes_per_batch").default_value(8).min(1).doc("N: distinct classes in each batch"))
      .param(Param::integer("per_class").default_value(4).min(1).doc("K: images of each class in each batch"))
      .param(Param::integer("epochs").default_value(1).min(1).doc("passes over the table; batches carry their epoch"))
      .param(Param::choice("incomplete", {"pad", "drop"}).default_value("pad")
                 .doc("a class's last group short of K: pad it with other images of the class, or drop it"))
      .param(Param::boolean("drop_last").default_value(false)
                 .doc("drop the end-of-epoch batches that have fewer than N classes"));
  add_class_batcher_ports(b, "batches of N x K images with every table field");
  return b.create<ClassBatches>();
}

}  // namespace embedflow::image
