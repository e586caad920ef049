// Batchers and joins: exact class stratification and coverage (plans and a full Fashion-MNIST
// graph checked by numpy), PK batches, all-pairs labels, pair/triplet joins against the IDX
// images (numpy), and join errors.
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "core/sampling.hpp"
#include "image_test_util.hpp"

using namespace embedflow;
using namespace embedflow::image;
using namespace embedflow::test;
namespace fs = std::filesystem;

namespace {

std::vector<std::int64_t> labels_with_sizes(const std::vector<int>& sizes) {
  std::vector<std::int64_t> labels;
  for (std::size_t c = 0; c < sizes.size(); ++c)
    for (int i = 0; i < sizes[c]; ++i) labels.push_back(static_cast<std::int64_t>(c) * 10);  // labels 0, 10, 20, ...
  // Interleave so rows of a class are not contiguous.
  std::vector<std::int64_t> mixed(labels.size());
  for (std::size_t i = 0; i < labels.size(); ++i) mixed[(i * 7) % labels.size()] = labels[i];
  return mixed;
}

// Maps ClassIndex positions back to rows: ClassIndex built over all rows, so positions are rows.
void check_batch_shape(const std::vector<std::int64_t>& batch, const std::vector<std::int64_t>& labels, int n, int k) {
  REQUIRE(batch.size() == static_cast<std::size_t>(n * k));
  std::set<std::int64_t> classes;
  for (int c = 0; c < n; ++c) {
    const std::int64_t label = labels[static_cast<std::size_t>(batch[static_cast<std::size_t>(c * k)])];
    classes.insert(label);
    for (int i = 0; i < k; ++i) CHECK(labels[static_cast<std::size_t>(batch[static_cast<std::size_t>(c * k + i)])] == label);
  }
  CHECK(classes.size() == static_cast<std::size_t>(n));
}

}  // namespace

TEST_CASE("class_batch_plan: exactly K per class for N classes, every row once per epoch") {
  // 10 classes of 24 (a multiple of K = 4): 60 groups, 12 batches of 5 classes.
  const auto labels = labels_with_sizes(std::vector<int>(10, 24));
  const ClassIndex index = ClassIndex::build(labels);
  ClassBatchOptions o;
  o.classes_per_batch = 5;
  o.per_class = 4;
  std::vector<std::vector<std::int64_t>> epochs[2];
  for (int e = 0; e < 2; ++e) {
    Rng rng(derive_seed(11, static_cast<std::uint64_t>(e)));
    epochs[e] = class_batch_plan(index, o, rng);
    REQUIRE(epochs[e].size() == 12);
    std::vector<int> seen(labels.size(), 0);
    for (const auto& b : epochs[e]) {
      check_batch_shape(b, labels, 5, 4);
      for (auto r : b) ++seen[static_cast<std::size_t>(r)];
    }
    for (int s : seen) CHECK(s == 1);
  }
  CHECK(epochs[0] != epochs[1]);
  Rng again(derive_seed(11, 0));
  CHECK(class_batch_plan(index, o, again) == epochs[0]);
}

TEST_CASE("class_batch_plan: uneven classes pad (every row at least once) or drop (at most once)") {
  const auto labels = labels_with_sizes({9, 13, 4, 2, 11});
  const ClassIndex index = ClassIndex::build(labels);
  ClassBatchOptions o;
  o.classes_per_batch = 3;
  o.per_class = 4;
  Rng rng(5);
  const auto pad = class_batch_plan(index, o, rng);
  std::vector<int> seen(labels.size(), 0);
  std::size_t full = 0;
  for (const auto& b : pad) {
    REQUIRE(b.size() % 4 == 0);
    // Each class block is K rows of one class; blocks are distinct classes.
    std::set<std::int64_t> classes;
    for (std::size_t c = 0; c < b.size() / 4; ++c) {
      const auto label = labels[static_cast<std::size_t>(b[c * 4])];
      CHECK(classes.insert(label).second);
      for (std::size_t i = 0; i < 4; ++i) CHECK(labels[static_cast<std::size_t>(b[c * 4 + i])] == label);
    }
    full += b.size() == 12;
    for (auto r : b) ++seen[static_cast<std::size_t>(r)];
  }
  for (int s : seen) CHECK(s >= 1);
  // Groups: 3 + 4 + 1 + 1 + 3 = 12, so 4 full batches of 3 classes when the most-groups-first
  // rule keeps three classes available to the end.
  CHECK(full == 4);
  CHECK(pad.size() == 4);
  o.incomplete = Incomplete::drop;
  Rng rng2(5);
  std::vector<int> once(labels.size(), 0);
  for (const auto& b : class_batch_plan(index, o, rng2))
    for (auto r : b) ++once[static_cast<std::size_t>(r)];
  for (int s : once) CHECK(s <= 1);
}

TEST_CASE("pk_batch: P distinct classes, K rows each, replacement only for small classes") {
  const auto labels = labels_with_sizes({30, 30, 2, 30, 30, 30});
  const ClassIndex index = ClassIndex::build(labels);
  for (std::uint64_t s = 0; s < 50; ++s) {
    Rng rng(s);
    const auto b = pk_batch(index, 4, 5, rng);
    check_batch_shape(b, labels, 4, 5);
    for (int c = 0; c < 4; ++c) {
      std::set<std::int64_t> rows(b.begin() + c * 5, b.begin() + (c + 1) * 5);
      if (labels[static_cast<std::size_t>(b[static_cast<std::size_t>(c * 5)])] != 20) CHECK(rows.size() == 5);
    }
  }
  Rng rng(1);
  CHECK_THROWS_AS(pk_batch(index, 7, 2, rng), DataError);
}

TEST_CASE("class_batches on Fashion-MNIST classes 0-4: stratified, full coverage per epoch, epochs differ") {
  const fs::path dir = scratch_dir("image_class_batches");
  const std::string out = (dir / "batches.h5").string();
  run_graph_ok("g.yaml", R"(
seed: 4
nodes:
  train:   {type: image.idx_reader, params: {split: train, classes: "0-4", batch_size: -1}}
  batches: {type: image.class_batches, params: {classes_per_batch: 5, per_class: 8, epochs: 2}}
  save:    {type: io.hdf5_writer, params: {path: )" + out + R"(}}
edges: [train.out -> batches.table, batches.out -> save.in]
)", 2);
  run_numpy_oracle(R"PY(
images, labels = fashion("train")
f = h5py.File(sys.argv[1], "r")["data"]
sizes = f["record_sizes"][:]
check(len(sizes) == 1500 and (sizes == 40).all(), "batch sizes", len(sizes))
ids, lab, ep, img = f["id"][:], f["label"][:], f["epoch"][:], f["image"]
check(np.array_equal(lab, labels[ids]), "labels do not match ids")
check(np.array_equal(img[::997, :, :, 0], images[ids[::997]]), "images do not match ids")
for e in range(2):
    rows = slice(e * 30000, (e + 1) * 30000)
    check((ep[rows] == e).all(), "epoch field", e)
    check(sorted(ids[rows].tolist()) == np.nonzero(labels < 5)[0].tolist(), "coverage", e)
    b = lab[rows].reshape(750, 5, 8)
    check((b == b[:, :, :1]).all(), "8 consecutive rows per class")
    check((np.sort(b[:, :, 0], axis=1) == np.arange(5)).all(), "5 distinct classes per batch")
check(not np.array_equal(ids[:30000], ids[30000:]), "epochs in the same order")
print("ok")
)PY", {out});
  // The same seed gives the same batches; the table port rejects a per-record stream.
  GraphRun bad = run_graph("bad.yaml", R"(
nodes:
  train:   {type: image.idx_reader, params: {split: test, limit: 10}}
  batches: {type: image.class_batches}
  count:   {type: core.sink, params: {mode: count}}
edges: [train.out -> batches.table, batches.out -> count.in]
)");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.error, Catch::Contains("table field 'id' is a scalar") && Catch::Contains("batch_size: -1"));
  GraphRun few = run_graph("few.yaml", R"(
nodes:
  train:   {type: image.idx_reader, params: {split: test, classes: "0-2", batch_size: -1}}
  batches: {type: image.class_batches, params: {classes_per_batch: 4}}
  count:   {type: core.sink, params: {mode: count}}
edges: [train.out -> batches.table, batches.out -> count.in]
)");
  CHECK(few.exit_code == 1);
  CHECK_THAT(few.error, Catch::Contains("the table has 3 classes but classes_per_batch is 4"));
}

TEST_CASE("pk_batches and batch_pairs through a graph") {
  const fs::path dir = scratch_dir("image_pk");
  const std::string pk = (dir / "pk.h5").string(), pairs = (dir / "pairs.h5").string(), matrix = (dir / "matrix.h5").string();
  run_graph_ok("g.yaml", R"(
seed: 9
nodes:
  test:   {type: image.idx_reader, params: {split: test, batch_size: -1}}
  pk:     {type: image.pk_batches, params: {p: 4, k: 6, batches_per_epoch: 20, epochs: 2}}
  save:   {type: io.hdf5_writer, params: {path: )" + pk + R"(}}
  list:   {type: image.batch_pairs, params: {mode: list, images: true}}
  slist:  {type: io.hdf5_writer, params: {path: )" + pairs + R"(}}
  matrix: {type: image.batch_pairs}
  smat:   {type: io.hdf5_writer, params: {path: )" + matrix + R"(}}
edges: [test.out -> pk.table, pk.out -> save.in, pk.out -> list.in, list.out -> slist.in, pk.out -> matrix.in, matrix.out -> smat.in]
)", 2);
  run_numpy_oracle(R"PY(
images, labels = fashion("test")
f = h5py.File(sys.argv[1], "r")["data"]
check(len(f["record_sizes"]) == 40 and (f["record_sizes"][:] == 24).all(), "40 batches of 24")
lab = f["label"][:].reshape(40, 4, 6)
check((lab == lab[:, :, :1]).all(), "6 per class")
check(all(len(set(b[:, 0])) == 4 for b in lab), "4 distinct classes")
check(all(len(set(row)) == 6 for row in f["id"][:].reshape(160, 6)), "no repeats within a class")
check((f["epoch"][:] == np.repeat([0, 1], 480)).all(), "epochs")
ids = f["id"][:].reshape(40, 24)
p = h5py.File(sys.argv[2], "r")["data"]
check((p["record_sizes"][:] == 276).all(), "24*23/2 pairs per batch")
a, b = p["a_index"][:].reshape(40, 276), p["b_index"][:].reshape(40, 276)
pl = p["pair_label"][:].reshape(40, 276)
for k in range(40):
    l = lab.reshape(40, 24)[k]
    check((a[k] < b[k]).all(), "i < j")
    check(np.array_equal(pl[k], (l[a[k]] == l[b[k]]).astype(np.float32)), "pair labels", k)
    check(np.array_equal(p["a_id"][k * 276:(k + 1) * 276], ids[k][a[k]]), "a ids")
check(np.array_equal(p["b_image"][:50, :, :, 0], images[p["b_id"][:50]]), "pair images")
check(int(pl.sum()) == 40 * 4 * 15, "positive pairs: 4 classes x C(6,2)")
m = h5py.File(sys.argv[3], "r")["data"]["pair_labels"][:]
check(m.shape == (960, 24), m.shape)
l0 = lab.reshape(40, 24)[0]
check(np.array_equal(m[:24], (l0[:, None] == l0[None, :]).astype(np.float32)), "matrix")
print("ok")
)PY", {pk, pairs, matrix});
}

TEST_CASE("pair_join and triplet_join join geo-style id streams with images; unknown ids name the id") {
  const fs::path dir = scratch_dir("image_join");
  const std::string pairs = (dir / "pairs.h5").string(), trips = (dir / "trips.h5").string();
  Result gen = run_python(R"PY(
import sys, h5py, numpy as np
rng = np.random.default_rng(3)
n = 1000
with h5py.File(sys.argv[1], "w") as f:
    f["anchor"] = rng.integers(0, 10000, n); f["other"] = rng.integers(0, 10000, n)
    f["label"] = rng.integers(0, 2, n); f["distance_m"] = rng.random(n) * 5000
with h5py.File(sys.argv[2], "w") as f:
    for k in ("anchor", "positive", "negative"): f[k] = rng.integers(0, 10000, n)
    f["positive_m"] = rng.random(n); f["negative_m"] = rng.random(n) * 3000
    f["weight"] = rng.random(n).astype(np.float32)  # any other field passes through
with h5py.File(sys.argv[3], "w") as f:
    f["anchor"] = np.array([5, 10001]); f["other"] = np.array([1, 2]); f["label"] = np.array([1, 0])
)PY", {pairs, trips, (dir / "unknown.h5").string()});
  REQUIRE(gen.exit_code == 0);
  const std::string pout = (dir / "pout.h5").string(), tout = (dir / "tout.h5").string();
  run_graph_ok("g.yaml", R"(
nodes:
  images: {type: image.idx_reader, params: {split: test, batch_size: -1}}
  tensor: {type: image.to_tensor}
  pairs:  {type: io.hdf5_reader, params: {path: )" + pairs + R"(, batch_size: 64}}
  trips:  {type: io.hdf5_reader, params: {path: )" + trips + R"(, batch_size: 64}}
  pjoin:  {type: image.pair_join}
  tjoin:  {type: image.triplet_join}
  psave:  {type: io.hdf5_writer, params: {path: )" + pout + R"(}}
  tsave:  {type: io.hdf5_writer, params: {path: )" + tout + R"(}}
edges: [images.out -> tensor.in, tensor.out -> pjoin.table, tensor.out -> tjoin.table, pairs.out -> pjoin.pairs,
        trips.out -> tjoin.triplets, pjoin.out -> psave.in, tjoin.out -> tsave.in]
)", 2);
  run_numpy_oracle(R"PY(
images, labels = fashion("test")
src = h5py.File(sys.argv[1], "r"); out = h5py.File(sys.argv[2], "r")["data"]
check(out["a_image"].dtype == np.float32 and out["a_image"].shape == (1000, 1, 28, 28), out["a_image"].shape)
check(np.array_equal(out["a_id"][:], src["anchor"][:]) and np.array_equal(out["b_id"][:], src["other"][:]), "ids")
check(np.allclose(out["a_image"][:, 0], images[src["anchor"][:]] / 255.0, atol=1e-7), "a images")
check(np.allclose(out["b_image"][:, 0], images[src["other"][:]] / 255.0, atol=1e-7), "b images")
check(out["pair_label"].dtype == np.float32 and np.array_equal(out["pair_label"][:], src["label"][:]), "pair_label")
check(np.array_equal(out["distance_m"][:], src["distance_m"][:]), "distance_m")
check(np.array_equal(out["a_label"][:], labels[src["anchor"][:]]), "a_label")
check(list(out["record_sizes"][:]) == [64] * 15 + [40], "batches")
ts = h5py.File(sys.argv[3], "r"); to = h5py.File(sys.argv[4], "r")["data"]
for k in ("anchor", "positive", "negative"):
    check(np.array_equal(to[k + "_id"][:], ts[k][:]), k)
    check(np.allclose(to[k + "_image"][:, 0], images[ts[k][:]] / 255.0, atol=1e-7), k + " images")
check(np.array_equal(to["negative_m"][:], ts["negative_m"][:]), "negative_m")
check(to["weight"].dtype == np.float32 and np.array_equal(to["weight"][:], ts["weight"][:]), "weight")
print("ok")
)PY", {pairs, pout, trips, tout});

  GraphRun unknown = run_graph("unknown.yaml", R"(
nodes:
  images: {type: image.idx_reader, params: {split: test, batch_size: -1}}
  pairs:  {type: io.hdf5_reader, params: {path: )" + (dir / "unknown.h5").string() + R"(, batch_size: 2}}
  join:   {type: image.pair_join}
  count:  {type: core.sink, params: {mode: count}}
edges: [images.out -> join.table, pairs.out -> join.pairs, join.out -> count.in]
)");
  CHECK(unknown.exit_code == 1);
  CHECK_THAT(unknown.error, Catch::Contains("node 'join'") && Catch::Contains("anchor id 10001 is not in the image table (10000 images, ids 0..9999)"));
  // Duplicate ids in the table (a reader running two epochs into a collect) are refused.
  GraphRun dup = run_graph("dup.yaml", R"(
nodes:
  images: {type: image.idx_reader, params: {split: test, limit: 5, epochs: 2}}
  table:  {type: image.collect}
  pairs:  {type: io.hdf5_reader, params: {path: )" + (dir / "unknown.h5").string() + R"(, batch_size: 2}}
  join:   {type: image.pair_join}
  count:  {type: core.sink, params: {mode: count}}
edges: [images.out -> table.in, table.out -> join.table, pairs.out -> join.pairs, join.out -> count.in]
)");
  CHECK(dup.exit_code == 1);
  CHECK_THAT(dup.error, Catch::Contains("id 0 appears twice in the image table"));
}
