// Helpers the torch tests share: the Fashion-MNIST subsets they train on, component specs
// written as in YAML, and torch.train's metrics.csv read back.
#pragma once

#include <catch2/catch.hpp>

#include <embedflow/embedflow.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <stdexcept>
#include <vector>

#include "cli.hpp"

namespace embedflow::test {

// Fashion-MNIST subsets that h5py writes from Debian's IDX files, made once per test process.
// train.h5: the first 512 training images (f32 [N,1,28,28] in [0,1]), labels and ids;
// test.h5: the first 128 test images (test_u8.h5: the same as u8 [N,28,28,1]); nan.h5: train.h5's
// first 256 rows with one NaN pixel in row 200; rgb.h5: 8 random f32 [3,32,32] images.
inline const std::filesystem::path& torch_data_dir() {
  static const std::filesystem::path dir = [] {
    std::filesystem::path d = scratch_dir("torch-data");
    auto r = run_python(R"PY(
import gzip, sys, numpy as np, h5py
src = '/usr/share/datasets/fashion-mnist/'
def read(name, offset):
    with gzip.open(src + name) as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)
def write(path, images, labels, first_id=0):
    with h5py.File(path, 'w') as f:
        f['image'] = images
        f['label'] = labels.astype(np.int64)
        f['id'] = np.arange(first_id, first_id + len(labels), dtype=np.int64)
train = read('train-images-idx3-ubyte.gz', 16).reshape(-1, 1, 28, 28)[:512].astype(np.float32) / 255
train_labels = read('train-labels-idx1-ubyte.gz', 8)[:512]
test = read('t10k-images-idx3-ubyte.gz', 16).reshape(-1, 1, 28, 28)[:128].astype(np.float32) / 255
test_labels = read('t10k-labels-idx1-ubyte.gz', 8)[:128]
out = sys.argv[1]
write(out + '/train.h5', train, train_labels)
write(out + '/test.h5', test, test_labels, 100000)
# The same test images as an image reader emits them: u8 [N,H,W,C].
raw = read('t10k-images-idx3-ubyte.gz', 16).reshape(-1, 28, 28, 1)[:128]
write(out + '/test_u8.h5', raw, test_labels, 100000)
assert (raw.astype(np.float32) / 255 == test[:, 0, :, :, None]).all()
# Random 3-channel 32x32 images for the ResNets.
rng = np.random.default_rng(0)
write(out + '/rgb.h5', rng.random((8, 3, 32, 32), dtype=np.float32), np.array([0, 0, 1, 1, 2, 2, 3, 3]))
# Pairs of training images (same class or not) for data-parallel training with a per-pair loss.
pick = np.random.default_rng(1).integers(0, 512, (2, 512))
with h5py.File(out + '/pairs.h5', 'w') as f:
    f['a_image'], f['b_image'] = train[pick[0]], train[pick[1]]
    f['pair_label'] = (train_labels[pick[0]] == train_labels[pick[1]]).astype(np.float32)
    f['a_id'], f['b_id'] = pick[0].astype(np.int64), pick[1].astype(np.int64)
bad = train[:256].copy()
bad[200, 0, 5, 5] = np.nan
write(out + '/nan.h5', bad, train_labels[:256])
)PY",
                        {d.string()});
    if (r.exit_code != 0) throw std::runtime_error("making the Fashion-MNIST subsets failed: " + r.err);
    return d;
  }();
  return dir;
}

// The path of one of those files, e.g. torch_data("train.h5").
inline std::string torch_data(const std::string& name) { return (torch_data_dir() / name).string(); }

// {type: <type>, <params...>}, as a graph file writes a component.
inline Value spec(const std::string& type, Value::Map params = {}) {
  Value::Map m{{"type", Value::string(type)}};
  for (auto& p : params) m.push_back(std::move(p));
  return Value::map(std::move(m));
}
inline Value num(double d) { return Value::number(d); }
inline Value str(const char* s) { return Value::string(s); }

// One row of torch.train's metrics.csv, as written (text, so tests can compare digits).
struct MetricsRow {
  std::string step, epoch, loss, lr;
};

inline std::vector<MetricsRow> read_metrics(const std::filesystem::path& csv) {
  std::ifstream in(csv);
  INFO("reading " << csv);
  std::string line;
  std::getline(in, line);
  REQUIRE(line == "step,epoch,loss,lr,samples_per_s");
  std::vector<MetricsRow> rows;
  while (std::getline(in, line)) {
    std::istringstream s(line);
    MetricsRow r;
    std::getline(s, r.step, ',');
    std::getline(s, r.epoch, ',');
    std::getline(s, r.loss, ',');
    std::getline(s, r.lr, ',');
    rows.push_back(r);
  }
  return rows;
}

// The loss column of a metrics.csv, as numbers.
inline std::vector<double> metrics_losses(const std::filesystem::path& csv) {
  std::vector<double> losses;
  for (const auto& r : read_metrics(csv)) losses.push_back(std::stod(r.loss));
  return losses;
}

}  // namespace embedflow::test
