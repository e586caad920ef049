// Losses that weight every pair of a label batch (image, and label or pair_labels) by its cosine
// similarity, as pytorch-metric-learning computes them (embeddings normalised, all pairs, no miner):
//   torch.multi_similarity  per anchor, soft positive and negative terms around a threshold
//                           (Wang et al. 2019; PML's MultiSimilarityLoss), mean over the anchors
//   torch.circle            per anchor, self-paced weights on each similarity (Sun et al. 2020;
//                           PML's CircleLoss), mean over the anchors with a non-zero loss
// A label < 0 is unlabelled: in no pair, and not an anchor. A pair batch: label_batch.hpp.
#include "pml_formulas.hpp"
#include "torch_types.hpp"

namespace embedflow::torchfam {
namespace {

class MultiSimilarity final : public Loss {
 public:
  explicit MultiSimilarity(const ComponentContext& c)
      : alpha_(c.params().number("positive_scale")), beta_(c.params().number("negative_scale")),
        base_(c.params().number("threshold")) {}
  torch::Tensor compute(StepInputs& in) override {
    LabelView v = label_view(in, "torch.multi_similarity");
    torch::Tensor x = v.x;
    const LabelMasks& m = v.m;
    if (too_few_pairs(m)) return zero_like_graph(x);
    torch::Tensor s = cosine_matrix(x, x);
    torch::Tensor pos = (1.0 / alpha_) * pml_logsumexp(alpha_ * (base_ - s), m.positive, true, 1);
    torch::Tensor neg = (1.0 / beta_) * pml_logsumexp(beta_ * (s - base_), m.negative, true, 1);
    return mean_over_labelled(pos + neg, m, x);
  }

 private:
  double alpha_, beta_, base_;
};

class Circle final : public Loss {
 public:
  explicit Circle(const ComponentContext& c) : m_(c.params().number("relaxation")), gamma_(c.params().number("scale")) {}
  torch::Tensor compute(StepInputs& in) override {
    LabelView v = label_view(in, "torch.circle", PairBatches::one_sided);
    torch::Tensor x = v.x;
    const LabelMasks& m = v.m;
    if (too_few_pairs(m)) return zero_like_graph(x);
    torch::Tensor s = cosine_matrix(x, x);
    torch::Tensor fixed = s.detach();  // the self-paced weights are not differentiated (as in the paper)
    torch::Tensor pos_logit = -gamma_ * torch::relu(1 + m_ - fixed) * (s - (1 - m_));
    torch::Tensor neg_logit = gamma_ * torch::relu(fixed + m_) * (s - m_);
    torch::Tensor logits = torch::where(m.positive, pos_logit, torch::where(m.negative, neg_logit, torch::zeros_like(s)));
    torch::Tensor terms = torch::nn::functional::softplus(pml_logsumexp(logits, m.positive, false, 1) +
                                                          pml_logsumexp(logits, m.negative, false, 1));
    torch::Tensor both = (m.positive.any(1, true) & m.negative.any(1, true)).to(terms.scalar_type());
    return mean_of_positive(terms * both, x);
  }

 private:
  double m_, gamma_;
};

}  // namespace

ComponentType multi_similarity_type() {
  return label_batch_loss("torch.multi_similarity", PairBatches::train)
      .doc("Multi-similarity loss on a label batch (image, label or pair_labels), as pytorch-metric-learning's "
           "MultiSimilarityLoss: mean over the anchors i of 1/α log(1 + sum_{p in P_i} exp(-α(S_ip - λ))) + "
           "1/β log(1 + sum_{n in N_i} exp(β(S_in - λ))), S the cosine similarity, all pairs (no miner). "
           "Wang et al. 2019. "
           "On a pair batch (a_image, b_image, pair_label): the 2B embeddings with the labelled pairs as the indices tuple (docs/torch.md, \"Pair batches\").")
      .param(Param::number("positive_scale").default_value(2.0).min(1e-12).doc("α, the scale of positive pairs (PML's alpha)"))
      .param(Param::number("negative_scale").default_value(50.0).min(1e-12).doc("β, the scale of negative pairs (PML's beta)"))
      .param(Param::number("threshold").default_value(0.5).doc("λ, the similarity both terms are centred on (PML's base)"))
      .create<MultiSimilarity>();
}

ComponentType circle_type() {
  return label_batch_loss("torch.circle", PairBatches::one_sided)
      .doc("Circle loss on a label batch (image, label or pair_labels), as pytorch-metric-learning's CircleLoss: "
           "per anchor, softplus(logsumexp_p(-γ a_p (s_p - Δ_p)) + logsumexp_n(γ a_n (s_n - Δ_n))) with "
           "a_p = [1 + m - s_p]+, a_n = [s_n + m]+ (not differentiated), Δ_p = 1 - m, Δ_n = m, s the cosine "
           "similarity; mean over the anchors with a non-zero loss. Sun et al. 2020.")
      .param(Param::number("relaxation").default_value(0.4).doc("m, the relaxation margin (PML's m)"))
      .param(Param::number("scale").default_value(80.0).min(0.0).doc("γ, the scale (PML's gamma)"))
      .create<Circle>();
}

}  // namespace embedflow::torchfam
