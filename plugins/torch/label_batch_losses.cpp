// Losses over the pairs or triplets of a label batch that take a `miner:`, each equal to
// pytorch-metric-learning's class on the same inputs, defaults included (tests/torch/test_mining.cpp):
//   torch.batch_contrastive     ContrastiveLoss: positive pairs max(0, d - pos_margin), negative
//                               pairs max(0, neg_margin - d); each set reduced on its own, summed
//   torch.batch_triplet_margin  TripletMarginLoss: max(0, d_ap - d_an + margin) (or softplus)
// By default over every pair or triplet of the batch (triplets_per_anchor "all"), else over what
// the miner returns (pairs become triplets by their shared anchors and triplets become pairs, as
// PML converts them); distances and reducers as PML (mining.hpp).
#include "mining.hpp"
#include "torch_types.hpp"

namespace embedflow::torchfam {
namespace {

class BatchContrastive final : public LabelBatchLoss {
 public:
  explicit BatchContrastive(const ComponentContext& c)
      : LabelBatchLoss(c, "torch.batch_contrastive", PairBatches::train), pos_margin_(c.params().number("pos_margin")),
        neg_margin_(c.params().number("neg_margin")) {}

  torch::Tensor compute_tuple(const MiningInput& in, const IndicesTuple* mined) override {
    const IndicesTuple t = mined ? as_pairs(*mined) : all_pairs(in.relation);
    // PML's GenericPairLoss: no loss unless some index list has two or more entries.
    if (t.size(t.a1) <= 1 && t.size(t.a2) <= 1) return (in.query * 0).sum();
    const torch::Tensor mat = distance_.matrix(in.query, in.reference);
    // PML's MultipleReducers: each sub-loss reduced on its own (none: 0), then summed.
    torch::Tensor total = (in.query * 0).sum();
    if (t.size(t.a1) > 0) {
      torch::Tensor pos = torch::relu(distance_.margin(mat.index({t.a1, t.p}), pos_margin_));
      total = total + reduce(pos, reduction_, in.query);
    }
    if (t.size(t.a2) > 0) {
      torch::Tensor neg = torch::relu(distance_.margin(neg_margin_, mat.index({t.a2, t.n})));
      total = total + reduce(neg, reduction_, in.query);
    }
    return total;
  }

 private:
  double pos_margin_, neg_margin_;
};

class BatchTripletMargin final : public LabelBatchLoss {
 public:
  explicit BatchTripletMargin(const ComponentContext& c)
      : LabelBatchLoss(c, "torch.batch_triplet_margin", PairBatches::one_sided), margin_(c.params().number("margin")),
        swap_(c.params().boolean("swap")), smooth_(c.params().boolean("smooth_loss")) {}

  torch::Tensor compute_tuple(const MiningInput& in, const IndicesTuple* mined) override {
    const IndicesTuple t = mined ? as_triplets(*mined) : all_triplets(in.relation);
    if (t.size(t.a1) == 0) return (in.query * 0).sum();
    const torch::Tensor mat = distance_.matrix(in.query, in.reference);
    const torch::Tensor ap = mat.index({t.a1, t.p});
    torch::Tensor an = mat.index({t.a1, t.n});
    if (swap_) an = distance_.smallest(an, mat.index({t.p, t.n}));
    const torch::Tensor violation = distance_.margin(ap, an) + margin_;
    const torch::Tensor terms = smooth_ ? torch::nn::functional::softplus(violation) : torch::relu(violation);
    return reduce(terms, reduction_, in.query);
  }
  // swap reads d(p, n) from the query rows' matrix: p must index the batch.
  bool needs_batch_reference() const override { return swap_; }

 private:
  double margin_;
  bool swap_, smooth_;
};

}  // namespace

ComponentType batch_contrastive_type() {
  return label_batch_loss_with_miner("torch.batch_contrastive", PairBatches::train)
      .doc("PML's ContrastiveLoss on a label batch (image, label or pair_labels): mean over positive pairs of "
           "max(0, d - pos_margin) plus mean over negative pairs of max(0, neg_margin - d) (each mean over the terms "
           "above 0 with the default reducer), over every pair of the batch or the pairs its miner returns. d: the "
           "Euclidean distance of L2-normalised embeddings by default (PML's LpDistance). "
           "On a pair batch (a_image, b_image, pair_label): the 2B embeddings with the labelled pairs as the indices tuple (docs/torch.md, \"Pair batches\").")
      .param(Param::number("pos_margin").default_value(0.0).doc("positive pairs closer than this cost nothing"))
      .param(Param::number("neg_margin").default_value(1.0).doc("negative pairs farther than this cost nothing"))
      .create<BatchContrastive>();
}

ComponentType batch_triplet_margin_type() {
  return label_batch_loss_with_miner("torch.batch_triplet_margin", PairBatches::one_sided)
      .doc("PML's TripletMarginLoss on a label batch (image, label or pair_labels): max(0, d_ap - d_an + margin) "
           "(softplus with smooth_loss) averaged over the triplets above 0 with the default reducer, over every "
           "triplet of the batch or the triplets its miner returns.")
      .param(Param::number("margin").default_value(0.05).doc("the margin (PML's default 0.05)"))
      .param(Param::boolean("swap").default_value(false).doc("d_an becomes the smaller of d_an and d_pn (Balntas et al.)"))
      .param(Param::boolean("smooth_loss").default_value(false).doc("softplus(d_ap - d_an + margin) instead of the hinge"))
      .create<BatchTripletMargin>();
}

}  // namespace embedflow::torchfam
