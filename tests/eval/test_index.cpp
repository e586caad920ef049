// eval.index_build, eval.index_retrieval and eval.index_knn in whole graphs run in process, on
// clustered, L2-normalised embeddings (anisotropic Gaussian clusters, like a CNN's) that NumPy
// writes to a real HDF5 file:
//   - a flat index gives eval.retrieval's metrics exactly (whole-gallery depth; at the automatic
//     depth every metric but mAP), for a gallery with cameras (same identity and camera
//     excluded), for self-retrieval and for cosine, whether its lists keep faiss's float order
//     (rescore auto or never) or are rescored in double precision (always);
//   - an ivf_pq index's lists are rescored over the gallery port's rows (auto): probing every
//     cell at whole-gallery depth that is eval.retrieval's ranking exactly, where faiss's code
//     order is not; without the rows they keep the code order; rescore: always where it cannot
//     be is an error naming the node;
//   - a flat or hnsw index hands its stored rows out in place, equal to the gallery;
//   - the recall@k that ivf, hnsw, ivf_pq and cosine ivf indexes report equals the recall that
//     faiss's Python API, reading the index files the nodes wrote, finds against a NumPy brute
//     force on the same queries;
//   - a flat index's kNN predictions equal scikit-learn's KNeighborsClassifier's;
//   - missing, truncated, damaged and mismatched index files, and impossible parameters, are
//     errors naming the file or parameter; damaged index bytes never crash the process.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <random>

#include <sys/resource.h>
#include <unistd.h>

#include "ann_index.hpp"
#include "harness.hpp"

using namespace embedflow::test;
using embedflow::RecordPtr;
namespace fs = std::filesystem;
namespace ec = embedflow::evalcore;

namespace {

// 40 clusters in 32 dims, each stretched along its own axes, then scaled to unit length.
const char* kMakeData = R"PY(
import sys, numpy as np, h5py
rng = np.random.default_rng(11)
D, C = 32, 40
centres = rng.normal(size=(C, D))
scales = np.exp(rng.normal(scale=0.6, size=(C, D))) * 0.45
def draw(n):
    y = rng.integers(0, C, n)
    x = centres[y] + rng.normal(size=(n, D)) * scales[y]
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32), y.astype(np.int64)
with h5py.File(sys.argv[1], "w") as f:
    for name, n in (("gallery", 2000), ("query", 300)):
        x, y = draw(n)
        f[name + "/embedding"], f[name + "/label"] = x, y
        f[name + "/id"] = np.arange(n, dtype=np.int64) + (10000 if name == "gallery" else 0)
        f[name + "/camera"] = rng.integers(0, 3, n).astype(np.int64)  # the re-id rule applies
    f["narrow/embedding"] = rng.normal(size=(50, 8)).astype(np.float32)
    f["narrow/label"] = np.zeros(50, dtype=np.int64)
)PY";

struct Data {
  fs::path dir;
  std::string h5;
};

const Data& data() {
  static const Data d = [] {
    Data out{scratch_dir("eval_index"), ""};
    out.h5 = (out.dir / "embeddings.h5").string();
    Result made = run_python(kMakeData, {out.h5});
    INFO(made.err);
    REQUIRE(made.exit_code == 0);
    return out;
  }();
  return d;
}

std::string readers() {
  return "  gallery: {type: io.hdf5_reader, params: {path: " + data().h5 + ", object: gallery, batch_size: 256}}\n"
         "  query:   {type: io.hdf5_reader, params: {path: " + data().h5 + ", object: query, batch_size: 100}}\n";
}

double scalar(const RecordPtr& r, const char* field) { return r->get(field).as_double(0); }

void check_same_metrics(const RecordPtr& exact, const RecordPtr& ann, bool with_map) {
  const auto& a = exact->get("cmc");
  const auto& b = ann->get("cmc");
  REQUIRE(a.numel() == b.numel());
  for (std::int64_t k = 0; k < a.numel(); ++k) CHECK(a.as_double(k) == b.as_double(k));
  for (const char* f : {"p_at_1", "r_precision", "map_at_r", "evaluated", "no_match"}) {
    INFO(f);
    CHECK(scalar(exact, f) == scalar(ann, f));
  }
  if (with_map)
    for (const char* f : {"map", "map_trapezoid", "mrr", "macro_map"}) {
      INFO(f);
      CHECK(scalar(exact, f) == scalar(ann, f));
    }
  else
    CHECK(scalar(ann, "map") <= scalar(exact, "map"));
}

}  // namespace

TEST_CASE("eval.index_retrieval over a flat index gives eval.retrieval's metrics exactly", "[eval][index]") {
  const std::string common = "bootstrap: 0, ranks: [1, 5, 10], max_rank: 20";
  GraphRun r = GraphRunner(plugins(), "seed: 1\nnodes:\n" + readers() +
                           "  flat:   {type: eval.index_build, params: {kind: flat}}\n"
                           "  cosine: {type: eval.index_build, params: {kind: flat, metric: cosine}}\n"
                           "  exact:  {type: eval.retrieval, params: {distance: euclidean, " + common + "}}\n"
                           "  whole:  {type: eval.index_retrieval, params: {depth: 2000, " + common + "}}\n"
                           "  always: {type: eval.index_retrieval, params: {depth: 2000, rescore: always, " + common + "}}\n"
                           "  never:  {type: eval.index_retrieval, params: {depth: 2000, rescore: never, " + common + "}}\n"
                           "  auto:   {type: eval.index_retrieval, params: {" + common + "}}\n"
                           "  self_exact: {type: eval.retrieval, params: {distance: euclidean, " + common + "}}\n"
                           "  self_ann:   {type: eval.index_retrieval, params: {exclude_self: true, depth: 2000, " + common + "}}\n"
                           "  cos_exact:  {type: eval.retrieval, params: {distance: cosine, " + common + "}}\n"
                           "  cos_ann:    {type: eval.index_retrieval, params: {depth: 2000, metric: cosine, " + common + "}}\n"
                           "edges:\n"
                           "  - gallery.out -> flat.gallery\n  - gallery.out -> cosine.gallery\n"
                           "  - query.out -> exact.query\n  - gallery.out -> exact.gallery\n"
                           "  - query.out -> whole.query\n  - flat.index -> whole.index\n"
                           "  - query.out -> always.query\n  - flat.index -> always.index\n"
                           "  - query.out -> never.query\n  - flat.index -> never.index\n"
                           "  - query.out -> auto.query\n  - flat.index -> auto.index\n"
                           "  - gallery.out -> self_exact.query\n"
                           "  - gallery.out -> self_ann.query\n  - flat.index -> self_ann.index\n"
                           "  - query.out -> cos_exact.query\n  - gallery.out -> cos_exact.gallery\n"
                           "  - query.out -> cos_ann.query\n  - cosine.index -> cos_ann.index\n  - gallery.out -> cos_ann.gallery\n",
                           "flat.yaml")
                   .collect("exact.metrics").collect("whole.metrics").collect("auto.metrics").collect("always.metrics").collect("never.metrics")
                   .collect("self_exact.metrics").collect("self_ann.metrics")
                   .collect("cos_exact.metrics").collect("cos_ann.metrics")
                   .threads(2)
                   .run();
  INFO(r.message());
  REQUIRE(r.exit_code == 0);
  const RecordPtr exact = r.records("exact.metrics").at(0);
  CHECK(scalar(exact, "map") > 0.2);  // the clusters make a ranking worth comparing
  CHECK(scalar(exact, "map") < 0.99);
  // (Sections would re-run the graph; one run, several comparisons.)
  // faiss's float distances order the flat lists (auto, never) as the double-precision ranking
  // does here: no two rows of different labels lie within float rounding of a query's distance.
  INFO("whole-gallery depth: every metric, in faiss's order (rescore auto)");
  check_same_metrics(exact, r.records("whole.metrics").at(0), true);
  INFO("rescore never");
  check_same_metrics(exact, r.records("never.metrics").at(0), true);
  INFO("rescore always");
  check_same_metrics(exact, r.records("always.metrics").at(0), true);
  CHECK_THAT(r.log, Catch::Contains("lists in the index's order"));
  CHECK_THAT(r.log, Catch::Contains("lists rescored in double precision"));
  INFO("automatic depth: all but mAP, which is the mAP at that depth");
  check_same_metrics(exact, r.records("auto.metrics").at(0), false);
  INFO("self-retrieval");
  check_same_metrics(r.records("self_exact.metrics").at(0), r.records("self_ann.metrics").at(0), true);
  INFO("cosine, with the gallery port connected (for recall; a flat index's lists keep faiss's order)");
  check_same_metrics(r.records("cos_exact.metrics").at(0), r.records("cos_ann.metrics").at(0), true);
  CHECK(scalar(r.records("whole.metrics").at(0), "recall") == 1.0);
}

TEST_CASE("rescore: ivf_pq's lossy lists are rescored over the gallery rows; impossible settings are located errors",
          "[eval][index]") {
  // Every cell probed and the whole gallery fetched: the index finds every row, so rescored
  // lists are eval.retrieval's ranking exactly, and the code order shows what rescoring changes.
  const std::string common = "bootstrap: 0, ranks: [1, 5, 10], max_rank: 20, depth: 2000, nprobe: 16";
  GraphRun r = GraphRunner(plugins(), "seed: 1\nnodes:\n" + readers() +
                           "  pq:    {type: eval.index_build, params: {kind: ivf_pq, nlist: 16, nprobe: 2, pq_m: 4, pq_nbits: 4}}\n"
                           "  exact: {type: eval.retrieval, params: {distance: euclidean, bootstrap: 0, ranks: [1, 5, 10], max_rank: 20}}\n"
                           "  auto:  {type: eval.index_retrieval, params: {" + common + "}}\n"
                           "  never: {type: eval.index_retrieval, params: {rescore: never, " + common + "}}\n"
                           "  bare:  {type: eval.index_retrieval, params: {" + common + "}}\n"
                           "edges:\n"
                           "  - gallery.out -> pq.gallery\n"
                           "  - query.out -> exact.query\n  - gallery.out -> exact.gallery\n"
                           "  - query.out -> auto.query\n  - pq.index -> auto.index\n  - gallery.out -> auto.gallery\n"
                           "  - query.out -> never.query\n  - pq.index -> never.index\n  - gallery.out -> never.gallery\n"
                           "  - query.out -> bare.query\n  - pq.index -> bare.index\n",
                           "pq.yaml")
                   .collect("exact.metrics").collect("auto.metrics").collect("never.metrics").collect("bare.metrics")
                   .threads(2)
                   .run();
  INFO(r.message());
  REQUIRE(r.exit_code == 0);
  const RecordPtr exact = r.records("exact.metrics").at(0);
  INFO("auto rescores ivf_pq over the gallery port's rows");
  check_same_metrics(exact, r.records("auto.metrics").at(0), true);
  INFO("never: the codes' order, coarser than the exact one");
  const RecordPtr never = r.records("never.metrics").at(0), bare = r.records("bare.metrics").at(0);
  CHECK(scalar(never, "map") != scalar(exact, "map"));
  CHECK(scalar(never, "map") < scalar(exact, "map"));
  INFO("auto without the rows: the codes' order too");
  for (const char* f : {"map", "p_at_1", "r_precision", "map_at_r"}) {
    INFO(f);
    CHECK(scalar(bare, f) == scalar(never, f));
  }

  // rescore: always where there is nothing to rescore with, or no distance to rescore by.
  auto expect = [](const GraphRun& run, int code, const std::vector<std::string>& parts) {
    INFO(run.message());
    CHECK(run.exit_code == code);
    for (const auto& part : parts) CHECK_THAT(run.message(), Catch::Contains(part));
  };
  expect(GraphRunner(plugins(), "seed: 1\nnodes:\n" + readers() +
                     "  pq:   {type: eval.index_build, params: {kind: ivf_pq, nlist: 16, nprobe: 2, pq_m: 4, pq_nbits: 4}}\n"
                     "  eval: {type: eval.index_retrieval, params: {rescore: always, bootstrap: 0}}\n"
                     "edges: [gallery.out -> pq.gallery, query.out -> eval.query, pq.index -> eval.index]\n", "always_pq.yaml").run(),
         2, {"node 'eval'", "rescore: always needs the gallery rows", "ivf_pq", "connect the gallery port"});
  expect(GraphRunner(plugins(), "seed: 1\nnodes:\n" + readers() +
                     "  ip:   {type: eval.index_build, params: {kind: flat, metric: inner_product}}\n"
                     "  eval: {type: eval.index_knn, params: {rescore: always, k: 3}}\n"
                     "edges: [gallery.out -> ip.gallery, query.out -> eval.test, ip.index -> eval.index]\n", "always_ip.yaml").run(),
         2, {"node 'eval'", "rescore: always needs a distance", "inner product"});
  expect(GraphRunner(plugins(), "seed: 1\nnodes:\n" + readers() +
                     "  flat: {type: eval.index_build, params: {kind: flat}}\n"
                     "  eval: {type: eval.index_knn, params: {rescore: sometimes, k: 3}}\n"
                     "edges: [gallery.out -> flat.gallery, query.out -> eval.test, flat.index -> eval.index]\n", "bad.yaml").run(),
         2, {"eval", "rescore", "sometimes"});
}

TEST_CASE("an hnsw search's scores are the exact distances of the rows it returns, nearest first", "[eval][index]") {
  // 40 dims: two 16-lane blocks of the distance kernel and a tail of 8.
  const std::int64_t rows = 500, dim = 40, queries = 30, k = 8;
  std::mt19937_64 rng(9);
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<std::size_t>(rows * dim)), q(static_cast<std::size_t>(queries * dim));
  for (auto& v : x) v = normal(rng);
  for (auto& v : q) v = normal(rng);
  for (auto metric : {ec::AnnMetric::euclidean, ec::AnnMetric::inner_product}) {
    INFO(ec::ann_metric_name(metric));
    ec::AnnSpec spec;
    spec.kind = ec::AnnKind::hnsw;
    spec.metric = metric;
    spec.hnsw_m = 8;
    const std::vector<std::uint8_t> bytes = ec::AnnIndex::build(spec, {x.data(), rows, dim}, 1).to_bytes();
    // Built and loaded: both give the index the same distance kernel.
    const ec::AnnIndex index = ec::AnnIndex::from_bytes(bytes.data(), bytes.size(), metric, "test");
    std::vector<std::int64_t> ids;
    std::vector<float> scores;
    index.search({q.data(), queries, dim}, k, {}, 1, ids, scores);
    for (std::int64_t i = 0; i < queries; ++i)
      for (std::int64_t j = 0; j < k; ++j) {
        const auto at = static_cast<std::size_t>(i * k + j);
        REQUIRE(ids[at] >= 0);
        double l2 = 0, dot = 0;
        for (std::int64_t d = 0; d < dim; ++d) {
          const double a = q[static_cast<std::size_t>(i * dim + d)], b = x[static_cast<std::size_t>(ids[at] * dim + d)];
          l2 += (a - b) * (a - b);
          dot += a * b;
        }
        const double want = metric == ec::AnnMetric::euclidean ? l2 : -dot;
        CHECK(scores[at] == Approx(want).margin(1e-4));
        if (j > 0) CHECK(scores[at - 1] <= scores[at]);
      }
  }
}

TEST_CASE("flat and hnsw indexes hand out their stored rows in place; ivf and ivf_pq do not", "[eval][index]") {
  const std::int64_t rows = 300, dim = 8;
  std::mt19937_64 rng(3);
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<std::size_t>(rows * dim));
  for (auto& v : x) v = normal(rng);
  const embedflow::MatrixView g{x.data(), rows, dim};
  for (auto kind : {ec::AnnKind::flat, ec::AnnKind::hnsw, ec::AnnKind::ivf, ec::AnnKind::ivf_pq}) {
    INFO(ec::ann_kind_name(kind));
    ec::AnnSpec spec;
    spec.kind = kind;
    spec.nlist = 4;
    spec.nprobe = 2;
    spec.hnsw_m = 8;
    spec.pq_m = 2;
    spec.pq_nbits = 4;
    // Through faiss's bytes, as a loaded index is.
    const std::vector<std::uint8_t> bytes = ec::AnnIndex::build(spec, g, 1).to_bytes();
    const ec::AnnIndex index = ec::AnnIndex::from_bytes(bytes.data(), bytes.size(), ec::AnnMetric::euclidean, "test");
    const embedflow::MatrixView stored = index.stored_rows();
    if (kind == ec::AnnKind::flat || kind == ec::AnnKind::hnsw) {
      REQUIRE(stored.data != nullptr);
      CHECK(stored.rows == rows);
      CHECK(stored.cols == dim);
      CHECK(std::equal(x.begin(), x.end(), stored.data));
    } else {
      CHECK(stored.data == nullptr);
    }
  }
}

namespace {

// Recall@k of each index file, as faiss's Python API finds it against a NumPy brute force on the
// same queries: "recall_<name> value" lines. argv: data file, then name:path:metric:nprobe:ef_search:k.
const char* kRecallOracle = R"PY(
import sys, numpy as np, h5py, faiss
with h5py.File(sys.argv[1]) as f:
    g, q = f["gallery/embedding"][()], f["query/embedding"][()]
for spec in sys.argv[2:]:
    name, path, metric, nprobe, ef, k = spec.split(":")
    nprobe, ef, k = int(nprobe), int(ef), int(k)
    index = faiss.read_index(path)
    if nprobe: faiss.extract_index_ivf(index).nprobe = nprobe
    if ef: index.hnsw.efSearch = ef
    gg, qq = g.astype(np.float64), q.astype(np.float64)
    if metric == "cosine":
        gg /= np.linalg.norm(gg, axis=1, keepdims=True); qq /= np.linalg.norm(qq, axis=1, keepdims=True)
        exact = np.argsort(-(qq @ gg.T), axis=1, kind="stable")[:, :k]
        qs = (qq).astype(np.float32)
    else:
        exact = np.argsort(((qq[:, None, :] - gg[None, :, :]) ** 2).sum(-1), axis=1, kind="stable")[:, :k]
        qs = q
    _, found = index.search(qs, k)
    recall = np.mean([len(set(found[i]) & set(exact[i])) / k for i in range(len(q))])
    print("recall_" + name, repr(recall))
)PY";

}  // namespace

TEST_CASE("eval.index_retrieval's recall equals faiss Python's against NumPy brute force", "[eval][index][oracle]") {
  const fs::path dir = data().dir / "recall";
  fs::create_directories(dir);
  auto file = [&](const std::string& name) { return (dir / (name + ".faiss")).string(); };
  GraphRun built = GraphRunner(plugins(), "seed: 1\nnodes:\n" + readers() +
                               "  ivf:    {type: eval.index_build, params: {kind: ivf, nlist: 64, nprobe: 1, path: " + file("ivf") + "}}\n"
                               "  hnsw:   {type: eval.index_build, params: {kind: hnsw, M: 6, ef_construction: 12, ef_search: 8, path: " + file("hnsw") + "}}\n"
                               "  pq:     {type: eval.index_build, params: {kind: ivf_pq, nlist: 16, nprobe: 4, pq_m: 8, pq_nbits: 6, path: " + file("pq") + "}}\n"
                               "  cosine: {type: eval.index_build, params: {kind: ivf, metric: cosine, nlist: 24, nprobe: 3, path: " + file("cosine") + "}}\n"
                               "edges: [gallery.out -> ivf.gallery, gallery.out -> hnsw.gallery, gallery.out -> pq.gallery, gallery.out -> cosine.gallery]\n",
                               "build.yaml")
                       .threads(2)
                       .run();
  INFO(built.message());
  REQUIRE(built.exit_code == 0);
  for (const char* f : {"ivf", "hnsw", "pq", "cosine"}) {
    CHECK(fs::is_regular_file(file(f)));
    CHECK(fs::is_regular_file(file(f) + ".h5"));
  }
  // ivf searched as built and with nprobe raised; pq needs the gallery rows for recall.
  GraphRun r = GraphRunner(plugins(), "seed: 1\nnodes:\n" + readers() +
                           "  ivf:      {type: eval.index_retrieval, params: {path: " + file("ivf") + ", ranks: [1, 10], bootstrap: 0}}\n"
                           "  ivf_wide: {type: eval.index_retrieval, params: {path: " + file("ivf") + ", nprobe: 4, ranks: [1, 10], bootstrap: 0}}\n"
                           "  hnsw:     {type: eval.index_retrieval, params: {path: " + file("hnsw") + ", ranks: [1, 10], bootstrap: 0}}\n"
                           "  hnsw_wide: {type: eval.index_retrieval, params: {path: " + file("hnsw") + ", ef_search: 40, ranks: [1, 10], bootstrap: 0}}\n"
                           "  pq:       {type: eval.index_retrieval, params: {path: " + file("pq") + ", ranks: [1, 10], bootstrap: 0}}\n"
                           "  cosine:   {type: eval.index_retrieval, params: {path: " + file("cosine") + ", metric: cosine, ranks: [1, 10], bootstrap: 0}}\n"
                           "edges: [query.out -> ivf.query, query.out -> ivf_wide.query, query.out -> hnsw.query, query.out -> pq.query,\n"
                           "        query.out -> hnsw_wide.query,\n"
                           "        gallery.out -> pq.gallery, query.out -> cosine.query]\n",
                           "search.yaml")
                   .collect("ivf.metrics").collect("ivf_wide.metrics").collect("hnsw.metrics").collect("pq.metrics")
                   .collect("cosine.metrics").collect("hnsw_wide.metrics")
                   .threads(2)
                   .run();
  INFO(r.message());
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.log, Catch::Contains("recall@10 against exact search"));
  Result py = check_python(kRecallOracle, {data().h5, "ivf:" + file("ivf") + ":euclidean:0:0:10",
                                           "ivf_wide:" + file("ivf") + ":euclidean:4:0:10",
                                           "hnsw:" + file("hnsw") + ":euclidean:0:0:10",
                                           "hnsw_wide:" + file("hnsw") + ":euclidean:0:40:10", "pq:" + file("pq") + ":euclidean:0:0:10",
                                           "cosine:" + file("cosine") + ":cosine:0:0:10"});
  const auto oracle = parse_tagged(py.out);
  for (const char* name : {"ivf", "ivf_wide", "hnsw", "hnsw_wide", "pq", "cosine"}) {
    INFO(name);
    const double ours = scalar(r.records(std::string(name) + ".metrics").at(0), "recall");
    REQUIRE(oracle.count(std::string("recall_") + name));
    CHECK(ours == Approx(oracle.at(std::string("recall_") + name).at(0)).margin(1e-12));
    CHECK(ours > 0.3);
  }
  // The settings are approximate on purpose: recall below 1, and more cells probed find more.
  const double narrow = scalar(r.records("ivf.metrics").at(0), "recall"), wide = scalar(r.records("ivf_wide.metrics").at(0), "recall");
  CHECK(narrow < 0.99);
  CHECK(wide > narrow);
  CHECK(scalar(r.records("hnsw.metrics").at(0), "recall") < 0.999);
  // A search breadth above the built one searches wider (faiss 1.7.3 needs it on the index).
  CHECK(scalar(r.records("hnsw_wide.metrics").at(0), "recall") > scalar(r.records("hnsw.metrics").at(0), "recall"));
}

TEST_CASE("eval.index_knn over a flat index predicts what scikit-learn's KNeighborsClassifier does", "[eval][index][oracle]") {
  const fs::path dir = data().dir / "knn";
  fs::create_directories(dir);
  const std::string ivf = (dir / "ivf.faiss").string();
  GraphRun r = GraphRunner(plugins(), "seed: 1\nnodes:\n" + readers() +
                           "  flat: {type: eval.index_build, params: {kind: flat}}\n"
                           "  ivf:  {type: eval.index_build, params: {kind: ivf, nlist: 32, nprobe: 1, path: " + ivf + "}}\n"
                           "  k5:   {type: eval.index_knn, params: {k: 5, out: " + (dir / "k5").string() + "}}\n"
                           "  k7d:  {type: eval.index_knn, params: {k: 7, weights: distance, out: " + (dir / "k7d").string() + "}}\n"
                           "  approx: {type: eval.index_knn, params: {k: 5, out: " + (dir / "approx").string() + "}}\n"
                           "edges: [gallery.out -> flat.gallery, gallery.out -> ivf.gallery, query.out -> k5.test, flat.index -> k5.index,\n"
                           "        query.out -> k7d.test, flat.index -> k7d.index, query.out -> approx.test, ivf.index -> approx.index]\n",
                           "knn.yaml")
                   .collect("approx.metrics")
                   .threads(2)
                   .run();
  INFO(r.message());
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.log, Catch::Contains("recall@5 against exact search"));
  const Result py = check_python(R"PY(
import sys, json, numpy as np, h5py
from sklearn.neighbors import KNeighborsClassifier
data, d = sys.argv[1], sys.argv[2]
with h5py.File(data) as f:
    g, gy = f["gallery/embedding"][()].astype(np.float64), f["gallery/label"][()]
    q, qy = f["query/embedding"][()].astype(np.float64), f["query/label"][()]
for name, k, weights in (("k5", 5, "uniform"), ("k7d", 7, "distance")):
    got = json.load(open(f"{d}/{name}.json"))
    want = KNeighborsClassifier(n_neighbors=k, weights=weights, algorithm="brute").fit(g, gy).predict(q)
    assert got["predicted"] == want.tolist(), (name, np.flatnonzero(np.array(got["predicted"]) != want))
    assert abs(got["accuracy"] - np.mean(want == qy)) < 1e-12, name
    assert got["index"]["recall"] == 1.0, got["index"]
    print(name + "_accuracy", got["accuracy"])
import faiss
index = faiss.read_index(sys.argv[3])
index.nprobe = 1
_, found = index.search(q.astype(np.float32), 5)
exact = np.argsort(((q[:, None, :] - g[None, :, :]) ** 2).sum(-1), axis=1, kind="stable")[:, :5]
print("recall_approx", repr(np.mean([len(set(found[i]) & set(exact[i])) / 5 for i in range(len(q))])))
)PY", {data().h5, dir.string(), ivf});
  const auto oracle = parse_tagged(py.out);
  REQUIRE(oracle.count("recall_approx"));
  const double recall = scalar(r.records("approx.metrics").at(0), "recall");
  CHECK(recall == Approx(oracle.at("recall_approx").at(0)).margin(1e-12));
  CHECK(recall < 0.99);
}

TEST_CASE("index files: missing, truncated, damaged or mismatched files and impossible parameters are located errors",
          "[eval][index]") {
  const fs::path dir = data().dir / "errors";
  fs::create_directories(dir);
  const std::string good = (dir / "good.faiss").string();
  GraphRun built = GraphRunner(plugins(), "seed: 1\nnodes:\n" + readers() +
                               "  build: {type: eval.index_build, params: {kind: hnsw, M: 8, path: " + good + "}}\n"
                               "edges: [gallery.out -> build.gallery]\n", "build.yaml").run();
  INFO(built.message());
  REQUIRE(built.exit_code == 0);
  auto search = [&](const std::string& params, const std::string& object = "query") {
    return GraphRunner(plugins(), "seed: 1\nnodes:\n"
                       "  query: {type: io.hdf5_reader, params: {path: " + data().h5 + ", object: " + object + ", batch_size: 100}}\n"
                       "  eval:  {type: eval.index_retrieval, params: " + params + "}\n"
                       "edges: [query.out -> eval.query]\n", "search.yaml").run();
  };
  auto copy_of = [&](const std::string& name) {
    const std::string p = (dir / name).string();
    fs::copy_file(good, p, fs::copy_options::overwrite_existing);
    fs::copy_file(good + ".h5", p + ".h5", fs::copy_options::overwrite_existing);
    return p;
  };
  auto expect = [&](const GraphRun& r, int code, const std::vector<std::string>& parts) {
    INFO(r.message());
    CHECK(r.exit_code == code);
    for (const auto& part : parts) CHECK_THAT(r.message(), Catch::Contains(part));
  };
  {
    GraphRun ok = search("{path: " + good + ", bootstrap: 0}");
    INFO(ok.message());
    CHECK(ok.exit_code == 0);
  }
  const std::string missing = (dir / "none.faiss").string();
  expect(search("{path: " + missing + "}"), 1, {"node 'eval'", missing, "does not exist"});

  const std::string lonely = (dir / "lonely.faiss").string();
  fs::copy_file(good, lonely, fs::copy_options::overwrite_existing);
  expect(search("{path: " + lonely + "}"), 1, {lonely + ".h5", "does not exist"});

  const std::string truncated = copy_of("truncated.faiss");
  fs::resize_file(truncated, fs::file_size(truncated) / 2);
  expect(search("{path: " + truncated + "}"), 1, {truncated, "truncated"});

  const std::string damaged = copy_of("damaged.faiss");
  {
    std::fstream f(damaged, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(damaged) / 3));
    f.put('\x5a');
  }
  expect(search("{path: " + damaged + "}"), 1, {damaged, "damaged"});

  const std::string empty = copy_of("empty.faiss");
  fs::resize_file(empty, 0);
  expect(search("{path: " + empty + "}"), 1, {empty, "has 0 bytes", "truncated"});

  const std::string bad_sidecar = copy_of("bad_sidecar.faiss");
  fs::resize_file(bad_sidecar + ".h5", fs::file_size(bad_sidecar + ".h5") / 2);
  expect(search("{path: " + bad_sidecar + "}"), 1, {bad_sidecar + ".h5"});

  expect(search("{path: " + good + "}", "narrow"), 1, {"query embeddings have 8 dims", good, "32-dim"});
  expect(search("{path: " + good + ", metric: cosine}"), 2, {good, "ranks by euclidean", "metric is cosine"});

  // The index comes from exactly one place.
  GraphRun neither = search("{bootstrap: 0}");
  CHECK(neither.exit_code == 2);
  CHECK_THAT(neither.problem_text(), Catch::Contains("needs an index: set path or connect the index port"));

  // A gallery too small for the cells asked for, and a sub-quantiser count that does not divide D.
  auto build = [&](const std::string& params) {
    return GraphRunner(plugins(), "seed: 1\nnodes:\n"
                       "  narrow: {type: io.hdf5_reader, params: {path: " + data().h5 + ", object: narrow, batch_size: 10}}\n"
                       "  build:  {type: eval.index_build, params: " + params + "}\n"
                       "edges: [narrow.out -> build.gallery]\n", "build.yaml").run();
  };
  expect(build("{kind: ivf, nlist: 64}"), 2, {"node 'build'", "nlist = 64 is larger than the gallery (50 rows)"});
  expect(build("{kind: ivf_pq, nlist: 4, nprobe: 2, pq_m: 3}"), 2, {"pq_m = 3 does not divide the embedding dimension 8"});
  expect(build("{kind: ivf_pq, nlist: 4, nprobe: 2, pq_m: 4, pq_nbits: 8}"), 2, {"pq_nbits = 8 needs 256 training rows"});
  expect(build("{kind: ivf, nlist: 4, nprobe: 9}"), 2, {"nprobe = 9 is larger than nlist = 4"});
}

namespace {

// Caps the process's address space for one scope: a damaged size field makes faiss's reader
// allocate (and zero) as much as it says before the read runs short, and this test flips such
// fields on purpose. Under the cap those allocations fail as std::bad_alloc, which from_bytes
// reports as a DataError, instead of zeroing gigabytes. (Index files never reach faiss damaged:
// their size and CRC-32 are checked first.)
class AddressSpaceCap {
 public:
  explicit AddressSpaceCap(std::size_t headroom) {
    getrlimit(RLIMIT_AS, &old_);
    std::ifstream statm("/proc/self/statm");
    std::size_t pages = 0;
    statm >> pages;
    rlimit cap = old_;
    cap.rlim_cur = pages * static_cast<std::size_t>(sysconf(_SC_PAGESIZE)) + headroom;
    setrlimit(RLIMIT_AS, &cap);
  }
  ~AddressSpaceCap() { setrlimit(RLIMIT_AS, &old_); }

 private:
  rlimit old_{};
};

}  // namespace

TEST_CASE("damaged index bytes are DataErrors or load and search; they never crash", "[eval][index]") {
  const std::int64_t rows = 400, dim = 16;
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<std::size_t>(rows * dim));
  for (auto& v : x) v = normal(rng);
  const embedflow::MatrixView g{x.data(), rows, dim};
  for (auto kind : {ec::AnnKind::flat, ec::AnnKind::ivf, ec::AnnKind::hnsw, ec::AnnKind::ivf_pq}) {
    ec::AnnSpec spec;
    spec.kind = kind;
    spec.nlist = 8;
    spec.nprobe = 2;
    spec.hnsw_m = 8;
    spec.pq_m = 4;
    spec.pq_nbits = 4;
    const std::vector<std::uint8_t> bytes = ec::AnnIndex::build(spec, g, 1).to_bytes();
    INFO(ec::ann_kind_name(kind) << ", " << bytes.size() << " bytes");
    // True when the bytes loaded (and then searched without fault); false on a DataError. Any
    // other exception fails the test, and a crash ends it.
    auto loads = [&](std::vector<std::uint8_t> b) {
      try {
        const ec::AnnIndex index = ec::AnnIndex::from_bytes(std::move(b), ec::AnnMetric::euclidean, "test bytes");
        std::vector<std::int64_t> ids;
        std::vector<float> scores;
        index.search(embedflow::MatrixView{x.data(), 4, dim}, 5, {}, 1, ids, scores);
        for (auto id : ids) CHECK(id < index.rows());
        return true;
      } catch (const embedflow::DataError&) {
        return false;
      }
    };
    CHECK(loads(bytes));
    const AddressSpaceCap cap(std::size_t{256} << 20);
    int truncations = 0, truncations_loaded = 0;
    for (std::size_t cut = 0; cut < bytes.size(); cut += std::max<std::size_t>(1, bytes.size() / 60), ++truncations)
      truncations_loaded += loads(std::vector<std::uint8_t>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(cut)));
    CHECK(truncations >= 60);
    CHECK(truncations_loaded == 0);
    // Header and structure bytes are the ones worth damaging: the first KiB, then anywhere.
    int flipped_loaded = 0;
    for (int trial = 0; trial < 100; ++trial) {
      std::vector<std::uint8_t> b = bytes;
      const std::size_t span = trial < 60 ? std::min<std::size_t>(1024, b.size()) : b.size();
      b[rng() % span] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
      flipped_loaded += loads(std::move(b));
    }
    // Flips in float data load (the CRC-32 of an index file catches those); in the structure they do not.
    CHECK(flipped_loaded > 0);
    CHECK(flipped_loaded < 100);
  }
}
