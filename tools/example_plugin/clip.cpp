// example.clip — clamps a numeric field to [low, high]; a complete plugin in one file, built
// out of tree against the installed SDK (find_package(embedflow)).
//
// Inputs: in {<field>: numeric}   Outputs: out (same record, <field> as f64)
//
//   nodes:
//     numbers: {type: core.range, params: {count: 10}}
//     clipped: {type: example.clip, params: {field: value, low: 2, high: 5}}
//     show:    {type: core.sink, params: {mode: print}}
//   edges: [numbers.out -> clipped.in, clipped.out -> show.in]
#include <algorithm>

#include <embedflow/embedflow.hpp>

using namespace embedflow;

namespace {

class Clip final : public Node {
 public:
  void open(NodeContext& ctx) override {
    field_ = ctx.params().string("field");
    low_ = ctx.params().number("low");
    high_ = ctx.params().number("high");
  }
  void process(std::size_t, const RecordPtr& in, Emitter& out) override {
    const Array& a = in->get(field_);
    Array clipped = Array::zeros(DType::f64, a.shape());
    double* dst = clipped.mutable_data<double>();
    for (std::int64_t i = 0; i < a.numel(); ++i) dst[i] = std::clamp(a.as_double(i), low_, high_);
    Record r = *in;
    r.set(field_, std::move(clipped));
    out.emit(std::move(r));
  }

 private:
  std::string field_;
  double low_ = 0, high_ = 1;
};

NodeType clip_type() {
  return NodeTypeBuilder("example.clip")
      .doc("Clamps a numeric field to [low, high].")
      .param(Param::string("field").default_value("value").doc("numeric field to clamp"))
      .param(Param::number("low").doc("lower bound"))
      .param(Param::number("high").doc("upper bound"))
      .input("in", "*")
      .output("out", "*")
      .parallel()
      .check([](SchemaContext& c) {
        if (c.params().number("low") > c.params().number("high")) c.error("low must not exceed high", "low");
      })
      .create<Clip>();
}

void register_types(Registry& r) { r.add(clip_type()); }

}  // namespace

EMBEDFLOW_PLUGIN("example", "1.0.0", "", register_types)
