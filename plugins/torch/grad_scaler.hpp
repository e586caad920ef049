// Loss scaling for mixed precision (torch.train's amp), as PyTorch's torch.cuda.amp.GradScaler:
// LibTorch 1.13's C++ API has none, and its _amp_update_scale_ kernel is CUDA-only, so the rule is
// here in plain C++: the loss is multiplied by scale() before backward, the gradients are divided
// by it before clipping and the optimizer step (unscale_gradients), a step whose gradients hold an
// inf or NaN is skipped, and update() then backs the scale off after such a step and grows it
// after growth_interval clean steps in a row. Without LibTorch headers, so tests include it.
#pragma once

#include <cstdint>
#include <vector>

namespace at {
class Tensor;
}

namespace embedflow::torchfam {

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16, GradScaler's defaults
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  std::int64_t growth_interval = 2000;
};

class GradScaler {
 public:
  explicit GradScaler(const GradScalerOptions& o = {}) : o_(o), scale_(o.init_scale) {}
  double scale() const { return scale_; }
  std::int64_t growth_tracker() const { return tracker_; }
  // After a step: _amp_update_scale_'s rule. An inf/NaN step: scale *= backoff, tracker 0. A clean
  // one: tracker + 1, and at growth_interval scale *= growth (kept only if finite), tracker 0.
  void update(bool found_inf);
  // A resumed run continues with the checkpoint's scale and clean-step count (GradScaler's
  // load_state_dict), so it neither starts again at init_scale nor loses its progress to a growth.
  void restore(double scale, std::int64_t growth_tracker) {
    scale_ = scale;
    tracker_ = growth_tracker;
  }

 private:
  GradScalerOptions o_;
  double scale_;
  std::int64_t tracker_ = 0;
};

// Divides every defined gradient of `parameters` by `scale` in place; true when any of them holds
// an inf or NaN (the step must then be skipped).
bool unscale_gradients(const std::vector<at::Tensor>& parameters, double scale);

// For tests: one scalar parameter (0 at the start) trained by plain SGD (lr 1) on the given
// per-step gradients of the unscaled loss, through the scaler: the scaled gradient (g * scale, as
// backward of the scaled loss gives), unscaled, the step skipped on inf/NaN, then update().
struct GradScalerTrace {
  double scale;           // the scale the step used
  bool stepped;           // false: skipped for an inf/NaN gradient
  double parameter;       // after the step
  double scale_after;     // after update()
  std::int64_t tracker;   // after update()
};
std::vector<GradScalerTrace> trace_grad_scaler(const std::vector<double>& gradients, const GradScalerOptions& options);

}  // namespace embedflow::torchfam
