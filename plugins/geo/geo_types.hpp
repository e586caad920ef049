// The geo plugin's node types; plugin.cpp registers each of them.
#pragma once

#include "embedflow/node.hpp"

namespace embedflow::geo {

NodeType csv_photos_type();
NodeType pair_sampler_type();
NodeType pair_stats_type();
NodeType synthetic_geotags_type();
NodeType yfcc_photos_type();
NodeType photo_folder_type();
NodeType position_embedding_type();
NodeType pair_precision_type();
NodeType spatial_split_type();

}  // namespace embedflow::geo
