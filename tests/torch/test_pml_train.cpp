// The learnable tensors of the losses from pytorch-metric-learning in torch.train (graphs run in
// process on the Fashion-MNIST subset): the proxies train with the model, every checkpoint holds
// them (read back in Python), and a run resumed from a checkpoint takes the same steps as an
// uninterrupted one, proxies and losses alike; a learnt margin boundary is checkpointed too; and
// the sizes and labels that do not fit are located errors.
#include <catch2/catch.hpp>

#include "harness.hpp"
#include "torch_test_util.hpp"

namespace fs = std::filesystem;
using namespace embedflow::test;

namespace {

// torch.train over train.h5 (512 images of 10 classes, batches of 64) with `loss`, a checkpoint
// after every step into dir/run.
std::string proxy_graph(const fs::path& dir, const std::string& run, const std::string& loss, int max_steps,
                        const std::string& embedding_dim = "16") {
  return "seed: 3\n"
         "nodes:\n"
         "  data:  {type: io.hdf5_reader, params: {path: " + torch_data("train.h5") + ", fields: [id, label, image], batch_size: 64, shuffle: true}}\n"
         "  train: {type: torch.train, params: {model: {type: torch.small_cnn, channels: [8, 16], hidden: 32, embedding_dim: " +
         embedding_dim + "}, loss: " + loss + ", optimizer: {type: torch.adam, lr: 0.01}, log_every: 1, threads: 2, "
         "checkpoint_every: 1, keep_checkpoints: 0, resume: auto, max_steps: " + std::to_string(max_steps) +
         ", log_dir: " + (dir / run).string() + ", checkpoint_dir: " + (dir / run / "ckpt").string() + "}}\n"
         "edges: [data.out -> train.in]\n";
}

embedflow::runs::testing::GraphRun run_in_process(const std::string& name, const std::string& yaml) {
  return embedflow::runs::testing::GraphRunner(plugins(), yaml, name).run();
}

const std::string kProxyAnchor = "{type: torch.proxy_anchor, num_classes: 10, embedding_size: 16}";

}  // namespace

TEST_CASE("PML losses in torch.train: proxies train, are checkpointed and resume exactly", "[torch][train][pml]") {
  const fs::path dir = scratch_dir("torch-pml-resume");
  auto full = run_in_process("full.yaml", proxy_graph(dir, "full", kProxyAnchor, 8));
  INFO(full.message());
  REQUIRE(full.exit_code == 0);
  // Interrupted after 4 steps, then resumed from the step-4 checkpoint to step 8.
  auto part = run_in_process("part.yaml", proxy_graph(dir, "part", kProxyAnchor, 4));
  REQUIRE(part.exit_code == 0);
  auto resumed = run_in_process("resumed.yaml", proxy_graph(dir, "part", kProxyAnchor, 8));
  INFO(resumed.message());
  REQUIRE(resumed.exit_code == 0);
  const auto a = read_metrics(dir / "full" / "metrics.csv"), b = read_metrics(dir / "part" / "metrics.csv");
  REQUIRE(a.size() == 8);
  REQUIRE(b.size() == 8);
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i].loss == b[i].loss);  // 9 significant digits: equal floats
  // The learnt boundary of the margin loss is checkpointed as well.
  auto margin = run_in_process("margin.yaml", proxy_graph(dir, "margin", "{type: torch.margin, learn_boundary: true, "
                                                                           "boundary_regularization: 0.1}", 3));
  INFO(margin.message());
  REQUIRE(margin.exit_code == 0);
  check_python(R"PY(
import sys, torch
d = sys.argv[1]
def state(path, key):
    m = getattr(torch.jit.load(path), key)
    return {n: getattr(m, f't{i}') for i, n in enumerate(m.names.split('\n')[:-1])}
ck = lambda run, t: f'{d}/{run}/ckpt/step-{t:08d}.pt'
proxies = [state(ck('full', t), 'loss')['proxies'] for t in range(1, 9)]
assert proxies[0].shape == (10, 16), proxies[0].shape
# Adam moves every proxy every step (each is a negative of some row of every batch).
for t in range(1, 8):
    assert (proxies[t] - proxies[t - 1]).abs().max() > 1e-4, t
# The resumed run's proxies and weights are the uninterrupted run's, bit for bit.
for t in (4, 8):
    assert torch.equal(state(ck('full', t), 'loss')['proxies'], state(ck('part', t), 'loss')['proxies']), t
    a, b = state(ck('full', t), 'model'), state(ck('part', t), 'model')
    assert all(torch.equal(a[n], b[n]) for n in a), t
beta = state(ck('margin', 3), 'loss')['boundary']
assert beta.shape == (1,) and abs(float(beta) - 1.2) > 1e-4, beta
print('ok', float(beta))
)PY",
               {dir.string()});
}

TEST_CASE("PML losses in torch.train: sizes and labels that do not fit are located errors", "[torch][train][pml]") {
  const fs::path dir = scratch_dir("torch-pml-errors");
  // embedding_size against the model's embedding_dim: refused when the graph loads, at the loss.
  auto sized = embedflow::runs::testing::GraphRunner(plugins(), proxy_graph(dir, "sized", kProxyAnchor, 2, "32"), "sized.yaml").validate();
  CHECK(sized.exit_code == 2);
  CHECK_THAT(sized.message(), Catch::Contains("torch.proxy_anchor"));
  CHECK_THAT(sized.message(), Catch::Contains("embedding"));
  // A label the loss has no proxy for stops the run naming the loss, the label and the step.
  auto labels = run_in_process("labels.yaml", proxy_graph(dir, "labels", "{type: torch.proxy_anchor, num_classes: 5, embedding_size: 16}", 2));
  CHECK(labels.exit_code != 0);
  CHECK_THAT(labels.message(), Catch::Contains("torch.proxy_anchor: label"));
  CHECK_THAT(labels.message(), Catch::Contains("is not below num_classes 5"));
  // Resuming with another number of proxies is an error naming the checkpoint's tensor.
  REQUIRE(run_in_process("first.yaml", proxy_graph(dir, "resize", kProxyAnchor, 1)).exit_code == 0);
  auto resized = run_in_process("resized.yaml", proxy_graph(dir, "resize", "{type: torch.proxy_anchor, num_classes: 12, embedding_size: 16}", 2));
  CHECK(resized.exit_code != 0);
  CHECK_THAT(resized.message(), Catch::Contains("loss tensor 'proxies' is [10, 16] but torch.proxy_anchor has it [12, 16]"));
}
