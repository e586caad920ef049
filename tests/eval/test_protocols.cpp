// Evaluation protocols against scikit-learn and numpy, through whole graphs run by the CLI on an
// h5py-written file whose columns have their own names (`fields` maps them):
//   eval.knn_classifier = KNeighborsClassifier (uniform and distance weights, three distances,
//     vote ties by the smallest label, and the nearest-neighbour tie rule by hand);
//   eval.clustering on a given assignment = sklearn's NMI, AMI, ARI and purity; its own k-means
//     with n_init restarts keeps the lowest inertia, recomputed by numpy from its assignment;
//   eval.retrieval's macro averages and per-label results = a numpy full ranking;
//   metric.lmnn and metric.sgd_mahalanobis say how they ended (cap warning, converged flag).
// And the error paths: k beyond the training set, an unknown role in `fields`, an assignment
// field that is absent or short of rows.
#include <catch2/catch.hpp>

#include <opencv2/imgcodecs.hpp>

#include <map>

#include "harness.hpp"

using namespace embedflow;
using namespace embedflow::test;
namespace fs = std::filesystem;

namespace {

// Writes data/classes.h5: groups train (300 rows) and test (200 rows) with columns feat
// f32[N,6], pid i64[N] and cluster i64[N] (a noisy copy of pid), five classes with overlapping
// clouds so kNN errs and votes tie.
const char* kMakeData = R"PY(
import sys, numpy as np, h5py
rng = np.random.default_rng(5)
centres = rng.normal(0, 1.2, (5, 6))
def part(n):
    y = rng.integers(0, 5, n)
    x = centres[y] + rng.normal(0, 1.0, (n, 6)) + 3.0
    cluster = np.where(rng.random(n) < 0.3, rng.integers(0, 7, n), y)
    return x.astype(np.float32), y.astype(np.int64), cluster.astype(np.int64)
with h5py.File(sys.argv[1] + "/data/classes.h5", "w") as f:
    for name, n in (("train", 300), ("test", 200)):
        x, y, c = part(n)
        g = f.create_group(name)
        g["feat"] = x; g["pid"] = y; g["cluster"] = c
)PY";

// Reads our JSON outputs and prints ours_* beside want_* (scikit-learn / numpy) values.
const char* kCompare = R"PY(
import sys, json, numpy as np, h5py
from collections import Counter
from sklearn.neighbors import KNeighborsClassifier, NearestNeighbors
from sklearn.metrics import (confusion_matrix, normalized_mutual_info_score, adjusted_mutual_info_score,
                             adjusted_rand_score)
from sklearn.metrics.cluster import contingency_matrix
d = sys.argv[1]
f = h5py.File(d + "/data/classes.h5", "r")
xtr, ytr = f["train/feat"][:].astype(np.float64), f["train/pid"][:]
xte, yte = f["test/feat"][:].astype(np.float64), f["test/pid"][:]
def show(tag, v): print(tag, " ".join(repr(float(x)) for x in np.ravel(v)))
for name, k, metric, weights in (("knn_uniform", 4, "euclidean", "uniform"), ("knn_distance", 5, "manhattan", "distance"),
                                 ("knn_cosine", 4, "cosine", "uniform")):
    ours = json.load(open(f"{d}/out/{name}.json"))
    clf = KNeighborsClassifier(n_neighbors=k, metric=metric, weights=weights, algorithm="brute").fit(xtr, ytr)
    want = clf.predict(xte)
    show(name + "_ours_pred", ours["predicted"]); show(name + "_want_pred", want)
    show(name + "_ours_acc", [ours["accuracy"]]); show(name + "_want_acc", [np.mean(want == yte)])
    labels = ours["labels"]
    show(name + "_ours_cm", ours["confusion"]); show(name + "_want_cm", confusion_matrix(yte, want, labels=labels))
    show(name + "_ours_class", [c["accuracy"] for c in ours["per_class"]])
    cm = confusion_matrix(yte, want, labels=labels)
    show(name + "_want_class", np.diag(cm) / cm.sum(1))
    # Vote ties among the uniform runs: rows whose top two counts are equal.
    if weights == "uniform":
        _, idx = NearestNeighbors(n_neighbors=k, metric=metric, algorithm="brute").fit(xtr).kneighbors(xte)
        ties, nearest = 0, []
        for row in idx:
            lab = ytr[row]
            counts = Counter(lab)
            top = max(counts.values())
            tied = [l for l, c in counts.items() if c == top]
            ties += len(tied) > 1
            nearest.append(next(l for l in lab if l in tied))   # first in neighbour order
        show(name + "_ties", [ties])
        if name == "knn_uniform":
            o = json.load(open(f"{d}/out/knn_nearest.json"))
            show("knn_nearest_ours_pred", o["predicted"]); show("knn_nearest_want_pred", nearest)
            show("knn_nearest_differs", [int(np.sum(np.array(nearest) != want))])
# Clustering of the given assignment (gallery = the test group, self mode).
c = json.load(open(f"{d}/out/given.json"))["clustering"]
assign = f["test/cluster"][:]
show("given_ours", [c["NMI"], c["AMI"], c["ARI"], c["purity"]])
cm = contingency_matrix(yte, assign)
show("given_want", [normalized_mutual_info_score(yte, assign), adjusted_mutual_info_score(yte, assign),
                    adjusted_rand_score(yte, assign), cm.max(axis=0).sum() / cm.sum()])
# k-means with restarts: the kept inertia is the lowest, and it is the inertia of the assignment.
for name in ("kmeans1", "kmeans5"):
    o = json.load(open(f"{d}/out/{name}.json"))
    a = np.array(o["assignment"], dtype=np.int64)
    inertia = sum(((xte[a == c] - xte[a == c].mean(0)) ** 2).sum() for c in np.unique(a))
    show(name + "_ours", [o["clustering"]["inertia"], min(o["clustering"]["init_inertia"]), len(o["clustering"]["init_inertia"])])
    show(name + "_want", [inertia])
    show(name + "_ari", [adjusted_rand_score(yte, a), o["clustering"]["ARI"]])
# Retrieval macro averages: numpy full ranking of the test group (self-retrieval, cosine).
r = json.load(open(f"{d}/out/self.json"))
u = xte / np.linalg.norm(xte, axis=1, keepdims=True)
per = {}
for q in range(len(yte)):
    dist = 1 - u @ u[q]
    dist[q] = np.inf
    order = np.argsort(dist, kind="stable")[:-1]
    hits = np.nonzero(yte[order] == yte[q])[0] + 1
    P = len(hits)
    prec = np.arange(1, P + 1) / hits
    m = per.setdefault(int(yte[q]), [])
    m.append([prec.mean(), float(hits[0] == 1), np.mean(hits <= P), prec[hits <= P].sum() / P, 1 / hits[0]])
labels = sorted(per)
per_label = np.array([np.mean(per[l], axis=0) for l in labels])
show("macro_want", per_label.mean(0))
mac = r["metrics"]["macro"]
show("macro_ours", [mac["mAP"], mac["P@1"], mac["R-precision"], mac["MAP@R"], mac["MRR"]])
show("per_label_want", per_label)
show("per_label_ours", [[p["mAP"], p["P@1"], p["R-precision"], p["MAP@R"], p["MRR"]] for p in r["per_label"]])
micro = np.concatenate([per[l] for l in labels]).mean(0)
show("micro_want", micro); show("micro_ours", [r["metrics"]["mAP"], r["metrics"]["P@1"], r["metrics"]["R-precision"],
                                               r["metrics"]["MAP@R"], r["metrics"]["MRR"]])
)PY";

const char* kGraph = R"(seed: 3
nodes:
  train: {type: io.hdf5_reader, params: {path: data/classes.h5, object: train, batch_size: 64}}
  test:  {type: io.hdf5_reader, params: {path: data/classes.h5, object: test, batch_size: 64}}
  knn_uniform:  {type: eval.knn_classifier, params: {k: 4, fields: {embedding: feat, label: pid}, out: out/knn_uniform}}
  knn_nearest:  {type: eval.knn_classifier, params: {k: 4, tie_rule: nearest, fields: {embedding: feat, label: pid}, out: out/knn_nearest}}
  knn_distance: {type: eval.knn_classifier, params: {k: 5, distance: manhattan, weights: distance, fields: {embedding: feat, label: pid}, out: out/knn_distance}}
  knn_cosine:   {type: eval.knn_classifier, params: {k: 4, distance: cosine, fields: {embedding: feat, label: pid}, out: out/knn_cosine}}
  given:   {type: eval.clustering, params: {assignment: cluster, retrieval: false, fields: {embedding: feat, label: pid}, out: out/given}}
  kmeans1: {type: eval.clustering, params: {clusters: 5, n_init: 1, retrieval: false, fields: {embedding: feat, label: pid}, out: out/kmeans1}}
  kmeans5: {type: eval.clustering, params: {clusters: 5, n_init: 5, retrieval: false, fields: {embedding: feat, label: pid}, out: out/kmeans5}}
  self:    {type: eval.retrieval, params: {distance: cosine, bootstrap: 0, fields: {embedding: feat, label: pid}, out: out/self}}
  sink:    {type: core.sink, params: {mode: count}}
edges:
  - train.out -> knn_uniform.train
  - test.out -> knn_uniform.test
  - train.out -> knn_nearest.train
  - test.out -> knn_nearest.test
  - train.out -> knn_distance.train
  - test.out -> knn_distance.test
  - train.out -> knn_cosine.train
  - test.out -> knn_cosine.test
  - test.out -> given.query
  - test.out -> kmeans1.query
  - test.out -> kmeans5.query
  - test.out -> self.query
  - knn_uniform.metrics -> sink.in
  - knn_nearest.metrics -> sink.in
  - knn_distance.metrics -> sink.in
  - knn_cosine.metrics -> sink.in
  - given.metrics -> sink.in
  - kmeans1.metrics -> sink.in
  - kmeans5.metrics -> sink.in
  - self.metrics -> sink.in
)";

fs::path classes_dir() {
  static fs::path dir;
  if (dir.empty()) {
    dir = scratch_dir("eval_protocols");
    fs::create_directories(dir / "data");
    const Result r = run_python(kMakeData, {dir.string()});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
  }
  return dir;
}

void check_equal(const std::map<std::string, std::vector<double>>& o, const std::string& ours, const std::string& want,
                 double margin) {
  INFO(ours << " against " << want);
  REQUIRE(o.count(ours) == 1);
  REQUIRE(o.count(want) == 1);
  const auto& a = o.at(ours);
  const auto& b = o.at(want);
  REQUIRE(a.size() == b.size());
  REQUIRE(!a.empty());
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO("element " << i);
    CHECK(a[i] == Approx(b[i]).margin(margin));
  }
}

}  // namespace

TEST_CASE("knn classifier, clustering scores and macro averages equal scikit-learn and numpy", "[eval][protocols]") {
  const fs::path dir = classes_dir();
  write_file(dir / "protocols.yaml", kGraph);
  const Result run = run_cli_in(dir, {"run", "protocols.yaml", "--quiet"});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const Result cmp = run_python(kCompare, {dir.string()});
  INFO(cmp.err);
  REQUIRE(cmp.exit_code == 0);
  const auto o = parse_tagged(cmp.out);

  for (const std::string name : {"knn_uniform", "knn_distance", "knn_cosine"}) {
    check_equal(o, name + "_ours_pred", name + "_want_pred", 0);
    check_equal(o, name + "_ours_acc", name + "_want_acc", 1e-12);
    check_equal(o, name + "_ours_cm", name + "_want_cm", 0);
    check_equal(o, name + "_ours_class", name + "_want_class", 1e-12);
  }
  // The data must exercise the tie rules: vote ties occur, and the nearest rule decides some
  // of them differently from scikit-learn's smallest label.
  CHECK(o.at("knn_uniform_ties").at(0) >= 5);
  CHECK(o.at("knn_cosine_ties").at(0) >= 5);
  CHECK(o.at("knn_nearest_differs").at(0) >= 1);
  check_equal(o, "knn_nearest_ours_pred", "knn_nearest_want_pred", 0);

  check_equal(o, "given_ours", "given_want", 1e-9);
  // Restarts: the kept inertia is the smallest of the restarts and that of the kept assignment.
  for (const std::string name : {"kmeans1", "kmeans5"}) {
    const auto& ours = o.at(name + "_ours");
    CHECK(ours.at(0) == Approx(o.at(name + "_want").at(0)).epsilon(1e-5));
    CHECK(ours.at(0) == Approx(ours.at(1)).epsilon(1e-9));
    const auto& ari = o.at(name + "_ari");
    CHECK(ari.at(1) == Approx(ari.at(0)).margin(1e-9));
  }
  CHECK(o.at("kmeans1_ours").at(2) == 1);
  CHECK(o.at("kmeans5_ours").at(2) == 5);
  CHECK(o.at("kmeans5_ours").at(0) <= o.at("kmeans1_ours").at(0) * (1 + 1e-12));

  check_equal(o, "macro_ours", "macro_want", 1e-12);
  check_equal(o, "per_label_ours", "per_label_want", 1e-12);
  check_equal(o, "micro_ours", "micro_want", 1e-12);
  // Unequal class sizes make macro and micro differ.
  CHECK(o.at("macro_ours").at(0) != o.at("micro_ours").at(0));

  // The confusion picture decodes; the Markdown holds the confusion table and the macro row.
  const cv::Mat png = cv::imread((dir / "out/knn_uniform_confusion.png").string());
  CHECK(png.cols > 200);
  CHECK(read_file(dir / "out/knn_uniform.md").find("Confusion matrix (rows: true label") != std::string::npos);
  CHECK(read_file(dir / "out/self.md").find("| macro (mean over labels) |") != std::string::npos);
}

TEST_CASE("located errors: k beyond the training set, unknown field roles, a missing assignment", "[eval][protocols][errors]") {
  const fs::path dir = classes_dir();
  SECTION("k larger than the training set stops the run with exit 2 at the node") {
    write_file(dir / "bigk.yaml", R"(seed: 1
nodes:
  train: {type: io.hdf5_reader, params: {path: data/classes.h5, object: train, batch_size: 64, stop: 7}}
  test:  {type: io.hdf5_reader, params: {path: data/classes.h5, object: test, batch_size: 64}}
  knn:   {type: eval.knn_classifier, params: {k: 9, fields: {embedding: feat, label: pid}, out: out/bigk}}
edges: [train.out -> knn.train, test.out -> knn.test]
)");
    const Result r = run_cli_in(dir, {"run", "bigk.yaml", "--quiet"});
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("bigk.yaml:5:3: node 'knn'") != std::string::npos);
    CHECK(r.err.find("k = 9 is larger than the training set (7 rows)") != std::string::npos);
    CHECK(!fs::exists(dir / "out/bigk.json"));
  }
  SECTION("an unknown role in fields is a validation error at the parameter") {
    const Result r = validate_in(dir, "roles.yaml", R"(seed: 1
nodes:
  train: {type: io.hdf5_reader, params: {path: data/classes.h5, object: train, batch_size: 64}}
  test:  {type: io.hdf5_reader, params: {path: data/classes.h5, object: test, batch_size: 64}}
  knn:   {type: eval.knn_classifier, params: {k: 3, fields: {embeding: feat, label: pid}, out: out/roles}}
  lmnn:  {type: metric.lmnn, params: {fields: {embedding: feat, label: person}}}
  sink:  {type: core.sink}
edges: [train.out -> knn.train, test.out -> knn.test, train.out -> lmnn.train, lmnn.transform -> sink.in]
)");
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("roles.yaml:5:61: node 'knn': fields: unknown role 'embeding'; did you mean 'embedding'?") !=
          std::string::npos);
    // Without the mapping's embedding, the default name is missing from the reader's columns.
    CHECK(r.err.find("roles.yaml:5:61: node 'knn': input 'train': ") != std::string::npos);
    CHECK(r.err.find("node 'lmnn': input 'train': ") != std::string::npos);
    CHECK(r.err.find("person") != std::string::npos);
  }
  SECTION("an assignment field the rows do not carry") {
    const Result r = validate_in(dir, "assign.yaml", R"(seed: 1
nodes:
  test:  {type: io.hdf5_reader, params: {path: data/classes.h5, object: test, batch_size: 64, fields: [feat, pid]}}
  given: {type: eval.clustering, params: {assignment: cluster, retrieval: false, fields: {embedding: feat, label: pid}}}
  sink:  {type: core.sink}
edges: [test.out -> given.query, given.metrics -> sink.in]
)");
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("assign.yaml:4:55: node 'given': assignment: field 'cluster' does not arrive on input 'query'") !=
          std::string::npos);
  }
}

TEST_CASE("metric learners record how they ended and warn at the iteration cap", "[eval][protocols][learners]") {
  const fs::path dir = classes_dir();
  write_file(dir / "learners.yaml", R"(seed: 1
nodes:
  train:  {type: io.hdf5_reader, params: {path: data/classes.h5, object: train, batch_size: 64}}
  capped: {type: metric.lmnn, params: {k: 3, max_iterations: 2, fields: {embedding: feat, label: pid}, out: out/lmnn_capped}}
  free:   {type: metric.lmnn, params: {k: 3, max_iterations: 2000, tolerance: 1e-3, fields: {embedding: feat, label: pid}, out: out/lmnn_free}}
  sgd:    {type: metric.sgd_mahalanobis, params: {epochs: 3, tolerance: 1e-9, fields: {embedding: feat, label: pid}, out: out/sgd}}
  sink:   {type: core.sink, params: {mode: print}}
edges: [train.out -> capped.train, train.out -> free.train, train.out -> sgd.train, capped.transform -> sink.in,
        free.transform -> sink.in, sgd.transform -> sink.in]
)");
  const Result r = run_cli_in(dir, {"run", "learners.yaml", "--quiet"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.find("capped: LMNN stopped at the iteration cap (max_iterations 2)") != std::string::npos);
  CHECK(r.err.find("free: LMNN stopped at the iteration cap") == std::string::npos);
  CHECK(r.err.find("sgd: SGD stopped at the epoch cap (epochs 3) while the training loss still moved") != std::string::npos);
  const std::string capped = read_file(dir / "out/lmnn_capped.json"), free = read_file(dir / "out/lmnn_free.json");
  CHECK(capped.find("\"iterations\": 2,") != std::string::npos);
  CHECK(capped.find("\"converged\": false") != std::string::npos);
  CHECK(capped.find("\"stop_reason\": \"iteration_cap\"") != std::string::npos);
  CHECK(free.find("\"converged\": true") != std::string::npos);
  CHECK(free.find("\"stop_reason\": \"converged\"") != std::string::npos);
  CHECK(free.find("\"final_objective\": ") != std::string::npos);
  const std::string sgd = read_file(dir / "out/sgd.json");
  CHECK(sgd.find("\"iterations\": 3,") != std::string::npos);
  CHECK(sgd.find("\"converged\": false") != std::string::npos);
  // The transform records carry it too (core.sink prints them).
  CHECK(r.out.find("stop_reason") != std::string::npos);
}

TEST_CASE("an assignment short of rows stops eval.clustering with a ConfigError naming the batch and row",
          "[eval][protocols][errors]") {
  NodeRunner node(plugins(), "eval.clustering", "{assignment: cluster, retrieval: false}");
  REQUIRE(node.problems().empty());
  node.open();
  Record batch;
  batch.set("embedding", Array::from_vector<float>({4, 2}, {0, 0, 0, 1, 5, 5, 5, 6}));
  batch.set("label", Array::from_vector<std::int64_t>({4}, {0, 0, 1, 1}));
  batch.set("cluster", Array::from_vector<std::int64_t>({3}, {0, 0, 1}));
  CHECK_THROWS_AS(node.push("query", batch), embedflow::ConfigError);
  CHECK_THROWS_WITH(node.push("query", batch),
                    Catch::Contains("assignment field 'cluster' has 3 values for 4 rows; row ") &&
                        Catch::Contains("has no cluster"));
}

TEST_CASE("single-shot rank-k goes into the Markdown table and the metrics record, labelled", "[eval][protocols]") {
  const fs::path dir = classes_dir();
  write_file(dir / "shot.yaml", R"(seed: 1
nodes:
  train: {type: io.hdf5_reader, params: {path: data/classes.h5, object: train, batch_size: 64}}
  test:  {type: io.hdf5_reader, params: {path: data/classes.h5, object: test, batch_size: 64}}
  shot:  {type: eval.retrieval, params: {single_shot_repeats: 4, ranks: [1, 5], bootstrap: 0, fields: {embedding: feat, label: pid}, out: out/shot}}
  table: {type: eval.report, params: {out: out/shot_table, columns: [rank-k, single_shot_rank1, macro_map, map]}}
edges: [test.out -> shot.query, train.out -> shot.gallery, shot.metrics -> table.in]
)");
  const Result r = run_cli_in(dir, {"run", "shot.yaml", "--quiet"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::string md = read_file(dir / "out/shot.md"), json = read_file(dir / "out/shot.json");
  CHECK(md.find("| single-shot rank-1 % | single-shot rank-5 % |") != std::string::npos);
  CHECK(md.find("Single-shot: CUHK03 single-gallery-shot rank-k") != std::string::npos);
  const auto shot = json.find("\"single_shot\": {");
  REQUIRE(shot != std::string::npos);
  CHECK(json.find("\"repeats\": 4", shot) != std::string::npos);
  CHECK(json.find("\"rank-5\": ", shot) != std::string::npos);
  const std::string table = read_file(dir / "out/shot_table.md");
  CHECK(table.find("single-shot rank-1 %") != std::string::npos);
  CHECK(table.find("macro mAP %") != std::string::npos);
  CHECK(table.find("n/a") == std::string::npos);  // the record carries every requested column
}
