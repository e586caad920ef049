// Softmax (InfoNCE) losses over the cosine similarities of a label batch (image, and label or
// pair_labels), as pytorch-metric-learning computes them:
//   torch.ntxent  per positive pair (a, p) of the batch, in both orders: -log of p's share of
//                 exp(S/τ) among p and a's negatives (PML's NTXentLoss, with PML's pair
//                 convention: the positives are the batch's same-label pairs, not views by index);
//                 mean over the positive pairs
//   torch.supcon  per anchor, the mean over its positives of -log softmax over all its other rows
//                 (Khosla et al. 2020; PML's SupConLoss); mean over the anchors with a non-zero loss
// A label < 0 is unlabelled: in no pair.
#include "pml_formulas.hpp"
#include "torch_types.hpp"

namespace embedflow::torchfam {
namespace {

class NtXent final : public Loss {
 public:
  explicit NtXent(const ComponentContext& c) : temperature_(c.params().number("temperature")) {}
  torch::Tensor compute(StepInputs& in) override {
    LabelView v = label_view(in, "torch.ntxent", PairBatches::one_sided);
    torch::Tensor x = v.x;
    const LabelMasks& m = v.m;
    if (too_few_pairs(m) || !m.positive.any().item<bool>() || !m.negative.any().item<bool>()) return zero_like_graph(x);
    torch::Tensor s = cosine_matrix(x, x);
    torch::Tensor pairs = m.positive.nonzero();  // row-major, as PML's torch.where
    torch::Tensor a = pairs.select(1, 0), p = pairs.select(1, 1);
    torch::Tensor pos = s.index({a, p}).unsqueeze(1) / temperature_;                       // [K,1]
    torch::Tensor neg = (s.index_select(0, a) / temperature_).masked_fill(~m.negative.index_select(0, a), lowest_of(s));
    torch::Tensor top = torch::max(pos, std::get<0>(neg.max(1, true))).detach();
    torch::Tensor numerator = torch::exp(pos - top).squeeze(1);
    torch::Tensor denominator = torch::exp(neg - top).sum(1) + numerator;
    return (-torch::log(numerator / denominator + tiny_of(s))).mean();
  }

 private:
  double temperature_;
};

class SupCon final : public Loss {
 public:
  explicit SupCon(const ComponentContext& c) : temperature_(c.params().number("temperature")) {}
  torch::Tensor compute(StepInputs& in) override {
    LabelView v = label_view(in, "torch.supcon", PairBatches::one_sided);
    torch::Tensor x = v.x;
    const LabelMasks& m = v.m;
    if (too_few_pairs(m) || !m.positive.any().item<bool>() || !m.negative.any().item<bool>()) return zero_like_graph(x);
    torch::Tensor mat = cosine_matrix(x, x) / temperature_;
    mat = mat - std::get<0>(mat.max(1, true)).detach();  // for numerical stability, as PML
    torch::Tensor log_prob = mat - pml_logsumexp(mat, m.positive | m.negative, false, 1);
    torch::Tensor pos = m.positive.to(mat.scalar_type());
    torch::Tensor mean_log_prob_pos = (pos * log_prob).sum(1) / (pos.sum(1) + tiny_of(mat));
    return mean_of_positive(-mean_log_prob_pos, x);
  }

 private:
  double temperature_;
};

}  // namespace

ComponentType ntxent_type() {
  return label_batch_loss("torch.ntxent", PairBatches::one_sided)
      .doc("NT-Xent (normalised temperature-scaled cross entropy) loss on a label batch (image, label or pair_labels), "
           "as pytorch-metric-learning's NTXentLoss: for every ordered positive pair (a, p), -log(exp(S_ap/τ) / "
           "(exp(S_ap/τ) + sum_{n in N_a} exp(S_an/τ))), S the cosine similarity, mean over the positive pairs. The "
           "positives are the batch's same-label pairs (PML's convention; give two views of an image one label for "
           "SimCLR). Chen et al. 2020.")
      .param(Param::number("temperature").default_value(0.07).min(1e-12).doc("τ, the temperature"))
      .create<NtXent>();
}

ComponentType supcon_type() {
  return label_batch_loss("torch.supcon", PairBatches::one_sided)
      .doc("Supervised contrastive loss on a label batch (image, label or pair_labels), as pytorch-metric-learning's "
           "SupConLoss: per anchor i, -1/|P_i| sum_{p in P_i} log(exp(S_ip/τ) / sum_{j != i, known} exp(S_ij/τ)), S the "
           "cosine similarity; mean over the anchors with a non-zero loss. Khosla et al. 2020.")
      .param(Param::number("temperature").default_value(0.1).min(1e-12).doc("τ, the temperature"))
      .create<SupCon>();
}

}  // namespace embedflow::torchfam
