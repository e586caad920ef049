// Losses over every pair of a label batch (image, and label or pair_labels [B,B]; a label < 0 is
// unlabelled and in no pair; pair_labels: 1 similar, 0 dissimilar, < 0 or NaN unknown):
//   torch.batch_hard_triplet      per anchor, the farthest positive and the closest negative
//   torch.semi_hard_triplet       per anchor-positive pair, the closest negative farther than it
//   torch.all_pairs_contrastive   the mu-weighted contrastive loss over all pairs i<j, from the Gram
//                                 matrix with an analytic backward pass (AllPairsFunction)
// The mining losses use cdist without the matrix-product shortcut (exact for near-duplicates, zero
// gradient at zero distance).
#include <limits>

#include "label_batch.hpp"
#include "loss_formulas.hpp"
#include "mining.hpp"
#include "torch_types.hpp"

namespace embedflow::torchfam {
namespace {

torch::Tensor distance_matrix(const torch::Tensor& x) {
  return torch::cdist(x, x, 2.0, /*compute_mode: donot_use_mm_for_euclid_dist*/ 2);
}

class BatchHard final : public Loss {
 public:
  explicit BatchHard(const ComponentContext& c) : margin_(c.params().number("margin")), soft_(c.params().boolean("soft")) {}
  torch::Tensor compute(StepInputs& in) override {
    torch::Tensor x = in.embed_one("image");
    LabelMasks m = label_masks(in, x.size(0));
    torch::Tensor D = distance_matrix(x);
    const double inf = std::numeric_limits<double>::infinity();
    torch::Tensor hardest_pos = torch::where(m.positive, D, torch::zeros_like(D)).amax(1);
    torch::Tensor hardest_neg = torch::where(m.negative, D, torch::full_like(D, inf)).amin(1);
    torch::Tensor valid = m.positive.any(1) & m.negative.any(1);
    if (!valid.any().item<bool>()) return zero_like_graph(x);
    return hinge_or_soft((hardest_pos - hardest_neg + margin_).masked_select(valid), soft_).mean();
  }

 private:
  double margin_;
  bool soft_;
};

class SemiHard final : public Loss {
 public:
  explicit SemiHard(const ComponentContext& c) : margin_(c.params().number("margin")) {}
  torch::Tensor compute(StepInputs& in) override {
    torch::Tensor x = in.embed_one("image");
    LabelMasks m = label_masks(in, x.size(0));
    torch::Tensor D = distance_matrix(x);
    const double inf = std::numeric_limits<double>::infinity();
    // For anchor a and positive p: the closest negative farther than p (semi-hard); if there is
    // none, the farthest negative (FaceNet; TensorFlow's triplet_semihard_loss).
    torch::Tensor dap = D.unsqueeze(2), dan = D.unsqueeze(1);            // [a,p,1], [a,1,n]
    torch::Tensor outside = m.negative.unsqueeze(1) & (dan > dap);         // [a,p,n]
    torch::Tensor semi = torch::where(outside, dan.expand_as(outside), torch::full({}, inf, D.options())).amin(2);
    torch::Tensor farthest = torch::where(m.negative, D, torch::full_like(D, -inf)).amax(1, true).expand_as(D);
    torch::Tensor chosen = torch::where(outside.any(2), semi, farthest);
    torch::Tensor valid = m.positive & m.negative.any(1, true);
    if (!valid.any().item<bool>()) return zero_like_graph(x);
    return torch::clamp_min((D - chosen + margin_).masked_select(valid), 0.0).mean();
  }

 private:
  double margin_;
};

// The mu-weighted all-pairs contrastive loss with an analytic backward pass. Autograd through
// cdist + triu + masked_select spent most of a step in tiny parallel regions (cdist's forward
// and triu each ~10 ms at batch 64 on 2 loaded cores, against ~1 ms of arithmetic); here the
// forward is one Gram product (BLAS) and O(n^2) elementwise work, and the backward is one more
// product: for a pair term t(d), d t / d x_i = t'(d) (x_i - x_j) / d, so with the symmetric weight
// matrix W_ij = t'(d_ij) / d_ij over the known pairs, grad x = rowsum(W) x - W x. t'/d is 2 mu
// for similar pairs and -(1 - mu) / d for dissimilar pairs closer than the margin (0 at d = 0,
// as cdist's subgradient).
struct AllPairsFunction : public torch::autograd::Function<AllPairsFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& pos,
                               const torch::Tensor& neg, double mu, double margin, double pairs) {
    // Squared distances from the Gram matrix: d_ij^2 = |x_i|^2 + |x_j|^2 - 2 x_i.x_j, clamped at 0
    // (rounding can make it slightly negative for near-duplicates).
    torch::Tensor sq = x.pow(2).sum(1);
    torch::Tensor s = (sq.unsqueeze(1) + sq.unsqueeze(0) - 2 * x.mm(x.t())).clamp_min_(0.0);
    torch::Tensor d = s.sqrt();
    torch::Tensor zero = torch::zeros({}, s.options());
    torch::Tensor terms = torch::where(pos, mu * s, torch::where(neg, (1 - mu) * (margin - d).clamp_min(0.0), zero));
    ctx->save_for_backward({x, d, pos, neg});
    ctx->saved_data["mu"] = mu;
    ctx->saved_data["margin"] = margin;
    ctx->saved_data["pairs"] = pairs;
    return terms.sum() / pairs;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &d = saved[1], &pos = saved[2], &neg = saved[3];
    const double mu = ctx->saved_data["mu"].toDouble(), margin = ctx->saved_data["margin"].toDouble();
    const double pairs = ctx->saved_data["pairs"].toDouble();
    torch::Tensor zero = torch::zeros({}, d.options());
    torch::Tensor pulled = neg & (d < margin) & (d > 0);
    torch::Tensor w = torch::where(pos, torch::full({}, 2 * mu, d.options()), zero) -
                      torch::where(pulled, (1 - mu) / torch::where(pulled, d, torch::ones_like(d)), zero);
    w = (w + w.t()) * (grad[0] / pairs);  // pairs are stored once (i < j); each end gets its gradient
    torch::Tensor gx = w.sum(1, true) * x - w.mm(x);
    return {gx, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

class AllPairs final : public Loss {
 public:
  explicit AllPairs(const ComponentContext& c) : mu_(c.params().number("mu")), margin_(c.params().number("margin")) {}
  torch::Tensor compute(StepInputs& in) override {
    torch::Tensor x = in.embed_one("image");
    const std::int64_t n = x.size(0);
    LabelMasks m = label_masks(in, n);
    // Pairs i < j only (each unordered pair once); an index comparison, not triu (see above).
    torch::Tensor idx = torch::arange(n, torch::TensorOptions().dtype(torch::kLong).device(x.device()));
    torch::Tensor upper = idx.unsqueeze(1) < idx.unsqueeze(0);
    torch::Tensor pos = m.positive & upper, neg = m.negative & upper;
    const auto pairs = (pos | neg).sum().item<std::int64_t>();
    if (pairs == 0) return zero_like_graph(x);
    return AllPairsFunction::apply(x, pos, neg, mu_, margin_, static_cast<double>(pairs));
  }

 private:
  double mu_, margin_;
};

}  // namespace

ComponentType batch_hard_triplet_type() {
  return label_batch_loss("torch.batch_hard_triplet")
      .doc("Batch-hard triplet loss on a label batch (image, label or pair_labels), for PK batches: per anchor, the farthest "
           "positive and the closest negative; hinge or soft margin (Hermans et al. 2017). Anchors without a "
           "positive or a negative are skipped.")
      .param(margin_param(0.2, "m"))
      .param(Param::boolean("soft").default_value(false).doc("softplus(d_ap - d_an + m) instead of the hinge"))
      .create<BatchHard>();
}

ComponentType semi_hard_triplet_type() {
  return label_batch_loss("torch.semi_hard_triplet")
      .doc("Semi-hard triplet loss on a label batch (image, label or pair_labels): for every anchor-positive pair, the closest "
           "negative farther than the positive, else the farthest negative (FaceNet; TensorFlow's "
           "triplet_semihard_loss); mean of max(0, d_ap - d_an + m) over all anchor-positive pairs.")
      .param(margin_param(0.2, "m"))
      .create<SemiHard>();
}

ComponentType all_pairs_contrastive_type() {
  return label_batch_loss("torch.all_pairs_contrastive")
      .doc("mu-weighted contrastive loss over all pairs i<j of a label batch (image, label or pair_labels): "
           "mu z d^2 + (1 - mu)(1 - z) max(0, l - d), z = 1 for equal labels (or pair_labels[i][j]); mean over "
           "the pairs whose relation is known.")
      .param(Param::number("mu").default_value(0.5).range(0.0, 1.0).doc("mu, the weight of the similar-pair term"))
      .param(margin_param(1.0, "l, the margin of dissimilar pairs"))
      .create<AllPairs>();
}

}  // namespace embedflow::torchfam
