// Learning-rate schedules against PyTorch's schedulers (StepLR, CosineAnnealingLR, LinearLR and
// SequentialLR), stepped once per update as torch.train does. Compiles without LibTorch.
#include <catch2/catch.hpp>

#include <sstream>

#include "cli.hpp"
#include "schedule.hpp"
#include "torch_types.hpp"

using namespace embedflow;
using embedflow::test::run_python;

namespace {

std::unique_ptr<torchfam::Schedule> make(const std::string& yaml_type, Value::Map params) {
  Value::Map m{{"type", Value::string(yaml_type)}};
  for (auto& p : params) m.push_back(std::move(p));
  Registry types;
  torchfam::register_types(types);
  auto c = types.instantiate(Value::map(std::move(m)), 1, "test");
  auto* s = dynamic_cast<torchfam::Schedule*>(c.get());
  REQUIRE(s);
  c.release();
  return std::unique_ptr<torchfam::Schedule>(s);
}

}  // namespace

TEST_CASE("schedules follow PyTorch's schedulers", "[torch][schedule][python]") {
  const int steps = 30;
  auto res = run_python(R"PY(
import torch
def run(make):
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=0.5)
    s = make(opt)
    out = []
    for _ in range(30):
        out.append(opt.param_groups[0]['lr'])
        opt.step()
        s.step()
    print(' '.join(repr(v) for v in out))
S = torch.optim.lr_scheduler
run(lambda o: S.StepLR(o, step_size=7, gamma=0.3))
run(lambda o: S.CosineAnnealingLR(o, T_max=30, eta_min=0.05))
run(lambda o: S.SequentialLR(o, [S.LinearLR(o, start_factor=0.1, total_iters=5),
                                 S.CosineAnnealingLR(o, T_max=25, eta_min=0.0)], milestones=[5]))
)PY");
  INFO(res.err);
  REQUIRE(res.exit_code == 0);
  std::istringstream lines(res.out);
  std::vector<std::vector<double>> ref;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream items(line);
    ref.emplace_back();
    for (double v; items >> v;) ref.back().push_back(v);
  }
  REQUIRE(ref.size() == 3);
  auto step = make("torch.step", {{"step_size", Value::integer(7)}, {"gamma", Value::number(0.3)}});
  auto cosine = make("torch.cosine", {{"steps", Value::integer(30)}, {"min_factor", Value::number(0.1)}});
  auto warm = make("torch.warmup", {{"steps", Value::integer(5)},
                                    {"start_factor", Value::number(0.1)},
                                    {"then", Value::map({{"type", Value::string("torch.cosine")}})}});
  CHECK(warm->needs_total());  // the inner cosine anneals over the trainer's max_steps
  for (int k = 0; k < steps; ++k) {
    INFO("step " << k);
    CHECK(0.5 * step->factor(k, 0) == Approx(ref[0][static_cast<std::size_t>(k)]).epsilon(1e-9));
    CHECK(0.5 * cosine->factor(k, 0) == Approx(ref[1][static_cast<std::size_t>(k)]).epsilon(1e-9).margin(1e-12));
    CHECK(0.5 * warm->factor(k, 30) == Approx(ref[2][static_cast<std::size_t>(k)]).epsilon(1e-9).margin(1e-12));
  }
  CHECK_THROWS_WITH(make("torch.cosine", {})->factor(3, 0), Catch::Contains("needs `steps` or the trainer's max_steps"));
}
