// The core family's node and component types; plugin.cpp registers each one explicitly.
#pragma once

#include <embedflow/embedflow.hpp>

namespace embedflow::core {

NodeType range_type();
NodeType select_type();
NodeType rename_type();
NodeType batch_type();
NodeType unbatch_type();
NodeType shuffle_type();
NodeType epochs_type();
NodeType limit_type();
NodeType funnel_type();
NodeType keep_best_type();
NodeType sink_type();
NodeType map_affine_type();
NodeType attach_type();
NodeType shard_type();
NodeType aggregate_type();
std::vector<ComponentType> aggregate_components();

}  // namespace embedflow::core
