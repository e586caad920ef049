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

}  // namespace embedflow::crowd
