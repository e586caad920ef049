// core.funnel — passes every record of every edge into `in` to `out`, unchanged (GStreamer's
// funnel element). A side port takes one edge, because it latches one writer's latest value; to
// give a node several writers' records on a side port (several trained models' snapshots into
// crowd.cen_score's `model` for an ensemble), funnel them first.
// Order: each edge's records keep their order; records of different edges interleave as they come.
//
// Inputs: in (any number of edges)   Outputs: out
//
// Example graph: `embedflow inspect core.funnel`.
#include "core_types.hpp"

namespace embedflow::core {
namespace {

class Funnel final : public Node {
 public:
  void process(std::size_t, const RecordPtr& in, Emitter& out) override { out.emit(in); }
};

}  // namespace

NodeType funnel_type() {
  return NodeTypeBuilder("core.funnel")
      .doc("Passes the records of every edge into `in` to `out` unchanged: several writers into one port (e.g. a side port).")
      .example(R"(nodes:
  low:  {type: core.range, params: {count: 2}}
  high: {type: core.range, params: {count: 3, start: 10}}
  both: {type: core.funnel}
  show: {type: core.sink, params: {mode: count, expect: 5}}
edges: [low.out -> both.in, high.out -> both.in, both.out -> show.in]
)")
      .input("in", "*", "any number of edges")
      .output("out", "*")
      .forward("in", "out")
      .create<Funnel>();
}

}  // namespace embedflow::core
