// core.batch — stacks `size` consecutive records into one batch: every field gains a leading
// dimension B. The last partial batch is emitted at end of stream unless drop_last is set.
//
// Inputs: in (records whose fields have equal shapes from record to record)
// Outputs: out (the same fields with a leading B)
// Caveat: stacking copies; records are small next to the work done on a batch.
//
// Example graph: `embedflow inspect core.batch`.
#include <algorithm>

#include "core_types.hpp"

namespace embedflow::core {
namespace {

class Batch final : public Node {
 public:
  void open(NodeContext& ctx) override {
    size_ = static_cast<std::size_t>(ctx.params().integer("size"));
    drop_last_ = ctx.params().boolean("drop_last");
    // Grows with the records that arrive: size may exceed what the stream holds.
    pending_.reserve(std::min<std::size_t>(size_, 4096));
  }
  void process(std::size_t, const RecordPtr& in, Emitter& out) override {
    pending_.push_back(in);
    if (pending_.size() == size_) flush(out);
  }
  void close(Emitter& out) override {
    if (!pending_.empty() && !drop_last_) flush(out);
  }

 private:
  void flush(Emitter& out) {
    Record batch;
    const Record& first = *pending_.front();
    for (const auto& [name, value] : first.fields()) {
      std::vector<Array> parts;
      parts.reserve(pending_.size());
      for (const auto& r : pending_) {
        const Array* a = r->find(name);
        if (!a) throw DataError(cat("record ", count_ + parts.size(), " has no field '", name, "' but the first record of its batch has"));
        parts.push_back(*a);
      }
      try {
        batch.set(name, Array::stack(parts));
      } catch (const Error& e) {
        throw DataError(cat("field '", name, "' cannot be batched: ", e.what()));
      }
    }
    count_ += pending_.size();
    pending_.clear();
    out.emit(std::move(batch));
  }
  std::size_t size_ = 1;
  bool drop_last_ = false;
  std::size_t count_ = 0;
  std::vector<RecordPtr> pending_;
};

}  // namespace

NodeType batch_type() {
  return NodeTypeBuilder("core.batch")
      .deterministic()
      .doc("Stacks consecutive records into batches of `size` (leading dim B).")
      .example(R"(nodes:
  numbers: {type: core.range, params: {count: 10}}
  batches: {type: core.batch, params: {size: 4, drop_last: false}}
  show:    {type: core.sink, params: {mode: print}}
edges: [numbers.out -> batches.in, batches.out -> show.in]
)")
      .param(Param::integer("size").min(1).doc("records per batch"))
      .param(Param::boolean("drop_last").default_value(false).doc("drop the final partial batch instead of emitting it"))
      .input("in", "*")
      .output("out", "*")
      .check([](SchemaContext& c) {
        Dim b{Dim::Kind::symbol, -1, "B"};
        if (c.params().boolean("drop_last")) b = Dim{Dim::Kind::fixed, c.params().integer("size"), ""};
        c.set_output("out", batched(c.input("in"), b));
      })
      .create<Batch>();
}

}  // namespace embedflow::core
