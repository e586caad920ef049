// eval.neighbour_average (database-side augmentation) in whole graphs run in process: the output equals an
// independent NumPy computation (centre, normalise, mean with the k nearest cosine neighbours,
// normalise), other fields and the record order pass through, k = 0 only centres and normalises,
// and a stream without embeddings is an error naming the field.
#include <catch2/catch.hpp>

#include "harness.hpp"

using namespace embedflow::test;
namespace fs = std::filesystem;

TEST_CASE("eval.neighbour_average equals NumPy's centre + kNN mean; fields pass through", "[eval][neighbour_average]") {
  const fs::path dir = scratch_dir("eval_neighbour_average");
  const std::string in = (dir / "in.h5").string();
  Result made = run_python(R"PY(
import sys, numpy as np, h5py
rng = np.random.default_rng(3)
labels = np.repeat(np.arange(4), 40)
x = np.abs(rng.normal(size=(4, 6))[labels] + 0.7 * rng.normal(size=(160, 6))).astype(np.float32)  # non-negative, like ReLU features
with h5py.File(sys.argv[1], "w") as f:
    f["embedding"], f["label"] = x, labels.astype(np.int64)
    f["id"] = np.arange(1000, 1160, dtype=np.int64)
)PY", {in});
  INFO(made.err);
  REQUIRE(made.exit_code == 0);
  auto graph = [&](const std::string& name, const std::string& params) {
    return GraphRunner(plugins(), "seed: 1\nnodes:\n"
                       "  data: {type: io.hdf5_reader, params: {path: " + in + ", batch_size: 32}}\n"
                       "  dba:  {type: eval.neighbour_average, params: " + params + "}\n"
                       "  save: {type: io.hdf5_writer, params: {path: " + (dir / (name + ".h5")).string() + "}}\n"
                       "edges: [data.out -> dba.in, dba.out -> save.in]\n",
                       name + ".yaml")
        .run();
  };
  for (const auto& [name, params] : std::vector<std::pair<std::string, std::string>>{
           {"k4", "{k: 4, center: true}"}, {"k0", "{k: 0, center: true}"}, {"raw", "{k: 3, center: false}"}}) {
    GraphRun r = graph(name, params);
    INFO(name << ": " << r.message());
    REQUIRE(r.exit_code == 0);
  }
  check_python(R"PY(
import sys, numpy as np, h5py
d = sys.argv[1]
with h5py.File(f"{d}/in.h5") as f:
    x, y, ids = f["embedding"][()].astype(np.float64), f["label"][()], f["id"][()]
def dba(x, k, center):
    if center: x = x - x.mean(0)
    u = x / np.linalg.norm(x, axis=1, keepdims=True)
    if k == 0: return u
    s = u @ u.T
    np.fill_diagonal(s, -np.inf)
    nn = np.argsort(-s, axis=1, kind="stable")[:, :k]
    v = u + u[nn].sum(1)
    return v / np.linalg.norm(v, axis=1, keepdims=True)
for name, k, center in (("k4", 4, True), ("k0", 0, True), ("raw", 3, False)):
    o = h5py.File(f"{d}/{name}.h5")["data"]
    got = o["embedding"][()]
    assert got.shape == x.shape and got.dtype == np.float32, (name, got.shape, got.dtype)
    want = dba(x, k, center)
    err = np.abs(got - want).max()
    assert err < 1e-5, (name, err)
    assert np.array_equal(o["label"][()], y) and np.array_equal(o["id"][()], ids), name
    assert list(o["record_sizes"][()]) == [32] * 5, (name, o["record_sizes"][()])
# The averaging changes something (k = 4 differs from plain normalisation) and pulls items towards
# their class: the nearest neighbour's label agrees at least as often.
a, b = (h5py.File(f"{d}/{n}.h5")["data"]["embedding"][()] for n in ("k4", "k0"))
assert np.abs(a - b).max() > 0.05
def nn_agree(e):
    s = e @ e.T; np.fill_diagonal(s, -np.inf); return np.mean(y[s.argmax(1)] == y)
assert nn_agree(a) >= nn_agree(b), (nn_agree(a), nn_agree(b))
print("ok")
)PY", {dir.string()});
  // A stream without embeddings names the missing field.
  GraphRun bad = GraphRunner(plugins(), "seed: 1\nnodes:\n  data: {type: core.range, params: {count: 10, batch_size: 5}}\n"
                             "  dba:  {type: eval.neighbour_average}\n  sink: {type: core.sink}\n"
                             "edges: [data.out -> dba.in, dba.out -> sink.in]\n",
                             "bad.yaml")
                     .run();
  CHECK(bad.exit_code != 0);
  CHECK_THAT(bad.message(), Catch::Contains("embedding"));
}
