// torch.train's amp: the loss scaler against a Python transcription of torch.cuda.amp.GradScaler
// (its update rule is the CUDA kernel _amp_update_scale_, which has no CPU kernel to call here),
// and bfloat16 autocast training on the CPU.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <sstream>

#include "cli.hpp"
#include "grad_scaler.hpp"
#include "harness.hpp"
#include "torch_test_util.hpp"

namespace fs = std::filesystem;
using namespace embedflow::test;
using embedflow::torchfam::GradScalerOptions;

namespace {

// GradScaler's step on one float32 parameter trained by SGD (lr 1): backward of the scaled loss
// gives g * scale, unscale_ multiplies by 1/scale and flags a non-finite result, step() is skipped
// when flagged, and update() follows aten/src/ATen/native/cuda/AmpKernels.cu's
// _amp_update_scale_cuda_kernel (float32 scale and its finite check on growth). Prints one line
// per step: scale used, stepped, parameter, scale after, growth tracker after.
const char* kReference = R"PY(
import sys, numpy as np
grads = [float(x) for x in sys.argv[1].split(',')]
scale, growth, backoff, interval = np.float32(float(sys.argv[2])), np.float32(2.0), np.float32(0.5), int(sys.argv[3])
tracker, w = 0, np.float32(0)
with np.errstate(over='ignore', invalid='ignore'):
    for g in grads:
        used = scale
        grad = np.float32(g) * used
        grad = grad * np.float32(1.0 / used)
        found_inf = not np.isfinite(grad)
        if not found_inf:
            w = np.float32(w - grad)
        if found_inf:
            scale, tracker = scale * backoff, 0
        else:
            tracker += 1
            if tracker == interval:
                grown = np.float32(scale * growth)
                if np.isfinite(grown):
                    scale = grown
                tracker = 0
        print(repr(float(used)), int(not found_inf), repr(float(w)), repr(float(scale)), tracker)
)PY";

void check_against_reference(const std::vector<double>& grads, double init_scale, std::int64_t interval) {
  GradScalerOptions o;
  o.init_scale = init_scale;
  o.growth_interval = interval;
  const auto trace = embedflow::torchfam::trace_grad_scaler(grads, o);
  std::ostringstream list;
  for (std::size_t i = 0; i < grads.size(); ++i) list << (i ? "," : "") << grads[i];
  std::ostringstream scale;
  scale.precision(17);
  scale << init_scale;
  const Result py = run_python(kReference, {list.str(), scale.str(), std::to_string(interval)});
  INFO(py.out << py.err);
  REQUIRE(py.exit_code == 0);
  std::istringstream lines(py.out);
  for (std::size_t i = 0; i < grads.size(); ++i) {
    double used = 0, w = 0, after = 0;
    int stepped = 0;
    std::int64_t tracker = 0;
    REQUIRE(lines >> used >> stepped >> w >> after >> tracker);
    INFO("step " << i << " gradient " << grads[i]);
    CHECK(trace[i].scale == used);
    CHECK(trace[i].stepped == (stepped == 1));
    CHECK(trace[i].parameter == w);
    CHECK(trace[i].scale_after == after);
    CHECK(trace[i].tracker == tracker);
  }
}

}  // namespace

TEST_CASE("amp's loss scaler steps, skips and rescales as torch.cuda.amp.GradScaler", "[torch][amp]") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  SECTION("inf and NaN gradients are skipped and back the scale off; clean runs grow it") {
    // 3e37 is finite but overflows float32 once scaled by 16: skipped, as GradScaler skips it.
    const std::vector<double> grads{1, 2, inf, 0.5, -0.25, 1, nan, 3e37, 1, 1, 1, 1, 0.125};
    check_against_reference(grads, 8.0, 3);
    const auto t = embedflow::torchfam::trace_grad_scaler(grads, GradScalerOptions{8.0, 2.0, 0.5, 3});
    CHECK(!t[2].stepped);
    CHECK(t[2].parameter == t[1].parameter);  // the inf step changed nothing
    CHECK(t[2].scale_after == 4.0);
    CHECK(t[5].scale_after == 8.0);  // three clean steps after the back-off: grown
  }
  SECTION("growth past float's range keeps the scale") {
    check_against_reference({1, 1, 1, 1}, 0x1p126, 1);
    const auto t = embedflow::torchfam::trace_grad_scaler({1, 1, 1}, GradScalerOptions{0x1p126, 2.0, 0.5, 1});
    CHECK(t[0].scale_after == 0x1p127);
    CHECK(t[1].scale_after == 0x1p127);
  }
}

TEST_CASE("amp on the CPU trains in bfloat16 autocast", "[torch][amp][train]") {
  fs::path dir = scratch_dir("torch-amp");
  auto graph = [&](const std::string& run, bool amp) {
    return "# amp\nseed: 3\nnodes:\n"
           "  data:  {type: io.hdf5_reader, params: {path: " + torch_data("train.h5") + ", fields: [label, image], batch_size: 64, shuffle: true}}\n"
           "  train: {type: torch.train, params: {model: {type: torch.small_cnn, channels: [8, 16], hidden: 32, embedding_dim: 16}, "
           "loss: {type: torch.batch_hard_triplet, margin: 0.2}, optimizer: {type: torch.adam, lr: 0.01}, epochs: 3, "
           "log_every: 1, threads: 1, amp: " + std::string(amp ? "true" : "false") + ", log_dir: " + (dir / run).string() + "}}\n"
           "edges: [data.out -> train.in]\n";
  };
  write_file(dir / "amp.yaml", graph("amp", true));
  write_file(dir / "f32.yaml", graph("f32", false));
  auto amp = run_cli({"run", (dir / "amp.yaml").string(), "--quiet"});
  auto f32 = run_cli({"run", (dir / "f32.yaml").string(), "--quiet"});
  INFO(amp.err << f32.err);
  REQUIRE(amp.exit_code == 0);
  REQUIRE(f32.exit_code == 0);
  auto a = read_metrics(dir / "amp" / "metrics.csv"), b = read_metrics(dir / "f32" / "metrics.csv");
  REQUIRE(a.size() == 24);
  REQUIRE(b.size() == 24);
  auto mean = [](const std::vector<MetricsRow>& m, std::size_t from, std::size_t to) {
    double s = 0;
    for (std::size_t i = from; i < to; ++i) s += std::stod(m[i].loss);
    return s / static_cast<double>(to - from);
  };
  // It trains: the last epoch's mean loss is well below the first's, as in float32.
  INFO("amp epochs: " << mean(a, 0, 8) << " -> " << mean(a, 16, 24) << "; f32: " << mean(b, 0, 8) << " -> " << mean(b, 16, 24));
  CHECK(mean(a, 16, 24) < 0.8 * mean(a, 0, 8));
  // bfloat16 ran: the first step's loss (same weights, same batch) differs from float32's, a little.
  const double first_gap = std::abs(std::stod(a[0].loss) - std::stod(b[0].loss));
  INFO("first loss amp " << a[0].loss << " f32 " << b[0].loss);
  CHECK(first_gap > 1e-6);
  CHECK(first_gap < 0.05 * std::stod(b[0].loss));
}

// A checkpoint keeps the loss scale and the clean-step count: with the scale doubling every 2
// clean steps from 1, the uninterrupted run ends at 2^8 after 16 steps; a run stopped after 11
// (tracker 1) and resumed must end there too — restarting the scale would give 2^2, and losing
// the tracker 2^7. bfloat16 keeps float32's range, so no step here overflows and the losses are
// bitwise those of the uninterrupted run.
TEST_CASE("amp's loss scale is checkpointed and resumed", "[torch][amp][train]") {
  fs::path dir = scratch_dir("torch-amp-resume");
  auto graph = [&](const std::string& run, int max_steps, bool amp) {
    return "# amp resume\nseed: 3\nnodes:\n"
           "  data:  {type: io.hdf5_reader, params: {path: " + torch_data("train.h5") + ", fields: [label, image], batch_size: 64, shuffle: true}}\n"
           "  train: {type: torch.train, params: {model: {type: torch.small_cnn, channels: [8, 16], hidden: 32, embedding_dim: 16}, "
           "loss: {type: torch.batch_hard_triplet, margin: 0.2}, optimizer: {type: torch.adam, lr: 0.01}, epochs: 2, "
           "log_every: 1, threads: 1, amp: " + std::string(amp ? "true" : "false") + ", amp_init_scale: 1, amp_growth_interval: 2, "
           "checkpoint_every: 5, keep_checkpoints: 0, resume: auto, max_steps: " + std::to_string(max_steps) +
           ", log_dir: " + (dir / run).string() + ", checkpoint_dir: " + (dir / run / "ckpt").string() + "}}\n"
           "edges: [data.out -> train.in]\n";
  };
  auto run = [&](const std::string& name, const std::string& yaml) {
    write_file(dir / name, yaml);
    auto r = run_cli({"run", (dir / name).string()});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return r.err;
  };
  const std::string full = run("full.yaml", graph("full", 0, true));
  CHECK_THAT(full, Catch::Contains("trained 16 steps; last loss"));
  CHECK_THAT(full, Catch::Contains("amp loss scale 256 (0 steps skipped in this run)"));
  const std::string part = run("part.yaml", graph("part", 11, true));
  CHECK_THAT(part, Catch::Contains("amp loss scale 32 ("));
  const std::string resumed = run("resumed.yaml", graph("part", 0, true));
  CHECK_THAT(resumed, Catch::Contains("(resumed at step 11)"));
  CHECK_THAT(resumed, Catch::Contains("amp loss scale 256 (0 steps skipped in this run)"));
  auto a = read_metrics(dir / "full" / "metrics.csv"), b = read_metrics(dir / "part" / "metrics.csv");
  REQUIRE(a.size() == 16);
  REQUIRE(b.size() == 16);
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO("row " << i);
    CHECK(a[i].loss == b[i].loss);
  }
  // The same checkpoints resumed without amp: said, and trained in float32 from there.
  fs::copy(dir / "part", dir / "plain", fs::copy_options::recursive);
  fs::remove(dir / "plain" / "ckpt" / "step-00000016.pt");
  const std::string plain = run("plain.yaml", graph("plain", 0, false));
  CHECK_THAT(plain, Catch::Contains("was written with amp; this run (amp off) trains in full precision"));
  CHECK(plain.find("amp loss scale") == std::string::npos);
}

// The GPU path end to end: device cuda (pinned, non-blocking batch copies), float16 autocast with
// the loss scaler, against the same run in float32 on the CPU. On a machine where LibTorch sees no
// CUDA device (a CPU build, or no GPU) it says so and checks only that asking for cuda is refused.
TEST_CASE("the GPU path trains with device cuda and float16 amp", "[torch][amp][gpu]") {
  fs::path dir = scratch_dir("torch-gpu");
  auto graph = [&](const std::string& run, const std::string& device, bool amp) {
    return "# gpu\nseed: 3\nnodes:\n"
           "  data:  {type: io.hdf5_reader, params: {path: " + torch_data("train.h5") + ", fields: [label, image], batch_size: 64, shuffle: true}}\n"
           "  train: {type: torch.train, params: {model: {type: torch.small_cnn, channels: [8, 16], hidden: 32, embedding_dim: 16, "
           "device: " + device + "}, loss: {type: torch.batch_hard_triplet, margin: 0.2}, optimizer: {type: torch.adam, lr: 0.01}, "
           "epochs: 3, log_every: 1, threads: 1, amp: " + std::string(amp ? "true" : "false") + ", log_dir: " + (dir / run).string() + "}}\n"
           "edges: [data.out -> train.in]\n";
  };
  write_file(dir / "gpu.yaml", graph("gpu", "cuda", true));
  write_file(dir / "cpu.yaml", graph("cpu", "cpu", false));
  auto gpu = run_cli({"run", (dir / "gpu.yaml").string(), "--quiet"});
  const std::string no_gpu = "device cuda was asked for, but LibTorch sees no CUDA device";
  if (gpu.exit_code != 0 && gpu.err.find(no_gpu) != std::string::npos) {
    WARN("no CUDA device visible to LibTorch: the GPU path (device cuda, pinned copies, float16 autocast, NCCL) is not "
         "exercised on this machine; only the refusal of device cuda was checked");
    CHECK_THAT(gpu.err, Catch::Contains("node 'train'"));
    return;
  }
  auto cpu = run_cli({"run", (dir / "cpu.yaml").string(), "--quiet"});
  INFO(gpu.err << cpu.err);
  REQUIRE(gpu.exit_code == 0);
  REQUIRE(cpu.exit_code == 0);
  auto a = read_metrics(dir / "gpu" / "metrics.csv"), b = read_metrics(dir / "cpu" / "metrics.csv");
  REQUIRE(a.size() == b.size());
  auto mean = [](const std::vector<MetricsRow>& m, std::size_t from, std::size_t to) {
    double s = 0;
    for (std::size_t i = from; i < to; ++i) s += std::stod(m[i].loss);
    return s / static_cast<double>(to - from);
  };
  const std::size_t n = a.size(), third = n / 3;
  CHECK(mean(a, n - third, n) < 0.8 * mean(a, 0, third));
  // Same weights and batch at step 1: float16 moves the loss a little, not a lot.
  CHECK(std::abs(std::stod(a[0].loss) - std::stod(b[0].loss)) < 0.05 * std::stod(b[0].loss));
}
