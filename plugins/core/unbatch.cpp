// core.unbatch — splits each batch into its rows: one record per index of the leading
// dimension. Rows share the batch's buffers (no copy).
//
// Inputs: in (a batch: all fields share a leading dim)   Outputs: out (records)
//
// Example graph: `embedflow inspect core.unbatch`.
#include "core_types.hpp"

namespace embedflow::core {
namespace {

class Unbatch final : public Node {
 public:
  void process(std::size_t, const RecordPtr& in, Emitter& out) override {
    std::int64_t n = in->batch_size();
    for (std::int64_t i = 0; i < n; ++i) {
      Record r;
      for (const auto& [name, value] : in->fields()) r.set(name, value.row(i));
      out.emit(std::move(r));
    }
  }
};

}  // namespace

NodeType unbatch_type() {
  return NodeTypeBuilder("core.unbatch")
      .deterministic()
      .doc("Splits batches into single records (zero-copy rows).")
      .example(R"(nodes:
  numbers: {type: core.range, params: {count: 10}}
  batches: {type: core.batch, params: {size: 4}}
  rows:    {type: core.unbatch}
  show:    {type: core.sink, params: {mode: count, expect: 10}}
edges: [numbers.out -> batches.in, batches.out -> rows.in, rows.out -> show.in]
)")
      .input("in", "*")
      .output("out", "*")
      .check([](SchemaContext& c) { c.set_output("out", unbatched(c.input("in"))); })
      .create<Unbatch>();
}

}  // namespace embedflow::core
