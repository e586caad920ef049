// Conditional Similarity Networks (Veit, Belongie and Karaletsos, CVPR 2017) as the CEN paper's
// baseline for a crowd whose similarity conditions are known (docs/crowd.md): one entangled
// embedding x_i (an embedding table over image ids, the CEN's one-hot image encoder) and one
// learnt mask per condition c, m_c = ReLU(β_c) in R^K, so that under condition c
//   d(i, j; c) = ||m_c ⊙ (x_i - x_j)||_2.
// crowd.csn_loss trains it on triplets labelled with their condition (crowd.triplets with
// `truth`); crowd.cen_score applies it to pairs whose submission's condition it looks up.
#pragma once

#include "model.hpp"

namespace embedflow::crowd {

class CsnModel final : public torchfam::ModuleModel {
 public:
  explicit CsnModel(const ComponentContext& c);

  // Masks m_c [B,K] of condition ids [B]; condition -1 (a submission that used no known
  // attribute) gets the mean of the C masks. DataError for an id outside -1..C-1.
  torch::Tensor masks(const torch::Tensor& condition);
  std::int64_t conditions() const { return conditions_; }
  std::int64_t images() const { return images_; }

 protected:
  torch::Tensor forward(const torch::Tensor& x) override;

 private:
  std::int64_t images_, conditions_;
  torch::nn::Embedding table_{nullptr}, mask_{nullptr};
};

}  // namespace embedflow::crowd
