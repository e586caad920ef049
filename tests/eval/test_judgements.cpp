// Triplet and pair judgements: file readers (with located errors), agreement counting,
// threshold calibration; and the synthetic re-id generator's HDF5 output read back by h5py.
#include <catch2/catch.hpp>

#include "cli.hpp"
#include "judgements.hpp"

using namespace embedflow::evalcore;
using embedflow::MatrixView;
namespace et = embedflow::test;

TEST_CASE("Wang et al. triplet file and CSV triplets", "[eval][judgements]") {
  const auto dir = et::scratch_dir("eval_judgements");
  et::write_file(dir / "wang.txt", "red shoes\nq1\np1\nn1\n\nblue car\nq2\np2\nn2\n");
  const auto w = read_wang_triplets((dir / "wang.txt").string());
  REQUIRE(w.size() == 2);
  CHECK(w[1].query == "q2");
  CHECK(w[1].positive == "p2");
  CHECK(w[1].negative == "n2");
  CHECK(w[1].line == 6);
  et::write_file(dir / "short.txt", "text\nq\np\nn\ntext2\nq2\n");
  CHECK_THROWS_WITH(read_wang_triplets((dir / "short.txt").string()),
                    Catch::Contains("short.txt:5") && Catch::Contains("incomplete triplet"));
  et::write_file(dir / "t.csv", "query,positive,negative\na,b,c\nd,e\n");
  CHECK_THROWS_WITH(read_triplet_csv((dir / "t.csv").string()), Catch::Contains("t.csv:3") && Catch::Contains("3 columns"));
  CHECK_THROWS_WITH(read_pair_csv((dir / "missing.csv").string()), Catch::Contains("cannot open") && Catch::Contains("missing.csv"));
  et::write_file(dir / "p.csv", "a,b,similar\nx,y,2\n");
  CHECK_THROWS_WITH(read_pair_csv((dir / "p.csv").string()), Catch::Contains("p.csv:2") && Catch::Contains("0 or 1"));
  // Header, comments and blank lines only: no data.
  et::write_file(dir / "empty.csv", "a,b,similar\n# nothing yet\n\n");
  CHECK_THROWS_WITH(read_pair_csv((dir / "empty.csv").string()), Catch::Contains("empty.csv: no pairs"));
  et::write_file(dir / "ok.csv", "a,b,similar\n# a comment\n x , y ,1\nx,z,0\n");
  const auto pairs = read_pair_csv((dir / "ok.csv").string());
  REQUIRE(pairs.size() == 2);
  CHECK(pairs[0].a == "x");
  CHECK(pairs[0].b == "y");
  CHECK(pairs[0].similar);
  CHECK(pairs[0].line == 3);
  CHECK_FALSE(pairs[1].similar);
  // Ids holding commas are quoted, as any CSV writer does.
  et::write_file(dir / "quoted.csv", "a,b,similar\n\"img,1\",\"img \"\"2\"\"\",1\n");
  const auto quoted = read_pair_csv((dir / "quoted.csv").string());
  REQUIRE(quoted.size() == 1);
  CHECK(quoted[0].a == "img,1");
  CHECK(quoted[0].b == "img \"2\"");
  CHECK(index_ids({"a", "b"}).at("b") == 1);
  CHECK_THROWS_WITH(index_ids({"a", "b", "a"}), Catch::Contains("id 'a' arrives twice"));
}

TEST_CASE("triplet agreement and pair threshold by hand", "[eval][judgements]") {
  // 1-d points: a=0, b=1, c=3, d=3 (tie partner).
  const std::vector<float> f{0, 1, 3, 3};
  const IdIndex ids{{"a", 0}, {"b", 1}, {"c", 2}, {"d", 3}};
  const MatrixView m{f.data(), 4, 1};
  const std::vector<Triplet> t{{"a", "b", "c"}, {"a", "c", "b"}, {"a", "c", "d"}, {"a", "zz", "b"}};
  const auto s = score_triplets(t, ids, m, {DistanceKind::euclidean});
  CHECK(s.total == 4);
  CHECK(s.evaluated == 3);
  CHECK(s.agree == 1);
  CHECK(s.ties == 1);
  CHECK(s.missing == 1);
  CHECK(s.first_missing == "zz");
  CHECK(s.accuracy() == Approx(1.0 / 3));

  // Distances: (a,b)=1 similar, (a,c)=3 dissimilar, (b,c)=2 similar, (c,d)=0 similar.
  const std::vector<Pair> pairs{{"a", "b", true}, {"a", "c", false}, {"b", "c", true}, {"c", "d", true}};
  const auto pd = pair_distances(pairs, ids, m, {DistanceKind::euclidean});
  const double t_best = calibrate_threshold(pd);
  CHECK(t_best == Approx(2.5));  // between 2 (similar) and 3 (dissimilar): all 4 right
  const auto ps = score_pairs(pd, t_best);
  CHECK(ps.accuracy() == Approx(1.0));
  const auto fixed = score_pairs(pd, 0.5);  // only (c,d) predicted similar
  CHECK(fixed.tp == 1);
  CHECK(fixed.fn == 2);
  CHECK(fixed.tn == 1);
  CHECK(fixed.accuracy() == Approx(0.5));
}

TEST_CASE("gen_reid_features writes splits h5py can read, with disjoint identities", "[eval][generator]") {
  const auto dir = et::scratch_dir("eval_generator");
  const auto h5 = (dir / "reid.h5").string();
  const auto r = et::run_process({GEN_REID_FEATURES, "--out", h5, "--dim", "32", "--identities", "20", "--test-identities",
                                  "10", "--per-camera", "3", "--triplets", (dir / "t.csv").string(), "--judgements", "50"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto py = et::run_python(R"PY(
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], 'r')
tr, q, g = f['train'], f['query'], f['gallery']
assert tr['embedding'].shape == (20 * 2 * 3, 32), tr['embedding'].shape
assert q['embedding'].shape == (10 * 2, 32) and g['embedding'].shape == (10 * 2 * 2, 32)
assert tr['embedding'].dtype == np.float32 and q['label'].dtype == np.int64
assert set(tr['label'][:]).isdisjoint(set(q['label'][:]))
assert set(q['label'][:]) == set(g['label'][:])
assert set(q['camera'][:]) == {0, 1}
assert (tr['embedding'][:] > 0).all()  # softplus: non-negative
ids = np.concatenate([tr['id'][:], q['id'][:], g['id'][:]])
assert len(set(ids)) == len(ids)
# The camera shift is real: same-identity cross-camera means differ.
x, l, c = g['embedding'][:], g['label'][:], g['camera'][:]
print('shift', np.linalg.norm(x[c == 0].mean(0) - x[c == 1].mean(0)))
)PY",
                                 {h5});
  INFO(py.err);
  REQUIRE(py.exit_code == 0);
  CHECK(py.out.find("shift") != std::string::npos);
  const auto bad = et::run_process({GEN_REID_FEATURES, "--dim", "x"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("--dim needs an integer") != std::string::npos);
  CHECK(et::read_file(dir / "t.csv").rfind("query,positive,negative\n", 0) == 0);
}
