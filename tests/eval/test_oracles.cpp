// Independent oracles run in Debian's python3: scikit-learn's NearestNeighbors ranks, a direct
// numpy transcription of torchreid's eval_market1501 rule (CMC and mAP with same-id-same-camera
// removal), the Market-1501 trapezoid AP, and scikit-learn's NMI / AMI.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>

#include "cli.hpp"
#include "clustering.hpp"
#include "eval_test_util.hpp"

using namespace evaltest;
namespace et = embedflow::test;

namespace {

void write_matrix(const std::filesystem::path& p, const std::vector<float>& m, std::int64_t cols) {
  std::ofstream out(p);
  out.precision(9);
  for (std::size_t i = 0; i < m.size(); ++i) out << m[i] << ((i + 1) % static_cast<std::size_t>(cols) ? ' ' : '\n');
}
template <class T>
void write_vector(const std::filesystem::path& p, const std::vector<T>& v) {
  std::ofstream out(p);
  for (auto x : v) out << x << '\n';
}

const char* kOracle = R"PY(
import sys, numpy as np
from sklearn.neighbors import NearestNeighbors
from sklearn.metrics import normalized_mutual_info_score, adjusted_mutual_info_score
d = sys.argv[1]
q = np.loadtxt(d + '/q.txt'); g = np.loadtxt(d + '/g.txt')
qp = np.loadtxt(d + '/qp.txt', dtype=np.int64); gp = np.loadtxt(d + '/gp.txt', dtype=np.int64)
qc = np.loadtxt(d + '/qc.txt', dtype=np.int64); gc = np.loadtxt(d + '/gc.txt', dtype=np.int64)
for metric in ['euclidean', 'manhattan', 'cosine']:
    nn = NearestNeighbors(n_neighbors=10, metric=metric, algorithm='brute').fit(g)
    _, idx = nn.kneighbors(q)
    print('knn_' + metric, ' '.join(str(i) for i in idx.ravel()))

def eval_market1501(distmat, q_pids, g_pids, q_camids, g_camids, max_rank):
    # torchreid.metrics.rank.eval_market1501, transcribed (numpy path).
    num_q, num_g = distmat.shape
    indices = np.argsort(distmat, axis=1, kind='stable')
    matches = (g_pids[indices] == q_pids[:, np.newaxis]).astype(np.int32)
    all_cmc, all_AP, all_trap = [], [], []
    num_valid_q = 0.
    for q_idx in range(num_q):
        order = indices[q_idx]
        remove = (g_pids[order] == q_pids[q_idx]) & (g_camids[order] == q_camids[q_idx])
        keep = np.invert(remove)
        raw_cmc = matches[q_idx][keep]
        if not np.any(raw_cmc):
            continue
        cmc = raw_cmc.cumsum()
        cmc[cmc > 1] = 1
        all_cmc.append(cmc[:max_rank])
        num_valid_q += 1.
        num_rel = raw_cmc.sum()
        tmp_cmc = raw_cmc.cumsum()
        tmp_cmc = [x / (i + 1.) for i, x in enumerate(tmp_cmc)]
        tmp_cmc = np.asarray(tmp_cmc) * raw_cmc
        all_AP.append(tmp_cmc.sum() / num_rel)
        # Market-1501 evaluation script's compute_mAP (trapezoid), on the same kept list.
        rows_good = np.flatnonzero(raw_cmc)
        ap = 0.
        for i in range(len(rows_good)):
            precision = (i + 1.) / (rows_good[i] + 1)
            old_precision = i / rows_good[i] if rows_good[i] != 0 else 1.0
            ap += (1. / len(rows_good)) * (old_precision + precision) / 2
        all_trap.append(ap)
    all_cmc = np.asarray(all_cmc).astype(np.float64).sum(0) / num_valid_q
    return all_cmc, np.mean(all_AP), np.mean(all_trap), num_valid_q

dist = ((q[:, None, :] - g[None, :, :]) ** 2).sum(-1)
cmc, mAP, trap, nvalid = eval_market1501(dist, qp, gp, qc, gc, 50)
print('cmc', ' '.join(repr(x) for x in cmc))
print('map', repr(mAP))
print('trap', repr(trap))
print('valid', nvalid)
a = np.loadtxt(d + '/ca.txt', dtype=np.int64); b = np.loadtxt(d + '/cb.txt', dtype=np.int64)
print('nmi', repr(normalized_mutual_info_score(a, b)))
print('ami', repr(adjusted_mutual_info_score(a, b)))
)PY";

}  // namespace

TEST_CASE("oracles: sklearn kNN ranks, torchreid market1501 rule, sklearn NMI/AMI", "[eval][oracle]") {
  const std::int64_t nq = 300, ng = 1500, dim = 32;
  const auto q = random_matrix(nq, dim, 101), g = random_matrix(ng, dim, 102);
  // Correlate identities with position so ranks are not pure noise: shift each row by its id.
  auto qp = random_labels(nq, 120, 103), gp = random_labels(ng, 100, 104);
  auto qv = q, gv = g;
  for (std::int64_t i = 0; i < nq; ++i) qv[static_cast<std::size_t>(i * dim + qp[static_cast<std::size_t>(i)] % dim)] += 4.0f;
  for (std::int64_t j = 0; j < ng; ++j) gv[static_cast<std::size_t>(j * dim + gp[static_cast<std::size_t>(j)] % dim)] += 4.0f;
  const auto qc = random_labels(nq, 2, 105), gc = random_labels(ng, 2, 106);
  const auto ca = random_labels(500, 7, 107);
  auto cb = ca;
  std::mt19937_64 rng(108);
  for (auto& v : cb)
    if (rng() % 3 == 0) v = static_cast<std::int64_t>(rng() % 9);

  const auto dir = et::scratch_dir("eval_oracles");
  write_matrix(dir / "q.txt", qv, dim);
  write_matrix(dir / "g.txt", gv, dim);
  write_vector(dir / "qp.txt", qp);
  write_vector(dir / "gp.txt", gp);
  write_vector(dir / "qc.txt", qc);
  write_vector(dir / "gc.txt", gc);
  write_vector(dir / "ca.txt", ca);
  write_vector(dir / "cb.txt", cb);
  const auto res = et::run_python(kOracle, {dir.string()});
  INFO(res.err);
  REQUIRE(res.exit_code == 0);
  auto oracle = et::parse_tagged(res.out);

  // The text round trip is exact (9 significant digits), so re-read what python saw.
  const MatrixView Q{qv.data(), nq, dim}, G{gv.data(), ng, dim};
  for (const char* metric : {"euclidean", "manhattan", "cosine"}) {
    BlockScorer scorer({parse_distance(metric)}, Q, G);
    std::vector<std::int64_t> idx;
    std::vector<float> sc;
    knn_search(scorer, 10, false, 64, 256, 2, idx, sc);
    const auto& want = oracle[std::string("knn_") + metric];
    REQUIRE(want.size() == idx.size());
    std::size_t same = 0;
    for (std::size_t i = 0; i < idx.size(); ++i) same += static_cast<double>(idx[i]) == want[i];
    INFO(metric << ": " << same << " of " << idx.size() << " neighbours agree");
    CHECK(same == idx.size());
  }

  RetrievalOptions opt;
  opt.max_rank = 50;
  opt.query_block = 64;
  opt.gallery_block = 500;
  BlockScorer scorer({DistanceKind::sqeuclidean}, Q, G);
  const auto r = evaluate_retrieval(scorer, {qp.data(), gp.data(), qc.data(), gc.data()}, opt);
  REQUIRE(oracle["valid"].size() == 1);
  CHECK(static_cast<double>(r.summary.evaluated) == oracle["valid"][0]);
  CHECK(r.summary.no_match == nq - r.summary.evaluated);
  CHECK(r.summary.no_match > 0);  // some query ids (up to 119) are absent from the gallery (up to 99)
  REQUIRE(oracle["cmc"].size() == 50);
  for (std::size_t k = 0; k < 50; ++k) CHECK(r.summary.cmc[k] == Approx(oracle["cmc"][k]).margin(1e-12));
  CHECK(r.summary.map == Approx(oracle["map"][0]).epsilon(1e-10));
  CHECK(r.summary.map_trapezoid == Approx(oracle["trap"][0]).epsilon(1e-10));
  CHECK(r.summary.map > 0.05);  // the id shift makes this a non-trivial ranking

  using namespace embedflow::evalcore;
  CHECK(normalized_mutual_information(ca, cb) == Approx(oracle["nmi"][0]).epsilon(1e-9));
  CHECK(adjusted_mutual_information(ca, cb) == Approx(oracle["ami"][0]).epsilon(1e-7));
}
