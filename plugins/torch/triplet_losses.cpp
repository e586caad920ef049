// torch.triplet_margin on (anchor_image, positive_image, negative_image): hinge or soft margin
// on d_ap - d_an + m, with PyTorch's distance swap as an option.
#include "loss_formulas.hpp"
#include "torch_types.hpp"

namespace embedflow::torchfam {
namespace {

class TripletMargin final : public Loss {
 public:
  explicit TripletMargin(const ComponentContext& c)
      : margin_(c.params().number("margin")), soft_(c.params().boolean("soft")), swap_(c.params().boolean("swap")) {}
  torch::Tensor compute(StepInputs& in) override {
    auto e = in.embed({"anchor_image", "positive_image", "negative_image"});
    torch::Tensor dap = pair_distance(e[0], e[1]), dan = pair_distance(e[0], e[2]);
    if (swap_) dan = torch::min(dan, pair_distance(e[1], e[2]));
    return hinge_or_soft(dap - dan + margin_, soft_).mean();
  }

 private:
  double margin_;
  bool soft_, swap_;
};

}  // namespace

ComponentType triplet_margin_type() {
  return ComponentTypeBuilder("torch.triplet_margin", "loss")
      .doc("Triplet margin loss on (anchor_image, positive_image, negative_image): hinge max(0, d_ap - d_an + m) "
           "(PyTorch's triplet_margin_loss) or soft log(1 + exp(d_ap - d_an + m)).")
      .param(margin_param(1.0, "m"))
      .param(Param::boolean("soft").default_value(false).doc("softplus instead of the hinge (use margin 0 for Hermans' soft margin)"))
      .param(Param::boolean("swap").default_value(false).doc("distance swap: d_an = min(d_an, d_pn) (Balntas et al.; PyTorch's swap)"))
      .consumes("batch", "anchor_image: any[N,...], positive_image: any[N,...], negative_image: any[N,...]")
      .consumes("outputs", "embedding: f32[N,D]")
      .create<TripletMargin>();
}

}  // namespace embedflow::torchfam
