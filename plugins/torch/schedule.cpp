// torch.constant, torch.step, torch.cosine, torch.warmup: learning-rate multipliers. The formulas
// are PyTorch's (StepLR, CosineAnnealingLR, LinearLR for the warmup) so a graph and a Python
// script with the same settings follow the same lr curve.
#include <algorithm>
#include <cmath>

#include "schedule.hpp"
#include "torch_types.hpp"

namespace embedflow::torchfam {
namespace {

class Constant final : public Schedule {
 public:
  explicit Constant(const ComponentContext&) {}
  double factor(std::int64_t, std::int64_t) const override { return 1.0; }
};

class Step final : public Schedule {
 public:
  explicit Step(const ComponentContext& c)
      : every_(c.params().integer("step_size")), gamma_(c.params().number("gamma")) {}
  double factor(std::int64_t step, std::int64_t) const override {
    return std::pow(gamma_, static_cast<double>(step / every_));
  }

 private:
  std::int64_t every_;
  double gamma_;
};

class Cosine final : public Schedule {
 public:
  explicit Cosine(const ComponentContext& c)
      : steps_(c.params().integer("steps")), min_(c.params().number("min_factor")) {}
  double factor(std::int64_t step, std::int64_t total) const override {
    std::int64_t T = steps_ > 0 ? steps_ : total;
    if (T <= 0) throw ConfigError("torch.cosine needs `steps` or the trainer's max_steps");
    double t = static_cast<double>(std::min(step, T)) / static_cast<double>(T);
    return min_ + (1.0 - min_) * 0.5 * (1.0 + std::cos(M_PI * t));
  }
  bool needs_total() const override { return steps_ <= 0; }

 private:
  std::int64_t steps_;
  double min_;
};

class Warmup final : public Schedule {
 public:
  explicit Warmup(const ComponentContext& c)
      : steps_(c.params().integer("steps")), start_(c.params().number("start_factor")),
        then_(c.component<Schedule>("then")) {}
  double factor(std::int64_t step, std::int64_t total) const override {
    if (step < steps_) return start_ + (1.0 - start_) * static_cast<double>(step) / static_cast<double>(steps_);
    return then_->factor(step - steps_, total > 0 ? std::max<std::int64_t>(1, total - steps_) : 0);
  }
  bool needs_total() const override { return then_->needs_total(); }

 private:
  std::int64_t steps_;
  double start_;
  std::unique_ptr<Schedule> then_;
};

}  // namespace

bool schedule_needs_total(const Value& spec) {
  const Value* t = spec.get("type");
  if (!t || !t->is_string()) return false;
  if (t->as_string() == "torch.cosine") {
    const Value* s = spec.get("steps");
    return !s || (s->is_integer() && s->as_integer() == 0);
  }
  if (t->as_string() == "torch.warmup")
    if (const Value* then = spec.get("then")) return schedule_needs_total(*then);
  return false;
}

ComponentType constant_type() {
  return ComponentTypeBuilder("torch.constant", "schedule").doc("lr = base lr at every step.").create<Constant>();
}

ComponentType step_type() {
  return ComponentTypeBuilder("torch.step", "schedule")
      .doc("lr = base lr * gamma^floor(step / step_size) (PyTorch StepLR, stepped per update).")
      .param(Param::integer("step_size").min(1).doc("updates between decays"))
      .param(Param::number("gamma").default_value(0.1).range(0.0, 1.0).doc("decay factor"))
      .create<Step>();
}

ComponentType cosine_type() {
  return ComponentTypeBuilder("torch.cosine", "schedule")
      .doc("lr = base lr * (m + (1 - m)(1 + cos(pi t / T)) / 2), t capped at T (PyTorch CosineAnnealingLR "
           "with eta_min = m * base lr).")
      .param(Param::integer("steps").default_value(0).min(0).doc("T, the updates to anneal over; 0: the trainer's max_steps"))
      .param(Param::number("min_factor").default_value(0.0).range(0.0, 1.0).doc("m, the final lr as a fraction of the base lr"))
      .create<Cosine>();
}

ComponentType warmup_type() {
  return ComponentTypeBuilder("torch.warmup", "schedule")
      .doc("Linear warmup from start_factor * base lr to the base lr over `steps` updates (PyTorch LinearLR), then "
           "the `then` schedule counted from the end of the warmup.")
      .param(Param::integer("steps").min(1).doc("warmup updates"))
      .param(Param::number("start_factor").default_value(0.0).range(0.0, 1.0).doc("lr multiplier at the first update"))
      .param(Param::component("then", "schedule")
                 .default_value(Value::map({{"type", Value::string("torch.constant")}}))
                 .doc("schedule after the warmup (torch.cosine, torch.step, ...)"))
      .create<Warmup>();
}

}  // namespace embedflow::torchfam
