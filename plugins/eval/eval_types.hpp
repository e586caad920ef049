// The eval family's node types; plugin.cpp registers each one explicitly.
#pragma once

#include <embedflow/embedflow.hpp>

namespace embedflow::eval {

NodeType retrieval_type();
NodeType clustering_type();
NodeType triplet_accuracy_type();
NodeType view_invariance_type();
NodeType pair_prediction_type();
NodeType report_type();
NodeType scatter_type();
NodeType reconstruction_type();
NodeType learning_curve_type();
NodeType curve_chart_type();
NodeType neighbour_average_type();
NodeType knn_classifier_type();
NodeType tsne_type();
NodeType index_build_type();
NodeType index_retrieval_type();
NodeType index_knn_type();

// A learning curve record (eval.learning_curve -> eval.curve_chart).
inline const char* kCurveSchema = "method: str[], step: i64[S], p_at_1: f64[S], r_precision: f64[S], map_at_r: f64[S]";

}  // namespace embedflow::eval
