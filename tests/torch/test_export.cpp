// TorchScript export: torch.train's `export` parameter and `embedflow export` over a checkpoint
// write modules that plain Python (python3-torch) loads with torch.jit.load and that give, on the
// same images, the embeddings torch.embed wrote to HDF5 (to 1e-5, at more than one batch size);
// the metadata (extra file embedflow.json and module attributes) says the input size, channel
// order, mean/std and embedding size. A damaged or missing checkpoint stops the export with an
// error naming the file.
#include <catch2/catch.hpp>

#include <fstream>

#include "cli.hpp"
#include "torch_test_util.hpp"

namespace fs = std::filesystem;
using namespace embedflow::test;

namespace {

const std::string kSmallCnn = "model: {type: torch.small_cnn, channels: [8, 16], hidden: 32, embedding_dim: 16}";

// A training graph over `data` (batches of `batch`) with the given torch.train params.
std::string train_graph(const std::string& data, int batch, const std::string& train_params,
                        const std::string& extra_nodes = "", const std::string& extra_edges = "") {
  return "# torch.train export test graph.\n"
         "seed: 5\n"
         "nodes:\n"
         "  data:  {type: io.hdf5_reader, params: {path: " + data + ", fields: [id, label, image], batch_size: " +
         std::to_string(batch) + ", shuffle: true}}\n"
         "  train: {type: torch.train, params: {" + train_params + "}}\n" + extra_nodes +
         "edges:\n"
         "  - data.out -> train.in\n" + extra_edges;
}

// torch.embed over `images` with the checkpoint (file or folder) into `h5`.
void embed_with_checkpoint(const fs::path& dir, const std::string& name, const std::string& images,
                           const std::string& checkpoint, const std::string& h5) {
  run_graph_file_ok(dir, name + ".yaml",
                    "# embed\nseed: 1\nnodes:\n"
                    "  test:  {type: io.hdf5_reader, params: {path: " + images + ", batch_size: 50}}\n"
                    "  embed: {type: torch.embed, params: {checkpoint: " + checkpoint + ", threads: 2}}\n"
                    "  save:  {type: io.hdf5_writer, params: {path: " + h5 + ", group: embeddings}}\n"
                    "edges: [test.out -> embed.in, embed.out -> save.in]\n");
}

// Python loads the module with torch.jit.load, embeds the images of argv[3] (whole, and in
// batches of 3) and compares with the embeddings torch.embed wrote (argv[2]); checks the metadata
// against argv[4..7]: input size (JSON), embedding size, channel order, L2-normalised or not.
// argv[8], argv[9] (optional): the mean and std (JSON) the module normalises with.
void check_module(const fs::path& module, const std::string& embeddings, const std::string& images,
                  const std::string& input_size, int dim, const std::string& order, bool l2,
                  const std::string& mean = "", const std::string& std_dev = "") {
  check_python(R"PY(
import sys, json, torch, h5py, numpy as np
path, emb, imgs, size, dim, order, l2 = sys.argv[1:8]
files = {'embedflow.json': ''}
m = torch.jit.load(path, _extra_files=files)
meta = json.loads(files['embedflow.json'])
assert meta['format'] == 'embedflow-torchscript/1', meta
assert meta['input_size'] == json.loads(size) == list(m.input_size), (meta['input_size'], m.input_size)
assert meta['embedding_dim'] == int(dim) == m.embedding_dim, (meta['embedding_dim'], m.embedding_dim)
assert meta['channel_order'] == order == m.channel_order, meta['channel_order']
assert meta['value_range'] == [0, 1]
C = meta['input_size'][0]
mean = json.loads(sys.argv[8]) if len(sys.argv) > 8 else [0.0] * C
std = json.loads(sys.argv[9]) if len(sys.argv) > 9 else [1.0] * C
assert meta['mean'] == mean == list(m.mean) and meta['std'] == std == list(m.std), (meta['mean'], meta['std'])
assert meta['spec'] == m.spec and 'type: torch.' in meta['spec'], meta['spec']
with h5py.File(imgs) as f:
    x, ids = torch.from_numpy(f['image'][:]), f['id'][:]
with h5py.File(emb) as f:
    want, got_ids = f['embeddings']['embedding'][:], f['embeddings']['id'][:]
assert (got_ids == ids).all()
if len(sys.argv) > 8:  # torch.embed saw images normalised outside the module
    x = x * torch.tensor(std).view(1, C, 1, 1) + torch.tensor(mean).view(1, C, 1, 1)
m.eval()
with torch.no_grad():
    got = m(x).numpy()
    threes = torch.cat([m(x[i:i + 3]) for i in range(0, len(x), 3)]).numpy()
assert got.shape == want.shape == (len(ids), int(dim)), (got.shape, want.shape)
d = max(np.abs(got - want).max(), np.abs(threes - want).max())
assert d < 1e-5, d
unit = bool(np.abs(np.linalg.norm(got, axis=1) - 1).max() < 1e-4)
assert unit == (l2 == 'true') == meta['normalized'], (unit, l2, meta['normalized'])
print(f'max |module - torch.embed| {d:.3g} over {len(ids)} images')
)PY",
               [&] {
                 std::vector<std::string> a{module.string(), embeddings, images, input_size, std::to_string(dim), order,
                                            l2 ? "true" : "false"};
                 if (!mean.empty()) {
                   a.push_back(mean);
                   a.push_back(std_dev);
                 }
                 return a;
               }());
}

}  // namespace

TEST_CASE("torch.train's export writes the averaged weights as TorchScript that Python runs as torch.embed does",
          "[torch][export][cli]") {
  const fs::path dir = scratch_dir("torch-export-train");
  const fs::path module = dir / "model.ts.pt";
  // Weight averaging: the checkpoint's model (what torch.embed reads) is the average, and so is
  // the exported module.
  run_graph_file_ok(dir, "train.yaml",
                    train_graph(torch_data("train.h5"), 64,
                                kSmallCnn + ", loss: {type: torch.batch_hard_triplet}, max_steps: 4, ema_decay: 0.5, "
                                            "threads: 2, checkpoint_dir: " + (dir / "ckpt").string() +
                                            ", export: " + module.string()));
  REQUIRE(fs::exists(module));
  const std::string h5 = (dir / "embed.h5").string();
  embed_with_checkpoint(dir, "embed", torch_data("test.h5"), (dir / "ckpt").string(), h5);
  check_module(module, h5, torch_data("test.h5"), "[1, 28, 28]", 16, "grey", false);
}

TEST_CASE("torch.train's export with validation writes the best evaluation's weights", "[torch][export][cli]") {
  const fs::path dir = scratch_dir("torch-export-best");
  const fs::path module = dir / "model.ts.pt";
  // Evaluated every 2 of 8 steps on test.h5; best.pt holds the selected weights.
  run_graph_file_ok(
      dir, "train.yaml",
      train_graph(torch_data("train.h5"), 64,
                  kSmallCnn + ", loss: {type: torch.batch_hard_triplet}, optimizer: {type: torch.adam, lr: 0.01}, "
                              "max_steps: 8, validate_every: 2, threads: 2, checkpoint_dir: " + (dir / "ckpt").string() +
                              ", log_dir: " + (dir / "log").string() + ", export: " + module.string(),
                  "  val:   {type: io.hdf5_reader, params: {path: " + torch_data("test.h5") + ", fields: [id, label, image], batch_size: 64}}\n",
                  "  - val.out -> train.validation\n"));
  REQUIRE(fs::exists(dir / "ckpt" / "best.pt"));
  const std::string best = (dir / "best.h5").string(), last = (dir / "last.h5").string();
  embed_with_checkpoint(dir, "best", torch_data("test.h5"), (dir / "ckpt" / "best.pt").string(), best);
  check_module(module, best, torch_data("test.h5"), "[1, 28, 28]", 16, "grey", false);
  // The record of which step was best: the module's step is best.pt's, not always the last one.
  check_python(R"PY(
import sys, json, csv, torch
files = {'embedflow.json': ''}
torch.jit.load(sys.argv[1], _extra_files=files)
step = json.loads(files['embedflow.json'])['step']
rows = list(csv.DictReader(open(sys.argv[2])))
assert step == int(rows[-1]['best_step']), (step, rows)
print('exported step', step, 'of', [int(r['step']) for r in rows])
)PY",
               {module.string(), (dir / "log" / "validation.csv").string()});
}

TEST_CASE("embedflow export: a narrow ResNet's checkpoint as TorchScript, L2-normalised, with normalisation inside",
          "[torch][export][cli]") {
  const fs::path dir = scratch_dir("torch-export-cli");
  // Random RGB 32x32 images (one batch of 8, two epochs), a ResNet-18 of width 4 (no torchvision
  // constructor fits its weights).
  run_graph_file_ok(dir, "train.yaml",
                    train_graph(torch_data("rgb.h5"), 8,
                                "model: {type: torch.resnet18, width: 4, stem: small, embedding_dim: 8, normalize: true}, "
                                "loss: {type: torch.batch_hard_triplet}, epochs: 2, max_steps: 2, threads: 2, checkpoint_dir: " +
                                    (dir / "ckpt").string()));
  const std::string h5 = (dir / "embed.h5").string();
  embed_with_checkpoint(dir, "embed", torch_data("rgb.h5"), (dir / "ckpt").string(), h5);

  // The checkpoint folder (its newest file) and the file itself.
  auto r = run_cli({"export", (dir / "ckpt").string(), "-o", (dir / "resnet.pt").string(), "--threads", "2"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  check_module(dir / "resnet.pt", h5, torch_data("rgb.h5"), "[3, 32, 32]", 8, "RGB", true);
  // With --mean/--std the module normalises its [0,1] input itself: on x * std + mean it gives
  // what the model gives on x.
  r = run_cli({"export", (dir / "ckpt" / "step-00000002.pt").string(), "-o", (dir / "norm.pt").string(), "--mean",
               "0.5,0.25,0.125", "--std", "0.5,2,4", "--quiet"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  check_module(dir / "norm.pt", h5, torch_data("rgb.h5"), "[3, 32, 32]", 8, "RGB", true, "[0.5, 0.25, 0.125]",
               "[0.5, 2.0, 4.0]");
  // Normalisation values that do not fit the images are refused before anything is written.
  r = run_cli({"export", (dir / "ckpt").string(), "-o", (dir / "bad.pt").string(), "--mean", "0.5,0.5", "--std", "1,1"});
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.err, Catch::Contains("mean has 2 values but the images have 3 channels"));
  CHECK_FALSE(fs::exists(dir / "bad.pt"));
  // So is torch.train's export_mean/export_std, at the first batch rather than after training.
  auto t = run_graph_file(dir, "bad_train.yaml",
                          train_graph(torch_data("rgb.h5"), 8,
                                      "model: {type: torch.resnet18, width: 4, stem: small, embedding_dim: 8}, "
                                      "loss: {type: torch.batch_hard_triplet}, max_steps: 1, threads: 2, export: " +
                                          (dir / "bad_train.pt").string() + ", export_mean: [0.5, 0.5], export_std: [1, 1]"));
  CHECK(t.exit_code != 0);
  CHECK_THAT(t.err, Catch::Contains("export mean has 2 values but the images have 3 channels"));
  CHECK_FALSE(fs::exists(dir / "bad_train.pt"));
}

TEST_CASE("embedflow export: a damaged or missing checkpoint is an error naming the file", "[torch][export][cli]") {
  const fs::path dir = scratch_dir("torch-export-damaged");
  run_graph_file_ok(dir, "train.yaml",
                    train_graph(torch_data("train.h5"), 64,
                                kSmallCnn + ", loss: {type: torch.batch_hard_triplet}, max_steps: 1, threads: 2, "
                                            "checkpoint_dir: " + (dir / "ckpt").string()));
  const fs::path good = dir / "ckpt" / "step-00000001.pt", bad = dir / "damaged.pt";
  fs::copy_file(good, bad);
  {
    // One byte in the middle of the file changed: a tensor's bytes no longer match their CRC-32.
    std::fstream f(bad, std::ios::in | std::ios::out | std::ios::binary);
    const auto middle = static_cast<std::streamoff>(fs::file_size(bad) / 2);
    f.seekg(middle);
    char c = 0;
    f.get(c);
    f.seekp(middle);
    f.put(static_cast<char>(c ^ 0x5a));
  }
  auto r = run_cli({"export", bad.string(), "-o", (dir / "out.pt").string()});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("is damaged"));
  CHECK_THAT(r.err, Catch::Contains(bad.string()));
  CHECK_FALSE(fs::exists(dir / "out.pt"));

  r = run_cli({"export", (dir / "missing.pt").string(), "-o", (dir / "out.pt").string()});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains((dir / "missing.pt").string()) && Catch::Contains("does not exist"));
  CHECK_FALSE(fs::exists(dir / "out.pt"));

  // The intact checkpoint exports.
  r = run_cli({"export", good.string(), "-o", (dir / "out.pt").string(), "--quiet"});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(fs::exists(dir / "out.pt"));
}
