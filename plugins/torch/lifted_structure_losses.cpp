// Lifted structure losses on a label batch (image, and label or pair_labels), over the L2
// distances of the normalised embeddings, as pytorch-metric-learning computes them:
//   torch.lifted_structure              Song et al. 2016 (PML's LiftedStructureLoss): per positive
//                                       pair (i, j), both orders, [log sum over the negatives of i
//                                       and of j of exp(m_n - D) + D_ij - m_p]+^2 / 2; mean over the
//                                       ordered positive pairs
//   torch.generalized_lifted_structure  Hermans et al. 2017 (PML's GeneralizedLiftedStructureLoss):
//                                       per anchor, [log sum_p exp(D_ap - m_p) + log sum_n
//                                       exp(m_n - D_an)]+; mean over the anchors
// A label < 0 is unlabelled: in no pair, and not an anchor. A pair batch: label_batch.hpp.
#include "pml_formulas.hpp"
#include "torch_types.hpp"

namespace embedflow::torchfam {
namespace {

class LiftedStructure final : public Loss {
 public:
  explicit LiftedStructure(const ComponentContext& c)
      : neg_margin_(c.params().number("negative_margin")), pos_margin_(c.params().number("positive_margin")) {}
  torch::Tensor compute(StepInputs& in) override {
    LabelView v = label_view(in, "torch.lifted_structure");
    torch::Tensor x = v.x;
    const LabelMasks& m = v.m;
    if (too_few_pairs(m) || !m.positive.any().item<bool>() || !m.negative.any().item<bool>()) return zero_like_graph(x);
    torch::Tensor d = unit_l2_matrix(x, x);
    torch::Tensor pairs = m.positive.nonzero();
    torch::Tensor i = pairs.select(1, 0), j = pairs.select(1, 1);
    // The negatives of either end of each positive pair, side by side: [K, 2n].
    torch::Tensor remaining = neg_margin_ - torch::cat({d.index_select(0, i), d.index_select(0, j)}, 1);
    torch::Tensor keep = torch::cat({m.negative.index_select(0, i), m.negative.index_select(0, j)}, 1);
    torch::Tensor per_pair = pml_logsumexp(remaining, keep, false, 1) + (d.index({i, j}).unsqueeze(1) - pos_margin_);
    return (torch::relu(per_pair).pow(2) / 2).mean();  // each pair counts twice, once per order
  }

 private:
  double neg_margin_, pos_margin_;
};

class GeneralizedLiftedStructure final : public Loss {
 public:
  explicit GeneralizedLiftedStructure(const ComponentContext& c)
      : neg_margin_(c.params().number("negative_margin")), pos_margin_(c.params().number("positive_margin")) {}
  torch::Tensor compute(StepInputs& in) override {
    LabelView v = label_view(in, "torch.generalized_lifted_structure");
    torch::Tensor x = v.x;
    const LabelMasks& m = v.m;
    if (too_few_pairs(m)) return zero_like_graph(x);
    torch::Tensor d = unit_l2_matrix(x, x);
    torch::Tensor pos = pml_logsumexp(d - pos_margin_, m.positive, false, 1);
    torch::Tensor neg = pml_logsumexp(neg_margin_ - d, m.negative, false, 1);
    return mean_over_labelled(torch::relu(pos + neg), m, x);
  }

 private:
  double neg_margin_, pos_margin_;
};

std::vector<ParamSpec> lifted_margins() {
  return {Param::number("negative_margin").default_value(1.0).doc("m_n, the distance negatives should exceed (PML's neg_margin)"),
          Param::number("positive_margin").default_value(0.0).doc("m_p, the distance positives may keep (PML's pos_margin)")};
}

}  // namespace

ComponentType lifted_structure_type() {
  return label_batch_loss("torch.lifted_structure", PairBatches::train)
      .doc("Lifted structure loss on a label batch (image, label or pair_labels), as pytorch-metric-learning's "
           "LiftedStructureLoss: for every ordered positive pair (i, j), [log(sum_{k in N_i} exp(m_n - D_ik) + "
           "sum_{l in N_j} exp(m_n - D_jl)) + D_ij - m_p]+^2 / 2, D the L2 distance of the normalised embeddings; "
           "mean over the ordered positive pairs. Song et al. 2016. "
           "On a pair batch (a_image, b_image, pair_label): the 2B embeddings with the labelled pairs as the indices tuple (docs/torch.md, \"Pair batches\").")
      .params(lifted_margins())
      .create<LiftedStructure>();
}

ComponentType generalized_lifted_structure_type() {
  return label_batch_loss("torch.generalized_lifted_structure", PairBatches::train)
      .doc("Generalised lifted structure loss on a label batch (image, label or pair_labels), as "
           "pytorch-metric-learning's GeneralizedLiftedStructureLoss: per anchor a, [log sum_{p in P_a} exp(D_ap - m_p) "
           "+ log sum_{n in N_a} exp(m_n - D_an)]+, D the L2 distance of the normalised embeddings; mean over the "
           "anchors. Hermans et al. 2017. "
           "On a pair batch (a_image, b_image, pair_label): the 2B embeddings with the labelled pairs as the indices tuple (docs/torch.md, \"Pair batches\").")
      .params(lifted_margins())
      .create<GeneralizedLiftedStructure>();
}

}  // namespace embedflow::torchfam
