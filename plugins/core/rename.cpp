// core.rename — renames fields: `fields` maps old name to new name. Other fields pass unchanged.
//
// Inputs: in   Outputs: out
//
// Example graph: `embedflow inspect core.rename`.
#include "core_types.hpp"

namespace embedflow::core {
namespace {

std::vector<std::pair<std::string, std::string>> mapping(const Params& p) {
  std::vector<std::pair<std::string, std::string>> m;
  for (const auto& [from, to] : p.value("fields").as_map()) m.emplace_back(from, to.as_string());
  return m;
}

class Rename final : public Node {
 public:
  void open(NodeContext& ctx) override { map_ = mapping(ctx.params()); }
  void process(std::size_t, const RecordPtr& in, Emitter& out) override {
    Record r;
    for (const auto& [name, value] : in->fields()) {
      std::string target = name;
      for (const auto& [from, to] : map_)
        if (from == name) target = to;
      r.set(target, value);
    }
    out.emit(std::move(r));
  }

 private:
  std::vector<std::pair<std::string, std::string>> map_;
};

}  // namespace

NodeType rename_type() {
  return NodeTypeBuilder("core.rename")
      .deterministic()
      .doc("Renames fields (old: new); other fields pass unchanged.")
      .example(R"(nodes:
  numbers: {type: core.range, params: {count: 3}}
  name:    {type: core.rename, params: {fields: {value: x}}}
  show:    {type: core.sink, params: {mode: print}}
edges: [numbers.out -> name.in, name.out -> show.in]
)")
      .param(Param::any("fields").doc("map of old field name to new field name"))
      .input("in", "*")
      .output("out", "*")
      .parallel()
      .check([](SchemaContext& c) {
        const Value& v = c.params().value("fields");
        if (!v.is_map() || v.as_map().empty()) {
          c.error("fields must be a non-empty map {old: new}", "fields");
          return;
        }
        for (const auto& [from, to] : v.as_map())
          if (!to.is_string()) {
            c.error(cat("fields: new name for '", from, "' must be a string"), "fields");
            return;
          }
        const PortSchema& in = c.input("in");
        if (in.is_any()) return;
        PortSchema out;
        for (FieldSchema f : in.fields()) {
          if (const Value* to = v.get(f.name)) f.name = to->as_string();
          out.add(std::move(f));
        }
        for (const auto& [from, to] : v.as_map())
          if (!in.find(from)) c.error(cat("field '", from, "' is not in the input {", in.str(), "}"), "fields");
        c.set_output("out", out);
      })
      .create<Rename>();
}

}  // namespace embedflow::core
