// core.select — keeps only the named fields of each record (in the order given), dropping the
// rest. Forwarding costs a pointer copy per field: arrays are shared, not copied.
//
// Inputs: in (any record with those fields)   Outputs: out (just those fields)
//
// Example graph: `embedflow inspect core.select`.
#include "core_types.hpp"
#include "embedflow/suggest.hpp"

namespace embedflow::core {
namespace {

class Select final : public Node {
 public:
  void open(NodeContext& ctx) override { fields_ = ctx.params().strings("fields"); }
  void process(std::size_t, const RecordPtr& in, Emitter& out) override {
    Record r;
    for (const auto& f : fields_) r.set(f, in->get(f));
    out.emit(std::move(r));
  }

 private:
  std::vector<std::string> fields_;
};

}  // namespace

NodeType select_type() {
  return NodeTypeBuilder("core.select")
      .deterministic()
      .doc("Keeps only the named fields of each record.")
      .example(R"(nodes:
  numbers: {type: core.range, params: {count: 3}}
  pick:    {type: core.select, params: {fields: [value]}}
  show:    {type: core.sink, params: {mode: print}}
edges: [numbers.out -> pick.in, pick.out -> show.in]
)")
      .param(Param::strings("fields").doc("fields to keep, in output order"))
      .input("in", "*")
      .output("out", "*")
      .parallel()
      .check([](SchemaContext& c) {
        const PortSchema& in = c.input("in");
        auto fields = c.params().strings("fields");
        if (fields.empty()) c.error("fields is empty: the output would carry nothing", "fields");
        if (in.is_any()) return;
        PortSchema out;
        for (const auto& f : fields) {
          const FieldSchema* fs = in.find(f);
          if (!fs) {
            std::vector<std::string> have;
            for (const auto& x : in.fields()) have.push_back(x.name);
            c.error(cat("field '", f, "' is not in the input {", in.str(), "}", did_you_mean(f, have)), "fields");
          } else {
            out.add(*fs);
          }
        }
        c.set_output("out", out);
      })
      .create<Select>();
}

}  // namespace embedflow::core
