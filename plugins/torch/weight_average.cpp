// torch.train's weight average (weight_average.hpp).
#include <algorithm>

#include "weight_average.hpp"

namespace embedflow::torchfam {

WeightAverage::WeightAverage(Model& model, double decay) : decay_(decay) {
  for (const auto& named : model.state()) {
    const bool floating = named.second.is_floating_point();
    average_.push_back(floating ? named.second.detach().clone() : torch::Tensor());
    live_.push_back(floating ? named.second.detach() : torch::Tensor());  // shares the model's storage
  }
}

void WeightAverage::update(std::int64_t step) {
  const double t = static_cast<double>(step);
  const double decay = std::min(decay_, (1.0 + t) / (10.0 + t));
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < average_.size(); ++i)
    if (average_[i].defined()) average_[i].mul_(decay).add_(live_[i], 1.0 - decay);
}

NamedTensors WeightAverage::exported(Model& model) const {
  NamedTensors state = model.state();
  for (std::size_t i = 0; i < average_.size(); ++i)
    if (average_[i].defined()) state[i].second = average_[i];
  return state;
}

}  // namespace embedflow::torchfam
