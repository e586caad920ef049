// The metric family's node types; plugin.cpp registers each one explicitly.
#pragma once

#include <embedflow/embedflow.hpp>

namespace embedflow::metric {

NodeType mahalanobis_type();
NodeType lmnn_type();
NodeType sgd_mahalanobis_type();
NodeType pca_type();
NodeType transform_type();

}  // namespace embedflow::metric
