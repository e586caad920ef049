// core.attach — adds the fields of the latest record seen on the side port `side` to every
// record of the stream `in` (names prefixed with `prefix`). Stream records wait until the side
// port has a value; later side values replace earlier ones. This is how a model snapshot or a
// learned transform reaches a stream: "evaluate every N steps" is an edge into a side port.
//
// Inputs: in (stream), side (side port: latest value)   Outputs: out
//
// Example graph: `embedflow inspect core.attach`.
#include "core_types.hpp"

namespace embedflow::core {
namespace {

class Attach final : public Node {
 public:
  void open(NodeContext& ctx) override {
    ctx_ = &ctx;
    prefix_ = ctx.params().string("prefix");
  }
  void process(std::size_t, const RecordPtr& in, Emitter& out) override {
    RecordPtr side = ctx_->side(1);
    Record r = *in;
    for (const auto& [name, value] : side->fields()) r.set(prefix_ + name, value);
    out.emit(std::move(r));
  }

 private:
  NodeContext* ctx_ = nullptr;
  std::string prefix_;
};

}  // namespace

NodeType attach_type() {
  return NodeTypeBuilder("core.attach")
      .deterministic()
      .doc("Adds the fields of the latest side-port record to every stream record.")
      .example(R"(nodes:
  numbers: {type: core.range, params: {count: 5}}
  setting: {type: core.range, params: {count: 1, start: 42}}
  tagged:  {type: core.attach, params: {prefix: "side_"}}
  show:    {type: core.sink, params: {mode: print}}
edges: [numbers.out -> tagged.in, setting.out -> tagged.side, tagged.out -> show.in]
)")
      .param(Param::string("prefix").default_value("").doc("prepended to the side record's field names"))
      .input("in", "*", "the stream")
      .side_input("side", "*", "latest value is attached")
      .output("out", "*")
      .check([](SchemaContext& c) {
        PortSchema s = c.input("in");
        const PortSchema& side = c.input("side");
        if (s.is_any() || side.is_any()) return;
        for (FieldSchema f : side.fields()) {
          f.name = c.params().string("prefix") + f.name;
          s.add(std::move(f));
        }
        c.set_output("out", s);
      })
      .create<Attach>();
}

}  // namespace embedflow::core
