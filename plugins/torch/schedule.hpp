// Learning-rate schedules (components of kind "schedule"): plain functions of the step, so an
// exact resume needs nothing but the step number. The trainer sets each parameter group's lr to
// base_lr * factor(step, total) before every update.
#pragma once

#include <embedflow/embedflow.hpp>

#include <cstdint>

namespace embedflow::torchfam {

class Schedule : public Component {
 public:
  // Multiplier of the optimizer's base lr for the update at `step` (0-based). total_steps is
  // the trainer's max_steps (0: unknown).
  virtual double factor(std::int64_t step, std::int64_t total_steps) const = 0;
  // True when factor() needs total_steps (cosine without its own `steps`).
  virtual bool needs_total() const { return false; }
};

// The same question asked of a spec before any component exists (torch.train's load-time check:
// a torch.cosine without `steps`, also as a torch.warmup's `then`, needs max_steps).
bool schedule_needs_total(const Value& spec);

}  // namespace embedflow::torchfam
