// The crowd plugin family: similarity labels from crowd workers' clusterings of image grids
// (Context Embedding Networks, docs/crowd.md). No LibTorch here: the CEN model, loss and the
// nodes that run it (crowd.cen, crowd.cen_loss, crowd.cen_score, crowd.cen_synthesize) are
// registered by the torch plugin (plugins/torch/cen*.cpp) under crowd.* names; this family reads
// the data and evaluates what they output.
#include "crowd_types.hpp"

namespace {
void register_types(embedflow::Registry& r) {
  using namespace embedflow::crowd;
  r.add(grid_reader_type());
  r.add(pair_accuracy_type());
  r.add(attribute_retrieval_type());
  r.add(triplets_type());
  r.add(report_type());
  r.add(dimension_plot_type());
}
}  // namespace

EMBEDFLOW_PLUGIN("crowd", "0.1.0", "", register_types)
