// core.limit — passes the first `count` records, then says it is done consuming: the rest are
// dropped, and producers that feed nothing else stop producing.
//
// Inputs: in   Outputs: out
//
// Example graph: `embedflow inspect core.limit`.
#include "core_types.hpp"

namespace embedflow::core {
namespace {

class Limit final : public Node {
 public:
  void open(NodeContext& ctx) override {
    ctx_ = &ctx;
    count_ = ctx.params().integer("count");
  }
  void process(std::size_t, const RecordPtr& in, Emitter& out) override {
    if (count_ == 0) ctx_->done_consuming();
    if (passed_ < count_) {
      ++passed_;
      out.emit(in);
      if (passed_ == count_) ctx_->done_consuming();
    }
  }

 private:
  NodeContext* ctx_ = nullptr;
  std::int64_t count_ = 0, passed_ = 0;
};

}  // namespace

NodeType limit_type() {
  return NodeTypeBuilder("core.limit")
      .deterministic()
      .doc("Passes the first `count` records; then it is done consuming, so producers feeding nothing else stop.")
      .example(R"(nodes:
  numbers: {type: core.range, params: {count: 100}}
  first:   {type: core.limit, params: {count: 5}}
  show:    {type: core.sink, params: {mode: count, expect: 5}}
edges: [numbers.out -> first.in, first.out -> show.in]
)")
      .param(Param::integer("count").min(0).doc("records to pass"))
      .input("in", "*")
      .output("out", "*")
      .forward("in", "out")
      .create<Limit>();
}

}  // namespace embedflow::core
