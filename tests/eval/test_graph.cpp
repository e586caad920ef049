// Graph-level tests of the eval and metric families through the CLI: graphs/reid_metric_learning.yaml
// on features from gen_reid_features (every method's row in one table, baselines and Mahalanobis
// rows recomputed by an independent NumPy pass, learned metrics ahead of Euclidean kNN, PNGs
// that decode), each node file's example graph run as pasted, and the error paths a user meets
// (ill-typed parameters, missing files, mismatched dims, bad data) with messages naming the node.
#include <catch2/catch.hpp>

#include <opencv2/imgcodecs.hpp>

#include "cli.hpp"

using namespace embedflow::test;
namespace fs = std::filesystem;

namespace {

// A small data set shaped like the default one (128-d, same generator settings): 100 training,
// 20 validation and 100 test identities, plus judgement CSVs for the triplet and pair examples.
fs::path reid_data_dir() {
  static fs::path dir;
  if (dir.empty()) {
    dir = scratch_dir("eval_reid_graph");
    fs::create_directories(dir / "data");
    const Result r = run_process({GEN_REID_FEATURES, "--out", (dir / "data/reid_128.h5").string(), "--dim", "128",
                                  "--identities", "100", "--val-identities", "20", "--test-identities", "100",
                                  "--triplets", (dir / "data/triplets.csv").string(), "--pairs",
                                  (dir / "data/test_pairs.csv").string(), "--val-pairs", (dir / "data/val_pairs.csv").string(),
                                  "--judgements", "500"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
  }
  return dir;
}

const std::vector<std::string> kMethods = {"kNN Euclidean",    "kNN Manhattan",   "kNN cosine",
                                           "k-means (k=2) + kNN", "chi-square kernel", "Gaussian kernel",
                                           "Laplacian kernel", "Mahalanobis",     "Mahalanobis (within-class)",
                                           "LMNN",             "SGD pairwise",    "SGD triplet"};

// Independent pass over the HDF5 file: every baseline row and both Mahalanobis rows recomputed
// with NumPy (full distance matrices in float64, the torchreid rule: drop gallery items of the
// query's identity AND camera, rank by a stable argsort), then the table's invariants.
const char* kCheckTable = R"PY(
import json, sys
import numpy as np, h5py
h5, table_json = sys.argv[1:3]
expected_methods = sys.argv[3:]
f = h5py.File(h5, "r")
def split(s):
    return f[s]["embedding"][()].astype(np.float64), f[s]["label"][()], f[s]["camera"][()]
Xt, lt, ct = split("train"); Xq, lq, cq = split("query"); Xg, lg, cg = split("gallery")

def scores(D):
    r1, r10, aps = [], [], []
    for i in range(len(D)):
        keep = ~((lg == lq[i]) & (cg == cq[i]))
        order = np.argsort(D[i][keep], kind="stable")
        match = (lg[keep] == lq[i])[order]
        hits = np.nonzero(match)[0] + 1
        r1.append(hits[0] <= 1); r10.append(hits[0] <= 10)
        aps.append(np.mean(np.arange(1, len(hits) + 1) / hits))
    return np.mean(r1), np.mean(r10), np.mean(aps)

def sq(Q, G): return np.stack([((q - G) ** 2).sum(1) for q in Q])
l1 = np.stack([np.abs(q - Xg).sum(1) for q in Xq])
chi2 = np.stack([((q - Xg) ** 2 / (q + Xg)).sum(1) for q in Xq])  # softplus features: q + g > 0
def inverse_sqrt(C):
    w, V = np.linalg.eigh(C)
    return V / np.sqrt(w)
within = np.zeros((Xt.shape[1],) * 2)
for l in np.unique(lt):
    Z = Xt[lt == l] - Xt[lt == l].mean(0)
    within += Z.T @ Z
within /= len(Xt) - len(np.unique(lt))
Wt, Ww = inverse_sqrt(np.cov(Xt.T)), inverse_sqrt(within)
oracle = {
    "kNN Euclidean": scores(sq(Xq, Xg)),
    "kNN Manhattan": scores(l1),
    "kNN cosine": scores(np.stack([1 - (q @ Xg.T) / np.sqrt((q @ q) * (Xg * Xg).sum(1)) for q in Xq])),
    "chi-square kernel": scores(-np.exp(-0.01 * chi2)),
    "Gaussian kernel": scores(-np.exp(-0.01 * sq(Xq, Xg))),
    "Laplacian kernel": scores(-np.exp(-0.01 * l1)),
    "Mahalanobis": scores(sq(Xq @ Wt, Xg @ Wt)),
    "Mahalanobis (within-class)": scores(sq(Xq @ Ww, Xg @ Ww)),
}
# The learned transforms pass through float32 twice (PCA, then the metric), so their rows may
# differ from the float64 oracle by a near-tie or two; the direct measures must agree exactly.
loose = {"Mahalanobis", "Mahalanobis (within-class)"}

table = json.load(open(table_json))
rows = {m["method"]: m for m in table["methods"]}
problems = []
if [m["method"] for m in table["methods"]] != expected_methods:
    problems.append(f"rows {[m['method'] for m in table['methods']]} != {expected_methods}")
for name, m in rows.items():
    for key in ("rank-1", "rank-10", "mAP"):
        if not (0 <= m[key] <= 1): problems.append(f"{name}: {key} = {m[key]} outside [0, 1]")
    cmc = np.array(m["cmc"])
    if np.any(np.diff(cmc) < 0) or cmc[0] != m["rank-1"] or cmc[9] != m["rank-10"]:
        problems.append(f"{name}: CMC is not a non-decreasing curve through rank-1 and rank-10")
for name, (r1, r10, ap) in oracle.items():
    m = rows[name]
    tol_rank, tol_ap = (2.5 / len(Xq), 5e-3) if name in loose else (1e-9, 1e-6)
    print(f"{name}: ours {m['rank-1']:.4f} {m['rank-10']:.4f} {m['mAP']:.4f}  numpy {r1:.4f} {r10:.4f} {ap:.4f}")
    if abs(m["rank-1"] - r1) > tol_rank or abs(m["rank-10"] - r10) > tol_rank or abs(m["mAP"] - ap) > tol_ap:
        problems.append(f"{name}: table disagrees with numpy by {m['rank-1'] - r1}, {m['rank-10'] - r10}, {m['mAP'] - ap}")
base = rows["kNN Euclidean"]["rank-1"]
for name in ("Mahalanobis (within-class)", "LMNN", "SGD pairwise", "SGD triplet"):
    print(f"{name}: rank-1 {rows[name]['rank-1']:.4f} vs Euclidean {base:.4f}")
    if not rows[name]["rank-1"] > base + 0.05: problems.append(f"{name} does not beat Euclidean kNN on rank-1")
# The report's own finding: whitening by the total covariance hurts re-id ranking.
if not rows["Mahalanobis"]["rank-1"] < base: problems.append("total-covariance Mahalanobis beats Euclidean")
for p in problems: print("PROBLEM:", p)
sys.exit(1 if problems else 0)
)PY";

void check_png(const fs::path& p) {
  INFO(p);
  REQUIRE(fs::exists(p));
  const cv::Mat img = cv::imread(p.string(), cv::IMREAD_COLOR);
  CHECK(!img.empty());
  CHECK(img.cols >= 400);
  CHECK(img.rows >= 300);
}

}  // namespace

TEST_CASE("reid_metric_learning.yaml: one table of every method, numpy agrees, learned metrics beat Euclidean",
          "[eval][graph]") {
  const fs::path dir = reid_data_dir();
  fs::remove_all(dir / "out");
  // The shipped graph on a third of the default data, with fewer LMNN steps (it converges sooner
  // on fewer points).
  const Result r = run_cli_in(dir, {"run", source_dir() + "/graphs/reid_metric_learning.yaml", "--threads", "2", "--quiet",
                                    "--set", "lmnn.max_iterations=60"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const fs::path out = dir / "out/reid_metric_learning";
  std::vector<std::string> args{(dir / "data/reid_128.h5").string(), (out / "table.json").string()};
  args.insert(args.end(), kMethods.begin(), kMethods.end());
  check_python(kCheckTable, args);

  const std::string md = read_file(out / "table.md");
  for (const auto& m : kMethods) CHECK(md.find("| " + m + " |") != std::string::npos);
  CHECK(md.find("| method | rank-1 % | rank-10 % | mAP %") != std::string::npos);
  check_png(out / "table_cmc.png");
  for (const char* m : {"euclidean", "manhattan", "cosine", "kmeans", "chi2_kernel", "gaussian_kernel", "laplacian_kernel",
                        "mahalanobis", "mahalanobis_within", "lmnn", "sgd_pairwise", "sgd_triplet"}) {
    check_png(out / (std::string(m) + "_cmc.png"));
    CHECK(fs::exists(out / (std::string(m) + ".json")));
  }
  check_png(out / "lmnn_train_objective.png");
  check_png(out / "sgd_pairwise_train_loss.png");
  check_png(out / "sgd_triplet_train_loss.png");
  // The learners' own records: LMNN's objective fell, both SGD runs validated.
  const Result learners = run_python(R"PY(
import json, sys
d = sys.argv[1]
lmnn = json.load(open(d + "/lmnn_train.json"))
assert lmnn["objective"][-1] < 0.8 * lmnn["objective"][0], lmnn["objective"][::10]
for name in ("sgd_pairwise_train", "sgd_triplet_train"):
    s = json.load(open(f"{d}/{name}.json"))
    assert len(s["train_loss"]) == 100 and len(s["validation_loss"]) == 11, (name, len(s["validation_loss"]))
    assert s["min_eigenvalue_seen"] >= -1e-9, s["min_eigenvalue_seen"]
)PY",
                                     {out.string()});
  INFO(learners.err);
  CHECK(learners.exit_code == 0);
}

TEST_CASE("each eval and metric node's example graph runs as pasted", "[eval][graph]") {
  // The YAML in a node file's opening comment runs from "seed:" to the end of the comment; it
  // reads data/reid_128.h5 and the judgement CSVs relative to the working directory.
  const fs::path dir = reid_data_dir();
  const std::vector<std::string> files = {
      "eval/retrieval.cpp",   "eval/clustering.cpp",     "eval/report.cpp",
      "eval/triplet_accuracy.cpp", "eval/pair_prediction.cpp", "metric/mahalanobis.cpp",
      "metric/pca.cpp",       "metric/lmnn.cpp",         "metric/sgd_mahalanobis.cpp",
      "metric/transform.cpp", "eval/scatter.cpp",        "eval/neighbour_average.cpp",
      "eval/index_build.cpp", "eval/index_retrieval.cpp", "eval/index_knn.cpp"};
  for (const auto& file : files) {
    const std::string text = read_file(source_dir() + "/plugins/" + file);
    std::string yaml;
    bool inside = false;
    for (std::size_t at = 0; at < text.size() && text.compare(at, 2, "//") == 0;) {
      const std::size_t end = text.find('\n', at);
      const std::string line = text.substr(at, end - at);
      if (line.rfind("//   seed:", 0) == 0) inside = true;
      if (inside) yaml += line.substr(std::min<std::size_t>(5, line.size())) + "\n";
      at = end + 1;
    }
    INFO(file << " example:\n" << yaml);
    REQUIRE(yaml.find("nodes:") != std::string::npos);
    const fs::path graph = dir / (fs::path(file).stem().string() + "_example.yaml");
    write_file(graph, yaml);
    const Result r = run_cli_in(dir, {"run", graph.string(), "--quiet"});
    INFO(r.err);
    CHECK(r.exit_code == 0);
  }
  CHECK(fs::exists(dir / "out/reid_cosine.json"));
  CHECK(fs::exists(dir / "out/kmeans2_cmc.png"));
  CHECK(fs::exists(dir / "out/gallery.faiss.h5"));
  CHECK(fs::exists(dir / "out/reid_ivf.json"));
  CHECK(fs::exists(dir / "out/knn_hnsw.json"));
  CHECK(fs::exists(dir / "out/table.md"));
  CHECK(fs::exists(dir / "out/triplets.json"));
  CHECK(fs::exists(dir / "out/pairs.json"));
  CHECK(fs::exists(dir / "out/lmnn_objective.png"));
  CHECK(fs::exists(dir / "out/sgd_loss.png"));
  CHECK(fs::exists(dir / "out/reid_pca.png"));
  CHECK(fs::exists(dir / "out/reid_dba.json"));
}

TEST_CASE("ill-typed or out-of-range parameters of eval and metric nodes are named at load time", "[eval][graph][errors]") {
  const fs::path dir = reid_data_dir();
  const Result r = run_cli_in(dir, {"validate", source_dir() + "/graphs/reid_metric_learning.yaml", "--set", "euclidean.ranks=abc",
                                    "--set", "lmnn.k=three", "--set", "sgdt.epochs=1.5", "--set", "maha.shrinkage=2",
                                    "--set", "chi2.distance=chi3", "--set", "kmeans.max_rank=5"});
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("node 'euclidean': parameter 'ranks' expects an integer, got string abc") != std::string::npos);
  CHECK(r.err.find("node 'lmnn': parameter 'k' expects an integer, got string three") != std::string::npos);
  CHECK(r.err.find("node 'sgdt': parameter 'epochs' expects an integer, got number 1.5") != std::string::npos);
  CHECK(r.err.find("node 'maha': parameter 'shrinkage'") != std::string::npos);
  CHECK(r.err.find("node 'chi2': parameter 'distance'") != std::string::npos);
  CHECK(r.err.find("node 'kmeans'") != std::string::npos);
  CHECK(r.err.find("rank 10 is beyond max_rank 5") != std::string::npos);
}

TEST_CASE("missing files, mismatched dims and bad data stop eval and metric graphs with located errors",
          "[eval][graph][errors]") {
  const fs::path dir = reid_data_dir();
  {
    const Result r = run_process({GEN_REID_FEATURES, "--out", (dir / "data/reid_64.h5").string(), "--dim", "64",
                                  "--identities", "2", "--per-camera", "2", "--test-identities", "10"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
  }
  SECTION("a missing judgement file names the node and the file") {
    for (const std::string node : {"acc: {type: eval.triplet_accuracy, params: {triplets: data/no_such_triplets.csv}}",
                                   "acc: {type: eval.pair_prediction, params: {pairs: data/no_such_pairs.csv, threshold: 1.0}}"}) {
      write_file(dir / "missing.yaml", "seed: 1\nnodes:\n"
                                       "  emb: {type: io.hdf5_reader, params: {path: data/reid_128.h5, object: gallery, batch_size: 256}}\n"
                                       "  " + node + "\nedges: [emb.out -> acc.in]\n");
      const Result r = run_cli_in(dir, {"run", "missing.yaml", "--quiet"});
      INFO(r.err);
      CHECK(r.exit_code == 1);
      CHECK(r.err.find("missing.yaml:4:3: node 'acc'") != std::string::npos);
      CHECK(r.err.find("data/no_such_") != std::string::npos);
    }
  }
  SECTION("a missing feature file is reported at load time, naming the reader and the path") {
    const Result r = run_cli_in(dir, {"run", source_dir() + "/graphs/reid_metric_learning.yaml", "--set",
                                      "query.path=data/no_such.h5"});
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("node 'query'") != std::string::npos);
    CHECK(r.err.find("data/no_such.h5") != std::string::npos);
  }
  SECTION("128-d queries against a 64-d gallery, and a 64-d transform on 128-d embeddings") {
    write_file(dir / "dims.yaml", R"(seed: 1
nodes:
  query:   {type: io.hdf5_reader, params: {path: data/reid_128.h5, object: query, batch_size: 256}}
  gallery: {type: io.hdf5_reader, params: {path: data/reid_64.h5, object: gallery, batch_size: 256}}
  eval:    {type: eval.retrieval, params: {out: out/dims}}
  train:   {type: io.hdf5_reader, params: {path: data/reid_64.h5, object: train, batch_size: 256}}
  pca:     {type: metric.pca, params: {components: 16}}
  apply:   {type: metric.transform}
  sink:    {type: core.sink}
edges:
  - query.out -> eval.query
  - gallery.out -> eval.gallery
  - train.out -> pca.train
  - pca.transform -> apply.transform
  - query.out -> apply.in
  - apply.out -> sink.in
)");
    const Result r = run_cli_in(dir, {"run", "dims.yaml"});
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("dims.yaml:5:3: node 'eval': input 'gallery': field 'embedding' dim D: is 64") !=
          std::string::npos);
    CHECK(r.err.find("dims.yaml:15:5: node 'apply': edge 'query.out -> apply.in': field 'embedding' dim D: is 128") !=
          std::string::npos);
    CHECK(!fs::exists(dir / "out/dims.json"));
  }
  SECTION("data errors at run time name the node and what is wrong") {
    // PCA-centred features are negative somewhere: chi-square needs non-negative ones.
    write_file(dir / "negative.yaml", R"(seed: 1
nodes:
  train: {type: io.hdf5_reader, params: {path: data/reid_128.h5, object: train, batch_size: 256}}
  pca:   {type: metric.pca, params: {components: 16}}
  apply: {type: metric.transform}
  chi2:  {type: eval.retrieval, params: {distance: chi_square}}
edges:
  - train.out -> pca.train
  - pca.transform -> apply.transform
  - train.out -> apply.in
  - apply.out -> chi2.query
)");
    Result r = run_cli_in(dir, {"run", "negative.yaml", "--quiet"});
    INFO(r.err);
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("negative.yaml:6:3: node 'chi2' (eval.retrieval) failed") != std::string::npos);
    CHECK(r.err.find("chi-square measures need non-negative features") != std::string::npos);
    // 8 training rows in 64 dims: the covariance is singular.
    write_file(dir / "singular.yaml", R"(seed: 1
nodes:
  train: {type: io.hdf5_reader, params: {path: data/reid_64.h5, object: train, batch_size: 256}}
  maha:  {type: metric.mahalanobis}
  sink:  {type: core.sink}
edges: [train.out -> maha.train, maha.transform -> sink.in]
)");
    r = run_cli_in(dir, {"run", "singular.yaml", "--quiet"});
    INFO(r.err);
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("singular.yaml:4:3: node 'maha' (metric.mahalanobis) failed") != std::string::npos);
    CHECK(r.err.find("use shrinkage > 0") != std::string::npos);
  }
}
