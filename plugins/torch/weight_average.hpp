// torch.train's weight averaging (ema_decay > 0): an exponential moving average of a model's
// floating-point state (parameters and batch-norm statistics, as timm's ModelEmaV2), updated
// after every step with decay min(ema_decay, (1 + t) / (10 + t)) at step t (TensorFlow's
// ExponentialMovingAverage with num_updates, so early steps are not dominated by the random
// initialisation). Training goes on with the live weights; snapshots and checkpoints export the
// average.
#pragma once

#include <vector>

#include "model.hpp"

namespace embedflow::torchfam {

class WeightAverage {
 public:
  // Starts at the model's current weights (the initial ones, or a resumed checkpoint's) and keeps
  // handles to its tensors (the same storage), parallel to model.state().
  WeightAverage(Model& model, double decay);
  // Folds the live weights in after update number `step` (1-based).
  void update(std::int64_t step);
  // The model's state with the average in place of every floating-point tensor.
  NamedTensors exported(Model& model) const;

 private:
  double decay_;
  std::vector<torch::Tensor> average_;  // undefined for tensors that are not floating point
  std::vector<torch::Tensor> live_;     // the model's tensors it averages (same storage)
};

}  // namespace embedflow::torchfam
