// The seed's combination variants on rendered photos (gen_photos JPEGs decoded by PIL): which
// parameters T_c^1, T_c^2, T_c^3 and T_b hand their optimizer, observed from outside. Each run
// takes two SGD steps with weight decay and writes a checkpoint after each; weight decay moves
// every parameter the optimizer owns even where its gradient is zero, so the parameters that
// differ between the two checkpoints are the optimizer's list, and their element count must be
// the count the trainer logs ("model: N trainable parameters", the size of that list). And a
// torchvision ResNet-50 (random weights, torch.jit.trace) runs as I through torch.torchscript
// inside T_c^1: the trained model's embedding starts with PyTorch's ResNet-50 features.
#include <catch2/catch.hpp>

#include <regex>

#include "cli.hpp"

namespace fs = std::filesystem;
using namespace embedflow::test;

namespace {

// photos.h5: 64 rendered landmark photos (gen_photos, 64x48 JPEGs) as f32 [N,3,48,64] in [0,1],
// labelled with their scene from the landmark split; ids are the photo ids.
const fs::path& photo_dir() {
  static const fs::path dir = [] {
    fs::path d = scratch_dir("torch-photo-models");
    const auto g = run_process({GEN_PHOTOS, "--rows", "800", "--seed", "4", "--out", (d / "meta.csv").string(), "--images",
                                (d / "img").string(), "--image-size", "64", "--split", (d / "split.csv").string()});
    if (g.exit_code != 0) throw std::runtime_error("gen_photos failed: " + g.err);
    auto r = run_python(R"PY(
import csv, sys, collections, numpy as np, h5py
from PIL import Image
d = sys.argv[1]
rows = list(csv.DictReader(open(d + '/split.csv')))
by_label = collections.defaultdict(list)
for r in rows:
    by_label[int(r['label'])].append(int(r['id']))
ids, labels = [], []
for label, members in sorted(by_label.items(), key=lambda e: -len(e[1])):
    take = members[:8]
    if len(take) < 4: continue
    ids += take; labels += [label] * len(take)
    if len(ids) >= 64: break
ids, labels = ids[:64], labels[:64]
images = np.stack([np.asarray(Image.open(f'{d}/img/{i}.jpg').convert('RGB'), np.float32) / 255 for i in ids])
assert images.shape[1:] == (48, 64, 3), images.shape
with h5py.File(d + '/photos.h5', 'w') as f:
    f['image'] = images.transpose(0, 3, 1, 2).copy()
    f['label'] = np.array(labels, np.int64)
    f['id'] = np.array(ids, np.int64)
)PY",
                        {d.string()});
    if (r.exit_code != 0) throw std::runtime_error("decoding the photos failed: " + r.err);
    return d;
  }();
  return dir;
}

// Two SGD steps (weight decay on) of `model` with batch-hard triplets on photos.h5, a
// checkpoint after each; returns the logged trainable-parameter count.
std::string train_two_steps(const fs::path& dir, const std::string& name, const std::string& model) {
  const std::string g = "# Two steps of " + name + ".\nseed: 5\nnodes:\n"
                        "  data:  {type: io.hdf5_reader, params: {path: " + (photo_dir() / "photos.h5").string() +
                        ", fields: [id, label, image], batch_size: 32}}\n"
                        "  train: {type: torch.train, params: {model: " + model + ", loss: {type: torch.batch_hard_triplet}, "
                        "optimizer: {type: torch.sgd, lr: 0.05, weight_decay: 0.01}, max_steps: 2, threads: 2, "
                        "checkpoint_dir: " + (dir / name).string() + ", checkpoint_every: 1, keep_checkpoints: 0}}\n"
                        "edges: [data.out -> train.in]\n";
  write_file(dir / (name + ".yaml"), g);
  auto r = run_cli({"run", (dir / (name + ".yaml")).string()});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  std::smatch m;
  REQUIRE(std::regex_search(r.err, m, std::regex("model: ([0-9]+) trainable parameters")));
  return m[1];
}

// Python: the state of a checkpoint by name, and which parameters two checkpoints disagree on.
const char* kStatePy = R"PY(
import sys, torch
BUFFERS = ('running_mean', 'running_var', 'num_batches_tracked')
def state(path):
    c = torch.jit.load(path)
    return {n: getattr(c.model, f't{i}') for i, n in enumerate(c.model.names.split('\n')[:-1])}
def is_param(name):
    return not name.endswith(BUFFERS)
def changed(a, b):
    assert set(a) == set(b)
    return {k for k in a if not torch.equal(a[k], b[k])}
def check(d, name, logged, trained_prefixes, frozen_prefixes, expect_prefixes):
    s1, s2 = state(f'{d}/{name}/step-00000001.pt'), state(f'{d}/{name}/step-00000002.pt')
    prefixes = {k.split('.')[0] for k in s1}
    assert prefixes == set(expect_prefixes), (name, sorted(prefixes))
    params = {k for k in s1 if is_param(k)}
    trainable = {k for k in params if k.startswith(tuple(trained_prefixes))}
    moved = changed(s1, s2)
    assert trainable, name
    assert moved & params == trainable, (name, sorted((moved & params) ^ trainable)[:8])
    count = sum(s1[k].numel() for k in trainable)
    assert count == int(logged), (name, count, logged)
    frozen = {k for k in s1 if k.startswith(tuple(frozen_prefixes))}
    assert not (moved & frozen), (name, 'frozen state moved', sorted(moved & frozen)[:8])
    # a trained part in train mode updates its batch-norm statistics; a frozen one never does
    assert any(k.endswith('running_mean') for k in moved) or not any(k.endswith('running_mean') for k in s1 if k.startswith(tuple(trained_prefixes)))
    print(name, 'trains', len(trainable), 'tensors,', count, 'parameters; frozen', len(frozen))
    return s2
)PY";

const std::string kNarrow = "{type: torch.resnet18, width: 4, stem: small, embedding_dim: 8}";

}  // namespace

TEST_CASE("T_c^1, T_c^2, T_c^3 and T_b train exactly the parameters they should", "[torch][photos][concat][blend]") {
  fs::path dir = scratch_dir("torch-photo-variants");
  const std::string tc1 = train_two_steps(dir, "tc1", "{type: torch.concat, mode: frozen_backbone, backbone: " + kNarrow +
                                                          ", branch: " + kNarrow + "}");
  const std::string tc2 = train_two_steps(dir, "tc2", "{type: torch.concat, mode: both, backbone: " + kNarrow + ", branch: " + kNarrow + "}");
  const std::string tc3 = train_two_steps(dir, "tc3", "{type: torch.concat, mode: branch_only, branch: " + kNarrow + "}");
  // T_b: a head over T_c^1's trained model, loaded from its last checkpoint.
  const std::string tb = train_two_steps(
      dir, "tb", "{type: torch.blend, head: {type: torch.mlp, hidden: [16], embedding_dim: 4}, backbone: {type: torch.concat, "
                 "mode: frozen_backbone, weights: " + (dir / "tc1" / "step-00000002.pt").string() + ", backbone: " + kNarrow +
                 ", branch: " + kNarrow + "}}");
  // The counts differ as the parts do: T_c^2 trains I and V, T_c^1 and T_c^3 the same V.
  CHECK(std::stol(tc2) > std::stol(tc1));
  CHECK(tc1 == tc3);
  check_python(std::string(kStatePy) + R"PY(
d, tc1, tc2, tc3, tb = sys.argv[1:6]
check(d, 'tc1', tc1, ['branch.'], ['backbone.'], ['backbone', 'branch'])
check(d, 'tc2', tc2, ['backbone.', 'branch.'], [], ['backbone', 'branch'])
check(d, 'tc3', tc3, ['branch.'], [], ['branch'])
blend = check(d, 'tb', tb, ['head.'], ['backbone.'], ['backbone', 'head'])
# T_b's frozen model is T_c^1's trained one, unchanged.
first = state(f'{d}/tc1/step-00000002.pt')
for k, v in first.items():
    assert torch.equal(blend['backbone.' + k], v), k
print('ok')
)PY",
               {dir.string(), tc1, tc2, tc3, tb});
}

TEST_CASE("a torchvision ResNet-50 traced in Python runs as I in T_c^1 and embeds as in PyTorch", "[torch][photos][torchscript]") {
  fs::path dir = scratch_dir("torch-photo-resnet50");
  const std::string pt = (dir / "resnet50.pt").string();
  // What a user does with their ImageNet weights (here random ones): drop the classifier, trace.
  auto made = run_python(R"PY(
import sys, torch, torchvision
torch.manual_seed(0)
m = torchvision.models.resnet50(weights=None)
m.fc = torch.nn.Identity()
m.eval()
torch.jit.trace(m, torch.rand(2, 3, 48, 64)).save(sys.argv[1])
)PY",
                         {pt});
  INFO(made.err);
  REQUIRE(made.exit_code == 0);
  const std::string logged =
      train_two_steps(dir, "tc1", "{type: torch.concat, mode: frozen_backbone, backbone: {type: torch.torchscript, path: " + pt +
                                      "}, branch: " + kNarrow + "}");
  const std::string emb = (dir / "emb.h5").string();
  write_file(dir / "embed.yaml", "# Embeds the photos with the trained T_c^1 model.\nseed: 5\nnodes:\n"
                                 "  data:  {type: io.hdf5_reader, params: {path: " + (photo_dir() / "photos.h5").string() +
                                     ", fields: [id, label, image], batch_size: 16}}\n"
                                 "  embed: {type: torch.embed, params: {checkpoint: " + (dir / "tc1").string() + ", threads: 2}}\n"
                                 "  save:  {type: io.hdf5_writer, params: {path: " + emb + ", group: emb}}\n"
                                 "edges: [data.out -> embed.in, embed.out -> save.in]\n");
  auto e = run_cli({"run", (dir / "embed.yaml").string(), "--quiet"});
  INFO(e.err);
  REQUIRE(e.exit_code == 0);
  check_python(std::string(kStatePy) + R"PY(
import h5py, numpy as np
d, pt, photos, emb, logged = sys.argv[1:6]
s2 = check(d, 'tc1', logged, ['branch.'], ['backbone.'], ['backbone', 'branch'])
original = torch.jit.load(pt)
want_state = dict(list(original.named_parameters()) + list(original.named_buffers()))
assert len(want_state) == 318, len(want_state)   # ResNet-50 without fc: 159 parameters, 159 buffers
for k, v in want_state.items():
    assert torch.equal(s2['backbone.' + k], v), k
with h5py.File(photos) as f:
    x, ids = torch.from_numpy(f['image'][:]), f['id'][:]
with h5py.File(emb) as f:
    got, got_ids = f['emb']['embedding'][:], f['emb']['id'][:]
assert (got_ids == ids).all()
assert got.shape == (len(ids), 2048 + 8), got.shape
with torch.no_grad():
    want = original(x).numpy()
err = np.abs(got[:, :2048] - want).max() / np.abs(want).max()
assert err < 1e-4, err
print('ok', err, np.abs(want).max())
)PY",
               {dir.string(), pt, (photo_dir() / "photos.h5").string(), emb, logged});
}
