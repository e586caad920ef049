// eval.tsne against scikit-learn 1.2 (Debian's python3):
//  - the input affinities P equal sklearn.manifold._t_sne._joint_probabilities on the same points;
//  - on well-separated Gaussian clusters and on a harder case (overlapping clusters in 20-D), the
//    map's trustworthiness (sklearn.manifold.trustworthiness, 10 neighbours) is within 0.02 of
//    TSNE(method="exact") with the same perplexity, its 10-NN label agreement within 0.05 (two
//    local optima of one KL differ that much on 300 overlapping points), and its KL divergence
//    (scikit-learn's own _kl_divergence on its P) at most 10% above sklearn's;
//  - a seeded run repeats bit for bit, with one thread or two; the PNG decodes;
//  - bad parameters and bad inputs fail naming the parameter or field.
#include <catch2/catch.hpp>

#include <opencv2/imgcodecs.hpp>

#include <cmath>
#include <fstream>

#include "cli.hpp"
#include "tsne.hpp"

using namespace embedflow::test;
namespace fs = std::filesystem;

namespace {

// Blobs in `dim` dimensions, written by NumPy as a plain HDF5 file (embedding f32[N,D], label,
// id i64[N]) that io.hdf5_reader streams; the same points go to the oracle.
const char* kMakeData = R"PY(
import sys, numpy as np, h5py
from sklearn.datasets import make_blobs
out = sys.argv[1]
easy, ly = make_blobs(n_samples=300, n_features=10, centers=4, cluster_std=1.0, center_box=(-15, 15), random_state=3)
hard, hy = make_blobs(n_samples=300, n_features=20, centers=5, cluster_std=5.0, center_box=(-5, 5), random_state=4)
for name, x, y in (("easy", easy, ly), ("hard", hard, hy)):
    with h5py.File(f"{out}/{name}.h5", "w") as f:
        f["embedding"] = x.astype(np.float32)
        f["label"] = y.astype(np.int64)
        f["id"] = np.arange(len(y), dtype=np.int64)
)PY";

const char* kOracle = R"PY(
import sys, numpy as np, h5py
from sklearn.manifold import TSNE, trustworthiness
from sklearn.manifold._t_sne import _joint_probabilities, _kl_divergence
from sklearn.neighbors import KNeighborsClassifier
from sklearn.metrics import pairwise_distances
src, mine = sys.argv[1:3]
f = h5py.File(src); x = f["embedding"][:]; y = f["label"][:]
m = h5py.File(mine)["data"]; ours = m["embedding"][:].astype(np.float64)
assert np.array_equal(m["label"][:], y) and np.array_equal(m["id"][:], np.arange(len(y))), "labels or ids reordered"
ref = TSNE(n_components=2, perplexity=30.0, method="exact", init="pca", learning_rate="auto", random_state=0).fit(x)
P = _joint_probabilities(pairwise_distances(x.astype(np.float64), squared=True), 30.0, 0)
def knn_agreement(e):
    return KNeighborsClassifier(n_neighbors=11).fit(e, y).score(e, y)  # each point votes for itself once
kl_ours = _kl_divergence(ours.ravel(), P, 1, len(y), 2)[0]
print("trust", trustworthiness(x, ours, n_neighbors=10), trustworthiness(x, ref.embedding_, n_neighbors=10))
print("knn", knn_agreement(ours), knn_agreement(ref.embedding_))
print("kl", kl_ours, ref.kl_divergence_)
)PY";

std::string tsne_graph(const fs::path& in, const fs::path& out, const std::string& params, const std::string& png = "") {
  std::string g = "seed: 3\nnodes:\n  read: {type: io.hdf5_reader, params: {path: " + in.string() + ", batch_size: 64}}\n"
                  "  tsne: {type: eval.tsne, params: {" + params + "}}\n"
                  "  save: {type: io.hdf5_writer, params: {path: " + out.string() + "}}\n";
  if (!png.empty()) g += "  plot: {type: eval.scatter, params: {out: " + png + ", title: t-SNE, x_label: t-SNE 1, y_label: t-SNE 2}}\n";
  g += "edges: [read.out -> tsne.in, tsne.out -> save.in" + std::string(png.empty() ? "" : ", tsne.out -> plot.in") + "]\n";
  return g;
}

const fs::path& blob_data() {
  static fs::path dir;
  if (dir.empty()) {
    dir = scratch_dir("tsne_data");
    Result r = run_python(kMakeData, {dir.string()});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
  }
  return dir;
}

}  // namespace

TEST_CASE("t-SNE affinities equal scikit-learn's _joint_probabilities") {
  const fs::path dir = scratch_dir("tsne_p");
  // 40 points in 3-D on a fixed pattern (two strands), perplexity 7.
  std::vector<double> x;
  for (int i = 0; i < 40; ++i) x.insert(x.end(), {std::sin(0.4 * i) * (i % 2 ? 3 : 1), 0.1 * i, std::cos(0.7 * i)});
  const auto p = embedflow::evalcore::tsne_joint_probabilities(x, 40, 3, 7.0);
  std::ofstream xs(dir / "x.txt"), ps(dir / "p.txt");
  xs.precision(17);
  ps.precision(17);
  for (std::size_t i = 0; i < x.size(); ++i) xs << x[i] << ((i + 1) % 3 ? ' ' : '\n');
  for (std::size_t i = 0; i < p.size(); ++i) ps << p[i] << ((i + 1) % 40 ? ' ' : '\n');
  xs.close();
  ps.close();
  check_python(R"PY(
import sys, numpy as np
from scipy.spatial.distance import squareform
from sklearn.manifold._t_sne import _joint_probabilities
from sklearn.metrics import pairwise_distances
d = sys.argv[1]
x = np.loadtxt(d + "/x.txt"); p = np.loadtxt(d + "/p.txt")
ref = squareform(_joint_probabilities(pairwise_distances(x, squared=True), 7.0, 0))
err = np.abs(p - ref).max() / ref.max()
print("max relative error", err)
sys.exit(0 if err < 1e-5 and abs(p.sum() - 1) < 1e-9 else 1)
)PY", {dir.string()});
}

TEST_CASE("eval.tsne maps Gaussian clusters as well as scikit-learn's exact TSNE") {
  const fs::path data = blob_data();
  const fs::path dir = scratch_dir("tsne_quality");
  for (const std::string name : {"easy", "hard"}) {
    const fs::path out = dir / (name + "_map.h5");
    run_graph_file_ok(dir, name + ".yaml", tsne_graph(data / (name + ".h5"), out, "perplexity: 30", (dir / (name + ".png")).string()));
    Result py = check_python(kOracle, {(data / (name + ".h5")).string(), out.string()});
    const auto v = parse_tagged(py.out);
    INFO(name << "\n" << py.out);
    REQUIRE(v.count("trust"));
    CHECK(v.at("trust")[0] > v.at("trust")[1] - 0.02);
    CHECK(v.at("knn")[0] > v.at("knn")[1] - 0.05);
    CHECK(v.at("kl")[0] < 1.10 * v.at("kl")[1]);
    if (name == "easy") {
      CHECK(v.at("trust")[0] > 0.95);
      CHECK(v.at("knn")[0] > 0.99);
    }
    const cv::Mat png = cv::imread((dir / (name + ".png")).string());
    CHECK(png.cols >= 800);
    CHECK(png.rows == 640);
  }
}

TEST_CASE("eval.tsne repeats bit for bit for a seed and any thread count") {
  const fs::path data = blob_data();
  const fs::path dir = scratch_dir("tsne_repeat");
  const std::string params = "perplexity: 20, iterations: 300, init: random";
  run_graph_file_ok(dir, "a.yaml", tsne_graph(data / "hard.h5", dir / "a.h5", params));
  run_graph_file_ok(dir, "b.yaml", tsne_graph(data / "hard.h5", dir / "b.h5", params), {"--threads", "2"});
  std::string other = tsne_graph(data / "hard.h5", dir / "c.h5", params);
  other.replace(other.find("seed: 3"), 7, "seed: 4");
  run_graph_file_ok(dir, "c.yaml", other);
  check_python(R"PY(
import sys, h5py, numpy as np
d = sys.argv[1]
a, b, c = (h5py.File(f"{d}/{n}.h5")["data"]["embedding"][:] for n in "abc")
sys.exit(0 if np.array_equal(a, b) and not np.allclose(a, c) and a.shape == (300, 2) else 1)
)PY", {dir.string()});
}

TEST_CASE("eval.tsne subsamples past max_points and refuses bad parameters and inputs") {
  const fs::path data = blob_data();
  const fs::path dir = scratch_dir("tsne_errors");
  run_graph_file_ok(dir, "sub.yaml", tsne_graph(data / "easy.h5", dir / "sub.h5", "perplexity: 10, max_points: 100, iterations: 250"));
  check_python(R"PY(
import sys, h5py, numpy as np
m = h5py.File(sys.argv[1])["data"]
sys.exit(0 if np.array_equal(m["id"][:], np.arange(0, 300, 3)) and m["embedding"].shape == (100, 2) else 1)
)PY", {(dir / "sub.h5").string()});
  // Perplexity must stay below the number of points: a run-time error naming the parameter.
  Result r = run_graph_file(dir, "perp.yaml", tsne_graph(data / "easy.h5", dir / "p.h5", "perplexity: 40, max_points: 30"));
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("eval.tsne") || Catch::Contains("'tsne'"));
  CHECK_THAT(r.err, Catch::Contains("perplexity must be in (0, 30)"));
  // Out-of-range parameters are graph errors (exit 2) naming the parameter.
  r = run_graph_file(dir, "iters.yaml", tsne_graph(data / "easy.h5", dir / "i.h5", "iterations: 100"));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("iterations"));
  r = run_graph_file(dir, "init.yaml", tsne_graph(data / "easy.h5", dir / "i.h5", "init: spectral"));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("init"));
  // A missing field (found at load time when the reader knows its schema) and a field of the
  // wrong kind are errors naming the field.
  r = run_graph_file(dir, "field.yaml", tsne_graph(data / "easy.h5", dir / "f.h5", "field: features"));
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.err, Catch::Contains("features"));
  r = run_graph_file(dir, "kind.yaml", tsne_graph(data / "easy.h5", dir / "k.h5", "field: label"));
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("field 'label' must be f32/f64[B,D]"));
  // Non-finite coordinates are refused, naming the point.
  check_python(R"PY(
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    x = np.random.RandomState(0).randn(20, 3).astype(np.float32); x[7, 1] = np.nan
    f["embedding"] = x
)PY", {(dir / "nan.h5").string()});
  r = run_graph_file(dir, "nan.yaml", tsne_graph(dir / "nan.h5", dir / "n.h5", "perplexity: 5"));
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("point 7 has a non-finite coordinate"));
}
