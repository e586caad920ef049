// Autoencoder models and losses: torch.reconstruction and torch.kl_divergence against a
// hand computation and against python3-torch (F.mse_loss, F.binary_cross_entropy, the closed-form
// KL and its autograd gradients) on fixed tensors, through evaluate_loss with "output.<name>"
// fields standing for the model's named outputs; then torch.conv_ae / torch.conv_vae training on
// a Fashion-MNIST subset in graphs run in process: the reconstruction loss falls, a VAE with KL and a
// latent contrastive term repeats its losses exactly under the same seed, and a KL term on a
// model without logvar is a clear error.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <sstream>

#include "harness.hpp"
#include "torch_test_util.hpp"
#include "torch_types.hpp"

namespace fs = std::filesystem;
using namespace embedflow;
using namespace embedflow::test;
using embedflow::torchfam::evaluate_loss;

namespace {


std::vector<double> parse_numbers(const std::string& text) {
  std::istringstream in(text);
  std::vector<double> v;
  double d;
  while (in >> d) v.push_back(d);
  return v;
}

std::vector<float> to_float(const std::vector<double>& v, std::size_t from, std::size_t n) {
  return std::vector<float>(v.begin() + from, v.begin() + from + n);
}

double mean_image_mse = 0;  // MSE per pixel of predicting every image by the subset's mean image

// The first 512 Fashion-MNIST training images as f32 [N,1,28,28] in [0,1], with labels and ids
// (torch_data's train.h5); sets mean_image_mse from them.
const fs::path& fashion_h5() {
  static const fs::path path = [] {
    const fs::path train = torch_data("train.h5");
    auto r = run_python(R"PY(
import sys, numpy as np, h5py
with h5py.File(sys.argv[1], 'r') as f:
    x = f['image'][:]
print(float(((x - x.mean(0)) ** 2).mean()))
)PY",
                        {train.string()});
    if (r.exit_code != 0) throw std::runtime_error("measuring the mean-image baseline failed: " + r.err);
    mean_image_mse = std::stod(r.out);
    return train;
  }();
  return path;
}

// Trains `model` with `loss` on the subset (batch 64, 8 steps per epoch, log every step) and
// returns the loss column of metrics.csv.
std::vector<double> train_losses(const fs::path& dir, const std::string& model, const std::string& loss,
                                 const std::string& seed = "3", std::string* err = nullptr, int epochs = 2,
                                 const std::string& lr = "0.003", const std::string& extra = "") {
  std::string yaml = "# autoencoder training test graph.\nseed: " + seed +
                     "\nnodes:\n"
                     "  data:  {type: io.hdf5_reader, params: {path: " + fashion_h5().string() +
                     ", fields: [id, label, image], batch_size: 64, shuffle: true}}\n"
                     "  train: {type: torch.train, params: {model: " + model + ", loss: " + loss +
                     ", optimizer: {type: torch.adam, lr: " + lr + "}, epochs: " + std::to_string(epochs) + ", log_every: 1, threads: 2, " + extra + (extra.empty() ? "" : ", ") + "log_dir: " +
                     (dir / "log").string() + "}}\nedges:\n  - data.out -> train.in\n";
  const GraphRun r = GraphRunner(plugins(), yaml, "g.yaml").run();
  if (err) *err = r.out + r.message();
  if (r.exit_code != 0) {
    if (!err) FAIL(r.out << r.message());
    return {};
  }
  std::vector<double> losses = embedflow::test::metrics_losses(dir / "log" / "metrics.csv");
  return losses;
}

double mean(const std::vector<double>& v, std::size_t from, std::size_t to) {
  double s = 0;
  for (std::size_t i = from; i < to; ++i) s += v[i];
  return s / double(to - from);
}

}  // namespace

TEST_CASE("reconstruction and KL by hand", "[torch][autoencoder][loss]") {
  // Two 1x1x2 images x and reconstructions r.
  Record b;
  b.set("image", Array::from_vector<float>({2, 1, 1, 2}, {0, 1, 0.5f, 0.5f}));
  b.set("output.reconstruction", Array::from_vector<float>({2, 1, 1, 2}, {0.5f, 0.5f, 0.5f, 1}));
  // MSE: squared errors .25, .25, 0, .25: per pixel .75 / 4; per image .75 / 2.
  CHECK(evaluate_loss(spec("torch.reconstruction"), b) == Approx(0.1875).epsilon(1e-6));
  CHECK(evaluate_loss(spec("torch.reconstruction", {{"reduction", str("sum")}}), b) == Approx(0.375).epsilon(1e-6));
  // BCE: ln 2 for each of the first three pixels; the fourth (x = .5, r = 1) has log(1 - r) clamped
  // at -100 as PyTorch does: .5 * 100 = 50.
  const double bce = 3 * std::log(2.0) + 50;
  CHECK(evaluate_loss(spec("torch.reconstruction", {{"error", str("bce")}}), b) == Approx(bce / 4).epsilon(1e-5));
  CHECK(evaluate_loss(spec("torch.reconstruction", {{"error", str("bce")}, {"reduction", str("sum")}}), b) ==
        Approx(bce / 2).epsilon(1e-5));

  // KL of two 2-d latents: mu (0, 1), logvar (0, ln 2) gives -1/2 (0 + (1 + ln 2 - 1 - 2)) = 1 - ln 2 / 2;
  // mu (2, 0), logvar (0, 0) gives -1/2 (1 - 4 - 1) = 2. Mean over images, times beta.
  Record k;
  k.set("image", Array::from_vector<float>({2, 1, 1, 1}, {0, 0}));
  k.set("output.mu", Array::from_vector<float>({2, 2}, {0, 1, 2, 0}));
  k.set("output.logvar", Array::from_vector<float>({2, 2}, {0, float(std::log(2.0)), 0, 0}));
  const double kl = (1 - std::log(2.0) / 2 + 2) / 2;
  CHECK(evaluate_loss(spec("torch.kl_divergence"), k) == Approx(kl).epsilon(1e-6));
  CHECK(evaluate_loss(spec("torch.kl_divergence", {{"beta", Value::number(0.25)}}), k) == Approx(0.25 * kl).epsilon(1e-6));
  // A weighted torch.sum of both, as a VAE objective is written in a graph.
  Record v = b;
  v.set("output.mu", Array::from_vector<float>({2, 2}, {0, 1, 2, 0}));
  v.set("output.logvar", Array::from_vector<float>({2, 2}, {0, float(std::log(2.0)), 0, 0}));
  Value sum = spec("torch.sum", {{"a", spec("torch.reconstruction", {{"reduction", str("sum")}})},
                                 {"b", spec("torch.kl_divergence")},
                                 {"weights", Value::list({Value::number(1), Value::number(0.5)})}});
  CHECK(evaluate_loss(sum, v) == Approx(0.375 + 0.5 * kl).epsilon(1e-6));

  // A KL term without a logvar output names what is missing.
  CHECK_THROWS_WITH(evaluate_loss(spec("torch.kl_divergence"), b), Catch::Contains("output 'mu'"));
  // BCE targets outside [0,1] (normalised images) are a data error, not a silent NaN.
  Record n = b;
  n.set("image", Array::from_vector<float>({2, 1, 1, 2}, {0, 1.5f, 0.5f, 0.5f}));
  CHECK_THROWS_WITH(evaluate_loss(spec("torch.reconstruction", {{"error", str("bce")}}), n), Catch::Contains("[0,1]"));
}

TEST_CASE("reconstruction and KL against python3-torch, values and gradients", "[torch][autoencoder][loss][python]") {
  // PyTorch draws the tensors and computes the oracle; its printout is parsed back here.
  auto r = run_python(R"PY(
import torch, torch.nn.functional as F
torch.manual_seed(5)
n, c, h, w, d = 4, 1, 3, 5, 3
x = torch.rand(n, c, h, w)
rec = torch.sigmoid(torch.randn(n, c, h, w)).requires_grad_()
mu = torch.randn(n, d).requires_grad_()
logvar = (0.5 * torch.randn(n, d)).requires_grad_()
out = []
for v in (F.mse_loss(rec, x), F.mse_loss(rec, x, reduction='sum') / n,
          F.binary_cross_entropy(rec, x), F.binary_cross_entropy(rec, x, reduction='sum') / n):
    out.append(v.item())
kl = 0.7 * (-0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).sum(1)).mean()
kl.backward()
out.append(kl.item())
bce = F.binary_cross_entropy(rec, x, reduction='sum') / n
bce.backward()
vals = out + x.flatten().tolist() + rec.detach().flatten().tolist() + mu.detach().flatten().tolist() \
     + logvar.detach().flatten().tolist() + mu.grad.flatten().tolist() + logvar.grad.flatten().tolist() \
     + rec.grad.flatten().tolist()
print(' '.join(repr(float(v)) for v in vals))
)PY");
  REQUIRE(r.exit_code == 0);
  std::vector<double> v = parse_numbers(r.out);
  const std::size_t px = 4 * 15, lat = 4 * 3;
  REQUIRE(v.size() == 5 + 2 * px + 4 * lat + px);
  Record b;
  std::size_t at = 5;
  b.set("image", Array::from_vector<float>({4, 1, 3, 5}, to_float(v, at, px)));
  at += px;
  b.set("output.reconstruction", Array::from_vector<float>({4, 1, 3, 5}, to_float(v, at, px)));
  at += px;
  b.set("output.mu", Array::from_vector<float>({4, 3}, to_float(v, at, lat)));
  at += lat;
  b.set("output.logvar", Array::from_vector<float>({4, 3}, to_float(v, at, lat)));
  at += lat;
  CHECK(evaluate_loss(spec("torch.reconstruction"), b) == Approx(v[0]).epsilon(1e-5));
  CHECK(evaluate_loss(spec("torch.reconstruction", {{"reduction", str("sum")}}), b) == Approx(v[1]).epsilon(1e-5));
  CHECK(evaluate_loss(spec("torch.reconstruction", {{"error", str("bce")}}), b) == Approx(v[2]).epsilon(1e-5));
  Record grads;
  CHECK(evaluate_loss(spec("torch.kl_divergence", {{"beta", Value::number(0.7)}}), b, &grads) == Approx(v[4]).epsilon(1e-5));
  const float* gmu = grads.get("output.mu").data<float>();
  const float* glv = grads.get("output.logvar").data<float>();
  for (std::size_t i = 0; i < lat; ++i) {
    CHECK(gmu[i] == Approx(v[at + i]).margin(1e-6));
    CHECK(glv[i] == Approx(v[at + lat + i]).margin(1e-6));
  }
  at += 2 * lat;
  Record rg;
  CHECK(evaluate_loss(spec("torch.reconstruction", {{"error", str("bce")}, {"reduction", str("sum")}}), b, &rg) ==
        Approx(v[3]).epsilon(1e-5));
  const float* grec = rg.get("output.reconstruction").data<float>();
  for (std::size_t i = 0; i < px; ++i) CHECK(grec[i] == Approx(v[at + i]).epsilon(1e-4).margin(1e-5));
}

TEST_CASE("torch.conv_ae training lowers the reconstruction loss", "[torch][autoencoder]") {
  fs::path dir = scratch_dir("torch-conv-ae");
  auto losses = train_losses(dir, "{type: torch.conv_ae, channels: [8, 16], latent_dim: 8}", "{type: torch.reconstruction}",
                             "3", nullptr, 6, "0.01");
  REQUIRE(losses.size() == 48);
  INFO("MSE per pixel: first steps " << mean(losses, 0, 8) << ", last epoch " << mean(losses, 40, 48)
                                     << ", mean-image baseline " << mean_image_mse);
  CHECK(mean(losses, 40, 48) < 0.6 * mean(losses, 0, 8));
  // Below the error of predicting the mean image: the 8-d latent carries per-image information.
  CHECK(mean(losses, 40, 48) < 0.85 * mean_image_mse);
}

TEST_CASE("a siamese conv VAE (reconstruction + KL + latent all-pairs) is deterministic by seed",
          "[torch][autoencoder]") {
  const std::string model = "{type: torch.conv_vae, channels: [8, 16], latent_dim: 4}";
  const std::string loss =
      "{type: torch.sum, a: {type: torch.reconstruction, error: bce, reduction: sum}, b: {type: torch.kl_divergence, "
      "beta: 1.0}, c: {type: torch.all_pairs_contrastive, mu: 0.5, margin: 2.0}, weights: [1, 1, 10]}";
  // One epoch each keeps the three runs short (LibTorch with 2 threads on a loaded 2-core machine
  // spends most of a small step in parallel-region overhead).
  auto first = train_losses(scratch_dir("torch-vae-1"), model, loss, "3", nullptr, 1);
  auto second = train_losses(scratch_dir("torch-vae-2"), model, loss, "3", nullptr, 1);
  auto other = train_losses(scratch_dir("torch-vae-3"), model, loss, "4", nullptr, 1);
  REQUIRE(first.size() == 8);
  CHECK(first == second);
  CHECK(first != other);
  INFO("loss: first steps " << mean(first, 0, 4) << ", last steps " << mean(first, 4, 8));
  CHECK(mean(first, 4, 8) < mean(first, 0, 4));
}

TEST_CASE("a KL term on a plain autoencoder and a wrong image size are clear errors", "[torch][autoencoder]") {
  std::string err;
  auto none = train_losses(scratch_dir("torch-ae-kl"), "{type: torch.conv_ae, channels: [8]}",
                           "{type: torch.kl_divergence}", "3", &err);
  CHECK(none.empty());
  // Both found at validation, from the model's and the loss's contracts, before any data flows.
  CHECK_THAT(err, Catch::Contains("param 'loss': torch.kl_divergence reads outputs: needs field 'logvar' but upstream "
                                  "provides only {embedding, mu, latent, reconstruction}"));
  none = train_losses(scratch_dir("torch-ae-size"), "{type: torch.conv_ae, channels: [8, 16], image_size: 32}",
                      "{type: torch.reconstruction}", "3", &err);
  CHECK(none.empty());
  CHECK_THAT(err, Catch::Contains("param 'model': torch.conv_ae reads in: field 'image' dim 2: expects 32, upstream gives 28"));
  none = train_losses(scratch_dir("torch-ae-cfg"), "{type: torch.conv_ae, channels: [8, 16, 32]}",
                      "{type: torch.reconstruction}", "3", &err);
  CHECK(none.empty());
  CHECK_THAT(err, Catch::Contains("divisible by 2^3"));
}

TEST_CASE("torch.embed emits a VAE's mu and reconstructions and draws the mosaic", "[torch][autoencoder][embed]") {
  fs::path dir = scratch_dir("torch-vae-embed");
  const std::string h5 = fashion_h5().string();
  std::string yaml =
      "# train a conv VAE, then embed 40 images with their reconstructions and a mosaic.\nseed: 2\nnodes:\n"
      "  data:  {type: io.hdf5_reader, params: {path: " + h5 + ", fields: [id, label, image], batch_size: 64}}\n"
      "  train: {type: torch.train, params: {model: {type: torch.conv_vae, channels: [8, 16], latent_dim: 6}, "
      "loss: {type: torch.sum, a: {type: torch.reconstruction, reduction: sum}, b: {type: torch.kl_divergence}}, "
      "max_steps: 8, threads: 2}}\n"
      "  test:  {type: io.hdf5_reader, params: {path: " + h5 + ", fields: [id, label, image], batch_size: 16}}\n"
      "  head:  {type: core.limit, params: {count: 3}}\n"
      "  embed: {type: torch.embed, params: {outputs: [mu, reconstruction], mosaic: " + (dir / "mosaic.png").string() +
      ", mosaic_count: 20, mosaic_scale: 1, threads: 2}}\n"
      "  save:  {type: io.hdf5_writer, params: {path: " + (dir / "emb.h5").string() + ", group: emb}}\n"
      "edges:\n  - data.out -> train.in\n  - train.model -> embed.model\n  - test.out -> head.in\n"
      "  - head.out -> embed.in\n  - embed.out -> save.in\n";
  const GraphRun r = GraphRunner(plugins(), yaml, "g.yaml").run();
  INFO(r.out << r.message());
  REQUIRE(r.exit_code == 0);
  // The embedding is mu (eval mode: the latent is the mean); reconstructions have the images' shape;
  // the mosaic is 3 rows of 8 cells (20 images) over their reconstruction rows: 6 x 30 + 2 high.
  auto py = run_python(R"PY(
import sys, h5py, numpy as np, zlib, struct
e = h5py.File(sys.argv[1] + '/emb.h5')['emb']
emb, mu, rec = e['embedding'][:], e['mu'][:], e['reconstruction'][:]
assert emb.shape == (48, 6) and np.array_equal(emb, mu), (emb.shape, mu.shape)
assert rec.shape == (48, 1, 28, 28) and rec.min() >= 0 and rec.max() <= 1
png = open(sys.argv[1] + '/mosaic.png', 'rb').read()
assert png[:8] == b'\x89PNG\r\n\x1a\n'
w, h = struct.unpack('>II', png[16:24])
print(w, h)
)PY",
                       {dir.string()});
  INFO(py.out << py.err);
  REQUIRE(py.exit_code == 0);
  CHECK(py.out == "242 182\n");
}

TEST_CASE("labelled_fraction hides labels from the latent refinement (semi-supervised)", "[torch][autoencoder][semi]") {
  const std::string model = "{type: torch.conv_ae, channels: [8], latent_dim: 4}";
  const std::string ae = "{type: torch.sum, a: {type: torch.reconstruction}}";
  const std::string siamese = "{type: torch.sum, a: {type: torch.reconstruction}, b: {type: torch.all_pairs_contrastive}}";
  auto alone = train_losses(scratch_dir("torch-semi-ae"), model, ae, "3", nullptr, 1);
  auto none = train_losses(scratch_dir("torch-semi-0"), model, siamese, "3", nullptr, 1, "0.003", "labelled_fraction: 0");
  auto all = train_losses(scratch_dir("torch-semi-1"), model, siamese, "3", nullptr, 1, "0.003", "labelled_fraction: 1");
  auto full = train_losses(scratch_dir("torch-semi-d"), model, siamese, "3", nullptr, 1);
  auto part = train_losses(scratch_dir("torch-semi-h"), model, siamese, "3", nullptr, 1, "0.003", "labelled_fraction: 0.3");
  REQUIRE(alone.size() == 8);
  // No labels: the contrastive term has no known pair and adds exactly nothing.
  CHECK(none == alone);
  // All labels: the same run as without the parameter; a fraction lies in between.
  CHECK(all == full);
  CHECK(part != full);
  CHECK(part != alone);
  // Step 1 starts from the same weights in every run: the partly labelled batch still has known pairs
  // (a positive contrastive term), but other ones than the fully labelled batch.
  CHECK(part[0] > alone[0]);
  CHECK(part[0] != full[0]);
}

TEST_CASE("a triplet autoencoder trains on triplet batches (reconstruction of all three + triplet margin)",
          "[torch][autoencoder][triplet]") {
  fs::path dir = scratch_dir("torch-triplet-ae");
  // 256 triplets from the subset: anchor and positive of one class, negative of another.
  auto py = run_python(R"PY(
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1])
x, y = f['image'][:], f['label'][:]
rng = np.random.default_rng(1)
a = rng.integers(0, len(y), 256)
p = np.array([rng.choice(np.flatnonzero(y == y[i])) for i in a])
n = np.array([rng.choice(np.flatnonzero(y != y[i])) for i in a])
with h5py.File(sys.argv[2], 'w') as g:
    g['anchor_image'], g['positive_image'], g['negative_image'] = x[a], x[p], x[n]
    g['id'] = np.arange(256, dtype=np.int64)
)PY",
                       {fashion_h5().string(), (dir / "triplets.h5").string()});
  REQUIRE(py.exit_code == 0);
  std::string yaml =
      "# triplet AE test graph.\nseed: 5\nnodes:\n"
      "  data:  {type: io.hdf5_reader, params: {path: " + (dir / "triplets.h5").string() +
      ", fields: [id, anchor_image, positive_image, negative_image], batch_size: 32}}\n"
      "  train: {type: torch.train, params: {model: {type: torch.conv_ae, channels: [8, 16], latent_dim: 8}, "
      "loss: {type: torch.sum, a: {type: torch.reconstruction}, b: {type: torch.triplet_margin, margin: 1.0}, weights: [1, 0.1]}, "
      "optimizer: {type: torch.adam, lr: 0.01}, epochs: 3, log_every: 1, threads: 2, log_dir: " + (dir / "log").string() +
      "}}\nedges:\n  - data.out -> train.in\n";
  const GraphRun r = GraphRunner(plugins(), yaml, "g.yaml").run();
  INFO(r.out << r.message());
  REQUIRE(r.exit_code == 0);
  std::vector<double> losses = embedflow::test::metrics_losses(dir / "log" / "metrics.csv");
  REQUIRE(losses.size() == 24);
  INFO("loss: first steps " << mean(losses, 0, 8) << ", last epoch " << mean(losses, 16, 24));
  CHECK(mean(losses, 16, 24) < 0.8 * mean(losses, 0, 8));
}
