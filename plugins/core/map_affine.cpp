// core.map_affine — value * scale + offset (+ seeded Gaussian jitter) on one numeric field,
// computed in parallel. The jitter of each record is seeded from (node seed, record sequence
// number), so the output is identical whatever the thread count.
//
// Inputs: in {<field>: numeric}   Outputs: out (same record, <field> as f64)
//
// Example graph: `embedflow inspect core.map_affine`.
#include "core_types.hpp"

namespace embedflow::core {
namespace {

class MapAffine final : public Node {
 public:
  void open(NodeContext& ctx) override {
    field_ = ctx.params().string("field");
    scale_ = ctx.params().number("scale");
    offset_ = ctx.params().number("offset");
    jitter_ = ctx.params().number("jitter");
    seed_ = ctx.seed();
  }
  void process(std::size_t, const RecordPtr& in, Emitter& out) override {
    const Array& a = in->get(field_);
    if (a.is_string()) throw DataError(cat("field '", field_, "' is a string column"));
    Array result = Array::zeros(DType::f64, a.shape());
    double* dst = result.mutable_data<double>();
    Rng rng(derive_seed(seed_, out.sequence()));
    std::normal_distribution<double> noise(0.0, jitter_ > 0 ? jitter_ : 1.0);
    for (std::int64_t i = 0; i < a.numel(); ++i)
      dst[i] = a.as_double(i) * scale_ + offset_ + (jitter_ > 0 ? noise(rng) : 0.0);
    Record r = *in;
    r.set(field_, std::move(result));
    out.emit(std::move(r));
  }

 private:
  std::string field_;
  double scale_ = 1, offset_ = 0, jitter_ = 0;
  std::uint64_t seed_ = 0;
};

}  // namespace

NodeType map_affine_type() {
  return NodeTypeBuilder("core.map_affine")
      .doc("value*scale + offset (+ seeded Gaussian jitter) on one field; parallel, deterministic.")
      .example(R"(nodes:
  numbers: {type: core.range, params: {count: 5}}
  scaled:  {type: core.map_affine, params: {field: value, scale: 2.0, offset: 1.0, jitter: 0.1}}
  show:    {type: core.sink, params: {mode: print}}
edges: [numbers.out -> scaled.in, scaled.out -> show.in]
)")
      .param(Param::string("field").default_value("value").doc("numeric field to transform"))
      .param(Param::number("scale").default_value(1.0).doc("multiplier"))
      .param(Param::number("offset").default_value(0.0).doc("added after scaling"))
      .param(Param::number("jitter").default_value(0.0).min(0).doc("standard deviation of per-record Gaussian noise"))
      .input("in", "*")
      .output("out", "*")
      .parallel()
      .check([](SchemaContext& c) {
        PortSchema in = c.input("in");
        if (in.is_any()) return;
        const std::string& f = c.params().string("field");
        const FieldSchema* fs = in.find(f);
        if (!fs) {
          c.error(cat("field '", f, "' is not in the input {", in.str(), "}"), "field");
          return;
        }
        FieldSchema out = *fs;
        out.dtype = DType::f64;
        in.add(out);
        c.set_output("out", in);
      })
      .create<MapAffine>();
}

}  // namespace embedflow::core
