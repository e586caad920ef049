// torch.margin: the margin loss of Wu et al. 2017 ("Sampling matters in deep embedding learning")
// on a label batch (image, and label or pair_labels), as pytorch-metric-learning's MarginLoss
// with its defaults (every triplet of the batch, L2 distance of the normalised embeddings, PML's
// DivisorReducer): for each triplet (a, p, n),
//   [D_ap - β + α]+ + [β - D_an + α]+,
// summed and divided by the number of its two terms that are non-zero, plus ν β (ν β_{y_a} per
// triplet, over the same divisor, with one β per class) when β is learnt. β is one number, or one
// per class with num_classes; with learn_boundary it is a parameter of the loss ("boundary",
// Loss::parameters): torch.train optimises and checkpoints it. A label < 0 is unlabelled: in no
// triplet. The sums run over (anchor, positive) and (anchor, negative) pairs weighted by their
// triplet counts rather than over the triplets themselves (the same terms, O(n^2) memory).
#include "pml_formulas.hpp"
#include "torch_types.hpp"

namespace embedflow::torchfam {
namespace {

class MarginLossTerm final : public Loss {
 public:
  explicit MarginLossTerm(const ComponentContext& c)
      : margin_(c.params().number("margin")), nu_(c.params().number("boundary_regularization")),
        learn_(c.params().boolean("learn_boundary")), num_classes_(c.params().integer("num_classes")) {
    beta_ = torch::full({num_classes_ > 0 ? num_classes_ : 1}, c.params().number("boundary"), torch::kFloat32);
    if (learn_) beta_.requires_grad_(true);
  }

  torch::Tensor compute(StepInputs& in) override {
    LabelView v = label_view(in, "torch.margin", PairBatches::one_sided);
    torch::Tensor x = v.x;
    const LabelMasks& m = v.m;
    torch::Tensor pos = m.positive.to(x.scalar_type()), neg = m.negative.to(x.scalar_type());
    torch::Tensor positives = pos.sum(1, true), negatives = neg.sum(1, true);  // per anchor [n,1]
    torch::Tensor triplets = positives * negatives;
    if (triplets.sum().item<double>() == 0) return zero_like_graph(x);
    torch::Tensor beta = anchor_boundary(in, x.size(0)).to(x.scalar_type());  // [n,1]
    torch::Tensor d = unit_l2_matrix(x, x);
    torch::Tensor pos_loss = torch::relu(d - beta + margin_), neg_loss = torch::relu(beta - d + margin_);
    // A pair (a, p) is in one triplet per negative of a; a pair (a, n) in one per positive of a.
    torch::Tensor pos_weight = pos * negatives, neg_weight = neg * positives;
    torch::Tensor total = (pos_loss * pos_weight).sum() + (neg_loss * neg_weight).sum();
    const double divisor = ((pos_loss > 0).to(x.scalar_type()) * pos_weight).sum().item<double>() +
                           ((neg_loss > 0).to(x.scalar_type()) * neg_weight).sum().item<double>();
    torch::Tensor loss = divisor != 0 ? total / divisor : zero_like_graph(x);
    if (!learn_) return loss;
    if (num_classes_ == 0) return loss + (beta_ * nu_).sum();
    return divisor != 0 ? loss + (beta * nu_ * triplets).sum() / divisor : loss;
  }
  NamedTensors parameters() override {
    if (!learn_) return {};
    return {{"boundary", beta_}};
  }
  void to(const torch::Device& device) override {
    if (learn_) move_parameter(beta_, device);
    else beta_ = beta_.to(device);
  }

 private:
  // β of each anchor's class, or the one β, as a column [n,1].
  torch::Tensor anchor_boundary(StepInputs& in, std::int64_t n) {
    if (num_classes_ == 0) return beta_.view({1, 1}).expand({n, 1});
    if (in.has("pair_labels") && !in.has("label"))
      throw DataError("torch.margin: num_classes (one boundary per class) needs the batch's label field");
    ClassLabels y = class_labels(in, n, num_classes_, "torch.margin");
    // Unlabelled anchors are in no triplet: any class's β will do.
    torch::Tensor classes = torch::zeros({n}, torch::TensorOptions().dtype(torch::kInt64).device(beta_.device()));
    classes.index_put_({y.rows}, y.labels);
    return beta_.index_select(0, classes).unsqueeze(1);
  }

  double margin_, nu_;
  bool learn_;
  std::int64_t num_classes_;
  torch::Tensor beta_;
};

}  // namespace

ComponentType margin_loss_type() {
  return label_batch_loss("torch.margin", PairBatches::one_sided)
      .doc("Margin loss on a label batch (image, label or pair_labels), as pytorch-metric-learning's MarginLoss: over "
           "every triplet (a, p, n), ([D_ap - β + α]+ + [β - D_an + α]+) summed and divided by the number of non-zero "
           "terms, D the L2 distance of the normalised embeddings; β learnable (learn_boundary, trained and "
           "checkpointed with the model), one per class with num_classes, with the regulariser ν β. Wu et al. 2017.")
      .param(Param::number("margin").default_value(0.2).min(0.0).doc("α, the margin on either side of the boundary"))
      .param(Param::number("boundary").default_value(1.2).doc("β, the distance between positives and negatives (PML's beta), its start when learnt"))
      .param(Param::boolean("learn_boundary").default_value(false).doc("β is a parameter trained with the model (PML's learn_beta)"))
      .param(Param::number("boundary_regularization").default_value(0.0).min(0.0).doc("ν, the weight of the regulariser ν β when β is learnt (PML's nu)"))
      .param(Param::integer("num_classes").default_value(0).min(0).doc("one β per class (labels must be below it); 0: one β for all"))
      .create<MarginLossTerm>();
}

}  // namespace embedflow::torchfam
