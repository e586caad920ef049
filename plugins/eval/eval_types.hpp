// The eval family's node types; plugin.cpp registers each one explicitly.
#pragma once

#include <embedflow/embedflow.hpp>

namespace embedflow::eval {

NodeType retrieval_type();
NodeType clustering_type();
NodeType triplet_accuracy_type();
NodeType pair_prediction_type();
NodeType report_type();
NodeType scatter_type();
NodeType reconstruction_type();

}  // namespace embedflow::eval
