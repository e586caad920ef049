// The crowd plugin family: similarity labels from crowd workers' clusterings of image grids
// (Context Embedding Networks, docs/crowd.md): reading the annotations, the CEN model, loss and
// the nodes that run it (cen/, on the torch family's model and loss interfaces, when the torch
// family is built), and the evaluators of what they output.
#include "crowd_types.hpp"

#ifdef EMBEDFLOW_CROWD_CEN
#include <torch/version.h>
#define EMBEDFLOW_CROWD_LIBRARIES "LibTorch " TORCH_VERSION
#else
#define EMBEDFLOW_CROWD_LIBRARIES ""
#endif

namespace {
void register_types(embedflow::Registry& r) {
  using namespace embedflow::crowd;
  r.add(grid_reader_type());
  r.add(pair_accuracy_type());
  r.add(attribute_retrieval_type());
  r.add(triplets_type());
  r.add(report_type());
  r.add(dimension_plot_type());
  r.add(bcc_type());
#ifdef EMBEDFLOW_CROWD_CEN
  r.add(cen_type());
  r.add(id_table_type());
  r.add(unique_type());
  r.add(cen_loss_type());
  r.add(cen_score_type());
  r.add(cen_synthesize_type());
  r.add(csn_type());
  r.add(csn_loss_type());
#endif
}
}  // namespace

EMBEDFLOW_PLUGIN("crowd", "0.1.0", EMBEDFLOW_CROWD_LIBRARIES, register_types)
