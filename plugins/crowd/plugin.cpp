// The crowd plugin family: similarity labels from crowd workers' clusterings of image grids
// (Context Embedding Networks, docs/crowd.md). No LibTorch here: the CEN model and loss live in
// the torch family and read this family's pair stream.
#include "crowd_types.hpp"

namespace {
void register_types(embedflow::Registry& r) { r.add(embedflow::crowd::grid_reader_type()); }
}  // namespace

EMBEDFLOW_PLUGIN("crowd", "0.1.0", "", register_types)
