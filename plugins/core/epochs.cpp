// core.epochs — passes over a finite stream: holds every record that arrives (up to
// `max_records`), then at end of stream emits them `epochs` times, each pass in a new seeded
// order (shuffle: true) or as they came. Downstream nodes see each pass as new records, so an
// augmenter after it draws fresh augmentations every epoch (its per-record seeds follow the
// record's place in its input stream), where a trainer replaying its first pass from memory
// would train on one frozen augmentation for ever. It stops emitting once every consumer is
// done (a trainer past max_steps says so), so no pass is decoded and augmented for a trainer
// that has stopped; `records` stops after that many records in all.
//
// Inputs: in   Outputs: out (the records, `epochs` times)
// Caveats: memory holds one pass (shared records, not copies); a pass is emitted after the whole
// input has arrived.
//
// Example graph: `embedflow inspect core.epochs`.
#include <algorithm>

#include "core_types.hpp"

namespace embedflow::core {
namespace {

class Epochs final : public Node {
 public:
  void open(NodeContext& ctx) override {
    const Params& p = ctx.params();
    epochs_ = p.integer("epochs");
    limit_ = p.integer("records");
    max_ = static_cast<std::size_t>(p.integer("max_records"));
    shuffle_ = p.boolean("shuffle");
    seed_ = ctx.seed();
    id_ = ctx.id();
    ctx_ = &ctx;
  }
  void process(std::size_t, const RecordPtr& in, Emitter&) override {
    if (held_.size() >= max_)
      throw DataError(cat("more than max_records = ", max_, " records arrived; core.epochs holds one whole pass "
                          "(raise max_records, or repeat a smaller stream such as photo ids before decoding)"));
    held_.push_back(in);
  }
  void close(Emitter& out) override {
    std::int64_t emitted = 0;
    std::vector<std::size_t> order(held_.size());
    for (std::int64_t pass = 0; pass < epochs_; ++pass) {
      for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
      if (shuffle_) {
        Rng rng(derive_seed(seed_, static_cast<std::uint64_t>(pass)));
        std::shuffle(order.begin(), order.end(), rng);
      }
      for (std::size_t i : order) {
        if (limit_ > 0 && emitted >= limit_) return;
        if (!ctx_->output_wanted()) {  // every consumer is done (a trainer past max_steps)
          log_info(id_, "every consumer is done: stopped after ", emitted, " records, in pass ", pass + 1);
          return;
        }
        out.emit(held_[i]);
        ++emitted;
      }
    }
    if (limit_ > 0 && emitted < limit_)
      log_info(id_, "emitted ", emitted, " records in ", epochs_, " passes of ", held_.size(), ", fewer than records = ",
               limit_, " (raise epochs to reach it)");
  }

 private:
  std::int64_t epochs_ = 1, limit_ = 0;
  std::size_t max_ = 0;
  bool shuffle_ = true;
  std::uint64_t seed_ = 0;
  std::string id_;
  NodeContext* ctx_ = nullptr;
  std::vector<RecordPtr> held_;
};

}  // namespace

NodeType epochs_type() {
  return NodeTypeBuilder("core.epochs")
      .doc("Emits a finite stream `epochs` times, each pass in a new seeded order, so downstream augmentation is drawn "
           "anew every epoch; `records` stops after that many in all.")
      .example(R"(nodes:
  numbers: {type: core.range, params: {count: 5}}
  passes:  {type: core.epochs, params: {epochs: 3}}
  show:    {type: core.sink, params: {mode: print}}
edges: [numbers.out -> passes.in, passes.out -> show.in]
)")
      .param(Param::integer("epochs").default_value(1).min(1).doc("passes over the input"))
      .param(Param::integer("records").default_value(0).min(0).doc("stop after this many records in all (0: every pass)"))
      .param(Param::boolean("shuffle").default_value(true).doc("each pass in a seeded random order (seed, pass)"))
      .param(Param::integer("max_records").default_value(10000000).min(1).doc("records one pass may hold"))
      .input("in", "*")
      .output("out", "*")
      .forward("in", "out")
      .create<Epochs>();
}

}  // namespace embedflow::core
