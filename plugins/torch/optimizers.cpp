// torch.sgd, torch.adam, torch.adamw: PyTorch's optimizers as components (optimizers.hpp).
#include "optimizers.hpp"
#include "torch_types.hpp"

namespace embedflow::torchfam {
namespace {

class Sgd final : public OptimizerFactory {
 public:
  explicit Sgd(const ComponentContext& c)
      : OptimizerFactory(c), momentum_(c.params().number("momentum")), nesterov_(c.params().boolean("nesterov")),
        dampening_(c.params().number("dampening")) {
    if (nesterov_ && (momentum_ <= 0 || dampening_ != 0))
      throw ConfigError(cat(c.owner(), ": nesterov needs momentum > 0 and dampening 0"));
  }
  std::unique_ptr<torch::optim::Optimizer> make(std::vector<torch::Tensor> params) const override {
    return std::make_unique<torch::optim::SGD>(
        std::move(params),
        torch::optim::SGDOptions(lr_).momentum(momentum_).nesterov(nesterov_).dampening(dampening_).weight_decay(wd_));
  }

 private:
  double momentum_;
  bool nesterov_;
  double dampening_;
};

class Adam final : public OptimizerFactory {
 public:
  explicit Adam(const ComponentContext& c, bool decoupled)
      : OptimizerFactory(c), b1_(c.params().number("beta1")), b2_(c.params().number("beta2")),
        eps_(c.params().number("eps")), amsgrad_(c.params().boolean("amsgrad")), decoupled_(decoupled) {}
  std::unique_ptr<torch::optim::Optimizer> make(std::vector<torch::Tensor> params) const override {
    if (decoupled_)
      return std::make_unique<torch::optim::AdamW>(
          std::move(params), torch::optim::AdamWOptions(lr_).betas({b1_, b2_}).eps(eps_).weight_decay(wd_).amsgrad(amsgrad_));
    return std::make_unique<torch::optim::Adam>(
        std::move(params), torch::optim::AdamOptions(lr_).betas({b1_, b2_}).eps(eps_).weight_decay(wd_).amsgrad(amsgrad_));
  }

 private:
  double b1_, b2_, eps_;
  bool amsgrad_, decoupled_;
};

std::vector<ParamSpec> adam_params(double weight_decay, const char* wd_doc) {
  return {Param::number("lr").default_value(1e-3).min(0.0).doc("base learning rate (the schedule multiplies it)"),
          Param::number("beta1").default_value(0.9).range(0.0, 1.0).doc("first-moment decay"),
          Param::number("beta2").default_value(0.999).range(0.0, 1.0).doc("second-moment decay"),
          Param::number("eps").default_value(1e-8).min(0.0).doc("denominator epsilon"),
          Param::number("weight_decay").default_value(weight_decay).min(0.0).doc(wd_doc),
          Param::boolean("amsgrad").default_value(false).doc("AMSGrad variant")};
}

ComponentType with_params(ComponentTypeBuilder b, std::vector<ParamSpec> params,
                          std::function<std::unique_ptr<Component>(const ComponentContext&)> f) {
  for (auto& p : params) b.param(std::move(p));
  return b.create(std::move(f));
}

}  // namespace

ComponentType sgd_type() {
  return ComponentTypeBuilder("torch.sgd", "optimizer")
      .doc("Stochastic gradient descent with momentum, Nesterov momentum and L2 weight decay (PyTorch's SGD).")
      .param(Param::number("lr").default_value(0.01).min(0.0).doc("base learning rate (the schedule multiplies it)"))
      .param(Param::number("momentum").default_value(0.9).range(0.0, 1.0).doc("momentum factor; 0: plain SGD"))
      .param(Param::boolean("nesterov").default_value(false).doc("Nesterov momentum (needs momentum > 0, dampening 0)"))
      .param(Param::number("dampening").default_value(0.0).range(0.0, 1.0).doc("momentum dampening"))
      .param(Param::number("weight_decay").default_value(0.0).min(0.0).doc("L2 penalty added to the gradient"))
      .create<Sgd>();
}

ComponentType adam_type() {
  return with_params(ComponentTypeBuilder("torch.adam", "optimizer").doc("Adam (PyTorch's Adam; weight decay as an L2 gradient term)."),
                     adam_params(0.0, "L2 penalty added to the gradient"),
                     [](const ComponentContext& c) -> std::unique_ptr<Component> { return std::make_unique<Adam>(c, false); });
}

ComponentType adamw_type() {
  return with_params(ComponentTypeBuilder("torch.adamw", "optimizer").doc("AdamW: Adam with decoupled weight decay (PyTorch's AdamW)."),
                     adam_params(0.01, "decoupled weight decay"),
                     [](const ComponentContext& c) -> std::unique_ptr<Component> { return std::make_unique<Adam>(c, true); });
}

}  // namespace embedflow::torchfam
