// The loss scaler of torch.train's amp (grad_scaler.hpp).
#include "grad_scaler.hpp"

#include <torch/torch.h>

#include <cmath>

namespace embedflow::torchfam {

void GradScaler::update(bool found_inf) {
  if (found_inf) {
    scale_ *= o_.backoff_factor;
    tracker_ = 0;
    return;
  }
  if (++tracker_ == o_.growth_interval) {
    // The scale is a float32 tensor in PyTorch: a growth past float's range keeps the old scale.
    const float grown = static_cast<float>(scale_) * static_cast<float>(o_.growth_factor);
    if (std::isfinite(grown)) scale_ = grown;
    tracker_ = 0;
  }
}

bool unscale_gradients(const std::vector<at::Tensor>& parameters, double scale) {
  torch::NoGradGuard no_grad;
  const double inv = 1.0 / scale;
  bool found_inf = false;
  for (const auto& p : parameters) {
    torch::Tensor g = p.grad();
    if (!g.defined()) continue;
    g.mul_(inv);
    // One reduction per tensor: sum is NaN or inf exactly when an element is non-finite or the
    // finite elements overflow, so the elementwise test settles it.
    if (!std::isfinite(g.sum().item<double>())) found_inf = found_inf || !torch::isfinite(g).all().item<bool>();
  }
  return found_inf;
}

std::vector<GradScalerTrace> trace_grad_scaler(const std::vector<double>& gradients, const GradScalerOptions& options) {
  GradScaler scaler(options);
  // float32, so a finite gradient can overflow once scaled, as float16 ones do under CUDA amp.
  torch::Tensor w = torch::zeros({1}, torch::kFloat32).requires_grad_(true);
  std::vector<GradScalerTrace> out;
  for (double g : gradients) {
    const double used = scaler.scale();
    // backward of scale * (g * w): the gradient g * scale, as a float32 backward would round it.
    torch::Tensor loss = (w * g).sum() * used;
    w.mutable_grad() = torch::Tensor();
    loss.backward();
    const bool inf = unscale_gradients({w}, used);
    if (!inf) {
      torch::NoGradGuard no_grad;
      w.sub_(w.grad());
    }
    scaler.update(inf);
    out.push_back({used, !inf, static_cast<double>(w.item<float>()), scaler.scale(), scaler.growth_tracker()});
  }
  return out;
}

}  // namespace embedflow::torchfam
