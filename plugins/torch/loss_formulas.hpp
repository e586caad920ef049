// What several loss files share: the pair distance, the hinge, and the `margin` parameter.
// Includes LibTorch.
//
// Distances are Euclidean. Pair and triplet losses use PyTorch's pairwise_distance (eps 1e-6, as
// F.triplet_margin_loss does); the mining losses over all pairs of a label batch
// (batch_losses.cpp) use cdist without the matrix-product shortcut.
#pragma once

#include "loss.hpp"

namespace embedflow::torchfam {

inline torch::Tensor pair_distance(const torch::Tensor& a, const torch::Tensor& b) {
  namespace F = torch::nn::functional;
  return F::pairwise_distance(a, b, F::PairwiseDistanceFuncOptions().p(2).eps(1e-6));
}

// max(0, x), or softplus(x) for a soft margin.
inline torch::Tensor hinge_or_soft(const torch::Tensor& x, bool soft) {
  return soft ? torch::nn::functional::softplus(x) : torch::clamp_min(x, 0.0);
}

inline Param margin_param(double def, const char* doc) { return Param::number("margin").default_value(def).min(0.0).doc(doc); }

}  // namespace embedflow::torchfam
