// The crowd family's node types; plugin.cpp registers each one explicitly.
#pragma once

#include <embedflow/embedflow.hpp>

namespace embedflow::crowd {

NodeType grid_reader_type();          // grid_reader.cpp
NodeType pair_accuracy_type();        // pair_accuracy.cpp
NodeType attribute_retrieval_type();  // attribute_retrieval.cpp
NodeType triplets_type();             // triplets.cpp
NodeType report_type();               // report.cpp
NodeType dimension_plot_type();       // dimension_plot.cpp
NodeType bcc_type();                  // bcc.cpp

// Context Embedding Networks (cen/, LibTorch; built when the torch family is): registered only
// when EMBEDFLOW_CROWD_CEN is defined.
ComponentType cen_type();         // crowd.cen (model)       cen/cen.cpp
ComponentType id_table_type();    // crowd.id_table (model)  cen/cen.cpp
ComponentType unique_type();      // crowd.unique (model)    cen/cen.cpp
ComponentType cen_loss_type();    // crowd.cen_loss (loss)   cen/cen.cpp
NodeType cen_score_type();        // crowd.cen_score         cen/cen_score.cpp
NodeType cen_synthesize_type();   // crowd.cen_synthesize    cen/cen_synth.cpp
ComponentType csn_type();         // crowd.csn (model)       cen/csn.cpp
ComponentType csn_loss_type();    // crowd.csn_loss (loss)   cen/csn.cpp

// Test hook for crowd.cen_loss (spec as written in YAML): its value on a batch that holds the
// embeddings and activations directly: x_a, x_b, attributes f32[B,K], pair_label f32[B].
double evaluate_cen_loss(const Value& spec, const Record& batch);
// Test hook for crowd.csn_loss: its value on a batch of x_a, x_p, x_n f32[B,K] and the triplets'
// masks f32[B,K].
double evaluate_csn_loss(const Value& spec, const Record& batch);

}  // namespace embedflow::crowd
