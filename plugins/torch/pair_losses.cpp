// Pair losses on (a_image, b_image, pair_label z: 1 similar, 0 dissimilar), d = ||f(a) - f(b)||:
//   torch.contrastive               z d^2 + (1-z) max(0, m-d)^2 (Hadsell et al.), or unsquared
//   torch.dual_margin_contrastive   gamma z max(0, d - m_p) + (1-z) max(0, m_n - d), optionally squared
#include "loss_formulas.hpp"
#include "torch_types.hpp"

namespace embedflow::torchfam {
namespace {

class Contrastive final : public Loss {
 public:
  explicit Contrastive(const ComponentContext& c)
      : margin_(c.params().number("margin")), squared_(c.params().boolean("squared")) {}
  torch::Tensor compute(StepInputs& in) override {
    auto e = in.embed({"a_image", "b_image"});
    torch::Tensor z = in.field("pair_label").flatten().to(torch::kFloat32);
    torch::Tensor d = pair_distance(e[0], e[1]);
    torch::Tensor neg = torch::clamp_min(margin_ - d, 0.0);
    torch::Tensor l = squared_ ? z * d.pow(2) + (1 - z) * neg.pow(2) : z * d + (1 - z) * neg;
    return l.mean();
  }

 private:
  double margin_;
  bool squared_;
};

class DualMargin final : public Loss {
 public:
  explicit DualMargin(const ComponentContext& c)
      : pos_(c.params().number("positive_margin")), neg_(c.params().number("negative_margin")),
        gamma_(c.params().number("positive_weight")), squared_(c.params().boolean("squared")) {
    if (neg_ < pos_) throw ConfigError(cat(c.owner(), ": negative_margin must be >= positive_margin"));
  }
  torch::Tensor compute(StepInputs& in) override {
    auto e = in.embed({"a_image", "b_image"});
    torch::Tensor z = in.field("pair_label").flatten().to(torch::kFloat32);
    torch::Tensor d = pair_distance(e[0], e[1]);
    torch::Tensor p = torch::clamp_min(d - pos_, 0.0), n = torch::clamp_min(neg_ - d, 0.0);
    if (squared_) {
      p = p.pow(2);
      n = n.pow(2);
    }
    return (gamma_ * z * p + (1 - z) * n).mean();
  }

 private:
  double pos_, neg_, gamma_;
  bool squared_;
};

}  // namespace

ComponentType contrastive_type() {
  return ComponentTypeBuilder("torch.contrastive", "loss")
      .doc("Contrastive loss on pairs (a_image, b_image, pair_label z): squared: z d^2 + (1-z) max(0, m-d)^2 "
           "(Hadsell et al.); else z d + (1-z) max(0, m-d). d = ||f(a) - f(b)||.")
      .param(margin_param(1.0, "m, the distance dissimilar pairs are pushed beyond"))
      .param(Param::boolean("squared").default_value(true).doc("squared terms (true) or plain distances (false)"))
      .consumes("batch", "a_image: any[N,...], b_image: any[N,...], pair_label: any[N]")
      .consumes("outputs", "embedding: f32[N,D]")
      .create<Contrastive>();
}

ComponentType dual_margin_contrastive_type() {
  return ComponentTypeBuilder("torch.dual_margin_contrastive", "loss")
      .doc("Dual-margin contrastive loss on pairs (a_image, b_image, pair_label z): gamma z max(0, d - m_p) + "
           "(1-z) max(0, m_n - d), terms squared when `squared` (the CEN loss without its regularisers).")
      .param(Param::number("positive_margin").default_value(0.0).min(0.0).doc("m_p: similar pairs closer than this cost nothing"))
      .param(Param::number("negative_margin").default_value(1.0).min(0.0).doc("m_n: dissimilar pairs farther than this cost nothing"))
      .param(Param::number("positive_weight").default_value(1.0).min(0.0).doc("gamma, the weight of the similar-pair term"))
      .param(Param::boolean("squared").default_value(false).doc("square both hinge terms"))
      .consumes("batch", "a_image: any[N,...], b_image: any[N,...], pair_label: any[N]")
      .consumes("outputs", "embedding: f32[N,D]")
      .create<DualMargin>();
}

}  // namespace embedflow::torchfam
