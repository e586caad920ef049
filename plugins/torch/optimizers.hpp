// Optimizer components (kind "optimizer"): each makes a LibTorch optimizer over the parameters
// torch.train hands it, with its base learning rate (the schedule multiplies it per step).
#pragma once

#include <torch/torch.h>

#include <embedflow/embedflow.hpp>

#include <memory>
#include <vector>

namespace embedflow::torchfam {

class OptimizerFactory : public Component {
 public:
  explicit OptimizerFactory(const ComponentContext& c) : lr_(c.params().number("lr")), wd_(c.params().number("weight_decay")) {}
  virtual std::unique_ptr<torch::optim::Optimizer> make(std::vector<torch::Tensor> params) const = 0;
  double lr() const { return lr_; }

 protected:
  double lr_, wd_;
};

}  // namespace embedflow::torchfam
