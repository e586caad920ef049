// torch.train's validation and model selection, declared without LibTorch: the parameters, the
// optional `validation` input and output, and their load-time checks (validation_spec.cpp). The
// evaluation itself is validation.hpp.
#pragma once

#include <embedflow/embedflow.hpp>

#include <string>
#include <vector>

namespace embedflow::torchfam {

// The metrics select_metric may name: retrieval within the validation set, or the loss.
inline const std::vector<std::string> kSelectMetrics{"map_at_r", "precision_at_1", "r_precision", "loss"};

// Adds validate_every, select_metric, select_mode, patience and min_delta, the optional input
// `validation` (after `in`), the output `validation` (after `model`) and their checks to
// torch.train's declaration; call it once the trainer's own ports and checks are declared.
NodeTypeBuilder& with_validation(NodeTypeBuilder& b);

// True when `mode` (select_mode: auto, max or min) maximises `metric`: auto maximises the
// retrieval metrics and minimises the loss.
bool select_maximizes(const std::string& metric, const std::string& mode);

}  // namespace embedflow::torchfam
