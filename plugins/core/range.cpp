// core.range — a counter source: emits records {index: i64, value: f64} for
// value = start + index * step, index = 0 .. count-1. An optional zero-filled payload of
// `payload_bytes` bytes per record makes memory behaviour visible in tests and benchmarks.
//
// Outputs: out {index: i64[], value: f64[], payload: u8[$payload_bytes] (only when > 0)}
//
// Example graph: `embedflow inspect core.range`.
#include "core_types.hpp"

namespace embedflow::core {
namespace {

class Range final : public Node {
 public:
  void open(NodeContext& ctx) override {
    count_ = ctx.params().integer("count");
    start_ = ctx.params().number("start");
    step_ = ctx.params().number("step");
    payload_bytes_ = ctx.params().integer("payload_bytes");
    ctx.set_expected_items(static_cast<std::uint64_t>(count_));
  }
  bool produce(Emitter& out) override {
    if (next_ >= count_) return false;
    Record r;
    r.set("index", Array::scalar<std::int64_t>(next_));
    r.set("value", Array::scalar<double>(start_ + static_cast<double>(next_) * step_));
    if (payload_bytes_ > 0) r.set("payload", Array::zeros(DType::u8, {payload_bytes_}));
    out.emit(std::move(r));
    ++next_;
    return next_ < count_;
  }

 private:
  std::int64_t count_ = 0, next_ = 0, payload_bytes_ = 0;
  double start_ = 0, step_ = 1;
};

}  // namespace

NodeType range_type() {
  return NodeTypeBuilder("core.range")
      .deterministic()
      .doc("Counter source: emits count records {index, value = start + index*step}.")
      .example(R"(nodes:
  numbers: {type: core.range, params: {count: 10, start: 1.0, step: 0.5}}
  show:    {type: core.sink, params: {mode: print}}
edges: [numbers.out -> show.in]
)")
      .source()
      .param(Param::integer("count").min(0).doc("number of records to emit"))
      .param(Param::number("start").default_value(0.0).doc("value of the first record"))
      .param(Param::number("step").default_value(1.0).doc("increment between records"))
      .param(Param::integer("payload_bytes").default_value(0).min(0).doc("zero bytes attached to each record (for memory tests)"))
      .output("out", "index: i64[], value: f64[]", "one record per count")
      .check([](SchemaContext& c) {
        PortSchema s = c.output("out");
        if (c.params().integer("payload_bytes") > 0)
          s.add(FieldSchema{"payload", DType::u8, std::vector<Dim>{Dim{Dim::Kind::fixed, c.params().integer("payload_bytes"), ""}}});
        c.set_output("out", s);
      })
      .create<Range>();
}

}  // namespace embedflow::core
