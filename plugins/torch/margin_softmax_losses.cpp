// Additive-margin softmax losses on a label batch (image, label), as pytorch-metric-learning's
// ArcFaceLoss and CosFaceLoss compute them: one learnable weight column per class, W [D, C] (PML's
// W, normal(0, 1) at the start), cos θ_ij between the normalised embedding i and column j, a
// margin on the target class, then the softmax cross entropy of scale * logits, averaged over the
// labelled rows (PML's MeanReducer).
//   torch.arcface   target logit cos(θ + m) (cos θ - m sin m where θ > π - m keeps it decreasing)
//   torch.cosface   target logit cos θ - m
// W is a parameter of the loss (Loss::parameters, "class_weights"): torch.train optimises it with
// the model and checkpoints it. Rows with label < 0 are left out; a label >= num_classes is a
// DataError naming the loss and the row.
#include <cmath>

#include "pml_formulas.hpp"
#include "torch_types.hpp"

namespace embedflow::torchfam {
namespace {

class MarginSoftmax : public Loss {
 public:
  MarginSoftmax(const ComponentContext& c, std::string name)
      : name_(std::move(name)),
        num_classes_(c.params().integer("num_classes")),
        embedding_size_(c.params().integer("embedding_size")),
        scale_(c.params().number("scale")),
        weights_(normal_parameter({embedding_size_, num_classes_}, 1.0, derive_seed(c.seed(), name_))) {}

  torch::Tensor compute(StepInputs& in) override {
    torch::Tensor x = sized_embeddings(in, embedding_size_, name_);
    ClassLabels y = class_labels(in, x.size(0), num_classes_, name_);
    if (y.rows.numel() == 0) return zero_like_graph(x) + zero_like_graph(weights_);
    x = x.index_select(0, y.rows);
    torch::Tensor cosine = cosine_matrix(x, weights_.t());
    torch::Tensor mask = torch::one_hot(y.labels, num_classes_).to(cosine.scalar_type());
    torch::Tensor target = cosine.masked_select(mask.to(torch::kBool));
    torch::Tensor diff = (target_logit(target) - target).unsqueeze(1);
    torch::Tensor logits = (cosine + mask * diff) * scale_;
    return torch::nn::functional::cross_entropy(logits, y.labels);
  }
  NamedTensors parameters() override { return {{"class_weights", weights_}}; }
  void to(const torch::Device& device) override { move_parameter(weights_, device); }

 protected:
  // The target class's logit before scaling, from its cosine.
  virtual torch::Tensor target_logit(const torch::Tensor& cosine) const = 0;

 private:
  std::string name_;
  std::int64_t num_classes_, embedding_size_;
  double scale_;
  torch::Tensor weights_;
};

class ArcFace final : public MarginSoftmax {
 public:
  explicit ArcFace(const ComponentContext& c)
      : MarginSoftmax(c, "torch.arcface"), margin_(c.params().number("margin_degrees") * M_PI / 180.0) {}

 protected:
  torch::Tensor target_logit(const torch::Tensor& cosine) const override {
    torch::Tensor angles = torch::acos(torch::clamp(cosine, -1, 1));
    return torch::where(angles <= M_PI - margin_, torch::cos(angles + margin_),
                        torch::cos(angles) - margin_ * std::sin(margin_));
  }

 private:
  double margin_;  // radians
};

class CosFace final : public MarginSoftmax {
 public:
  explicit CosFace(const ComponentContext& c) : MarginSoftmax(c, "torch.cosface"), margin_(c.params().number("margin")) {}

 protected:
  torch::Tensor target_logit(const torch::Tensor& cosine) const override { return cosine - margin_; }

 private:
  double margin_;
};

}  // namespace

ComponentType arcface_type() {
  return class_parameter_loss("torch.arcface")
      .doc("ArcFace (additive angular margin) loss on a label batch (image, label), as pytorch-metric-learning's "
           "ArcFaceLoss: softmax cross entropy of s * cos(θ_y + m) for the target class and s * cos θ_j for the others, "
           "θ_j the angle between the embedding and class j's learnable weight column (class_weights [D, C], "
           "trained and checkpointed with the model). Deng et al. 2019.")
      .param(Param::number("margin_degrees").default_value(28.6).range(0.0, 90.0).doc("m, the angular margin in degrees (PML's margin)"))
      .param(Param::number("scale").default_value(64.0).min(0.0).doc("s, the logit scale"))
      .create<ArcFace>();
}

ComponentType cosface_type() {
  return class_parameter_loss("torch.cosface")
      .doc("CosFace (large margin cosine) loss on a label batch (image, label), as pytorch-metric-learning's "
           "CosFaceLoss: softmax cross entropy of s * (cos θ_y - m) for the target class and s * cos θ_j for the "
           "others, θ_j the angle to class j's learnable weight column (class_weights [D, C]). Wang et al. 2018.")
      .param(Param::number("margin").default_value(0.35).min(0.0).doc("m, the cosine margin"))
      .param(Param::number("scale").default_value(64.0).min(0.0).doc("s, the logit scale"))
      .create<CosFace>();
}

}  // namespace embedflow::torchfam
