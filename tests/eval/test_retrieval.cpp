// Retrieval metrics: hand-computed tiny cases, exclusion rules, blocked == unblocked, ties,
// single-shot and bootstrap behaviour.
#include <catch2/catch.hpp>

#include "eval_test_util.hpp"

using namespace evaltest;

TEST_CASE("metrics from positive ranks, by hand", "[eval][retrieval]") {
  const QueryOutcome o = outcome_from_ranks({1, 3, 6});
  CHECK(o.first_rank == 1);
  CHECK(o.ap == Approx((1.0 + 2.0 / 3 + 3.0 / 6) / 3));
  // Market-1501 trapezoid: (1+1)/2, (1/2 + 2/3)/2, (2/5 + 1/2)/2, each weighted 1/3.
  CHECK(o.ap_trapezoid == Approx((1.0 + (0.5 + 2.0 / 3) / 2 + (0.4 + 0.5) / 2) / 3));
  CHECK(o.r_precision == Approx(2.0 / 3));
  CHECK(o.map_at_r == Approx((1.0 + 2.0 / 3) / 3));
  CHECK(o.reciprocal_rank == Approx(1.0));
  const QueryOutcome late = outcome_from_ranks({4});
  CHECK(late.ap == Approx(0.25));
  CHECK(late.ap_trapezoid == Approx((0.0 + 0.25) / 2));
  CHECK(late.r_precision == 0);
  CHECK(late.reciprocal_rank == Approx(0.25));
  CHECK(outcome_from_ranks({}).status == QueryOutcome::Status::no_match);
}

namespace {
// 1-d tiny case: query 0 at 0.0 (id 1, cam 0); query 1 has an identity absent from the gallery;
// query 2 is junk.
const std::vector<float> kQuery{0.0f, 10.0f, 5.0f};
const std::vector<std::int64_t> kQueryLabel{1, 4, -1}, kQueryCam{0, 0, 0};
const std::vector<float> kGallery{0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};
const std::vector<std::int64_t> kGalleryLabel{2, 1, 1, -1, 3, 1}, kGalleryCam{1, 0, 1, 1, 0, 1};
}  // namespace

TEST_CASE("tiny re-id case with all exclusion rules, by hand", "[eval][retrieval]") {
  BlockScorer scorer({DistanceKind::euclidean}, {kQuery.data(), 3, 1}, {kGallery.data(), 6, 1});
  RetrievalLabels L{kQueryLabel.data(), kGalleryLabel.data(), kQueryCam.data(), kGalleryCam.data()};
  RetrievalOptions opt;
  opt.max_rank = 5;
  opt.keep_top = 3;
  SECTION("same identity + same camera excluded, junk excluded") {
    const auto r = evaluate_retrieval(scorer, L, opt);
    // Valid list for query 0: g0 (other id), g2 (match), g4 (other), g5 (match): ranks {2, 4}.
    const auto& q = r.queries[0];
    REQUIRE(q.status == QueryOutcome::Status::ok);
    CHECK(q.positives == 2);
    CHECK(q.first_rank == 2);
    CHECK(q.ap == Approx((0.5 + 0.5) / 2));
    CHECK(q.ap_trapezoid == Approx(((0.0 + 0.5) / 2 + (1.0 / 3 + 0.5) / 2) / 2));
    CHECK(q.r_precision == Approx(0.5));
    CHECK(q.map_at_r == Approx(0.25));
    CHECK(q.reciprocal_rank == Approx(0.5));
    CHECK(r.queries[1].status == QueryOutcome::Status::no_match);
    CHECK(r.queries[2].status == QueryOutcome::Status::junk_query);
    CHECK(r.summary.evaluated == 1);
    CHECK(r.summary.no_match == 1);
    CHECK(r.summary.junk_queries == 1);
    CHECK(r.summary.cmc == std::vector<double>{0, 1, 1, 1, 1});
    CHECK(r.summary.map == Approx(0.5));
    // Rank list skips g1 (same id, same camera) and g3 (junk).
    CHECK(std::vector<std::int64_t>(r.top_index.begin(), r.top_index.begin() + 3) == std::vector<std::int64_t>{0, 2, 4});
    CHECK(r.top_score[1] == Approx(0.09f));
    CHECK(r.summary.tolerance_violations == 0);
  }
  SECTION("without cameras the same-camera match counts") {
    RetrievalLabels no_cam{kQueryLabel.data(), kGalleryLabel.data()};
    const auto r = evaluate_retrieval(scorer, no_cam, opt);
    CHECK(r.queries[0].first_rank == 2);
    CHECK(r.queries[0].positives == 3);
    CHECK(r.queries[0].ap == Approx((1.0 / 2 + 2.0 / 3 + 3.0 / 5) / 3));
  }
}

TEST_CASE("self-retrieval drops the query itself", "[eval][retrieval]") {
  const std::vector<float> x{0.0f, 1.0f, 1.1f, 5.0f};
  const std::vector<std::int64_t> y{7, 7, 8, 8};
  BlockScorer scorer({DistanceKind::sqeuclidean}, {x.data(), 4, 1}, {x.data(), 4, 1});
  RetrievalOptions opt;
  opt.exclude_self = true;
  opt.max_rank = 3;
  const auto r = evaluate_retrieval(scorer, {y.data(), y.data()}, opt);
  // Item 0: 1(7) first -> rank 1. Item 1: 2(8), 0(7) -> rank 2. Item 2: 1(7), 0(7), 3(8) -> rank 3.
  // Item 3: 2(8) at 3.9 first -> rank 1.
  CHECK(r.queries[0].first_rank == 1);
  CHECK(r.queries[1].first_rank == 2);
  CHECK(r.queries[2].first_rank == 3);
  CHECK(r.queries[3].first_rank == 1);
  CHECK(r.summary.cmc[0] == Approx(0.5));
  CHECK(r.summary.mrr == Approx((1 + 0.5 + 1.0 / 3 + 1) / 4));
}

TEST_CASE("blocked results equal the unblocked reference for every measure", "[eval][retrieval]") {
  const std::int64_t nq = 120, ng = 400, dim = 24;
  const auto q = random_matrix(nq, dim, 11, true), g = random_matrix(ng, dim, 12, true);
  auto ql = random_labels(nq, 40, 13), gl = random_labels(ng, 40, 14);
  const auto qc = random_labels(nq, 2, 15), gc = random_labels(ng, 2, 16);
  gl[3] = gl[50] = -1;  // junk gallery items
  ql[5] = -1;           // a junk query
  const RetrievalLabels L{ql.data(), gl.data(), qc.data(), gc.data()};
  for (const auto& name : distance_names()) {
    DYNAMIC_SECTION(name) {
      const DistanceSpec spec{parse_distance(name), 0.02};
      BlockScorer scorer(spec, {q.data(), nq, dim}, {g.data(), ng, dim});
      RetrievalOptions small, whole;
      small.query_block = 7, small.gallery_block = 13, small.threads = 2;
      whole.query_block = whole.gallery_block = 100000;
      const auto a = evaluate_retrieval(scorer, L, small), b = evaluate_retrieval(scorer, L, whole);
      const auto ref = reference_outcomes(spec, {q.data(), nq, dim}, {g.data(), ng, dim}, L, small);
      REQUIRE(a.summary.tolerance_violations == 0);
      for (std::int64_t i = 0; i < nq; ++i) {
        const auto &x = a.queries[static_cast<std::size_t>(i)], &y = b.queries[static_cast<std::size_t>(i)],
                   &z = ref[static_cast<std::size_t>(i)];
        INFO("query " << i);
        REQUIRE(x.status == y.status);
        REQUIRE(x.status == z.status);
        CHECK(x.first_rank == y.first_rank);
        CHECK(x.first_rank == z.first_rank);
        CHECK(x.ap == y.ap);
        CHECK(x.ap == Approx(z.ap).epsilon(1e-12));
      }
      CHECK(a.summary.map == b.summary.map);
      CHECK(a.summary.cmc == b.summary.cmc);
    }
  }
}

TEST_CASE("exact ties are broken by gallery index, like a stable argsort", "[eval][retrieval]") {
  // Small integer features: every score is exact in float and double, so many items tie.
  const std::int64_t nq = 40, ng = 150, dim = 3;
  const auto q = random_matrix(nq, dim, 21, false, true), g = random_matrix(ng, dim, 22, false, true);
  const auto ql = random_labels(nq, 6, 23), gl = random_labels(ng, 6, 24);
  const RetrievalLabels L{ql.data(), gl.data()};
  for (auto kind : {DistanceKind::manhattan, DistanceKind::sqeuclidean}) {
    BlockScorer scorer({kind}, {q.data(), nq, dim}, {g.data(), ng, dim});
    RetrievalOptions opt;
    opt.gallery_block = 17;
    const auto r = evaluate_retrieval(scorer, L, opt);
    const auto ref = reference_outcomes({kind}, {q.data(), nq, dim}, {g.data(), ng, dim}, L, opt);
    for (std::size_t i = 0; i < ref.size(); ++i) {
      INFO("query " << i);
      CHECK(r.queries[i].first_rank == ref[i].first_rank);
      CHECK(r.queries[i].ap == Approx(ref[i].ap).epsilon(1e-12));
    }
  }
}

TEST_CASE("single-gallery-shot CMC is seeded and ranks among one item per identity", "[eval][retrieval]") {
  const std::int64_t nq = 60, ng = 300, dim = 8, ids = 30;
  const auto q = random_matrix(nq, dim, 31), g = random_matrix(ng, dim, 32);
  const auto ql = random_labels(nq, ids, 33), gl = random_labels(ng, ids, 34);
  BlockScorer scorer({DistanceKind::euclidean}, {q.data(), nq, dim}, {g.data(), ng, dim});
  RetrievalOptions opt;
  opt.single_shot_repeats = 10;
  opt.seed = 5;
  opt.max_rank = static_cast<int>(ids);
  const auto a = evaluate_retrieval(scorer, {ql.data(), gl.data()}, opt);
  const auto b = evaluate_retrieval(scorer, {ql.data(), gl.data()}, opt);
  REQUIRE(a.summary.single_shot_cmc.size() == static_cast<std::size_t>(ids));
  CHECK(a.summary.single_shot_cmc == b.summary.single_shot_cmc);
  for (const auto& o : a.queries)
    for (auto r : o.single_shot_ranks) {
      CHECK(r >= 1);
      CHECK(r <= ids);  // one candidate per identity
    }
  CHECK(a.summary.single_shot_cmc.back() == Approx(1.0));
  // Multi-shot keeps ~10 items per identity, so its rank-30 is well below 1 on random data.
  CHECK(a.summary.cmc.back() < 1.0);
  opt.seed = 6;
  const auto c = evaluate_retrieval(scorer, {ql.data(), gl.data()}, opt);
  CHECK(c.summary.single_shot_cmc != a.summary.single_shot_cmc);
  CHECK(c.summary.map == a.summary.map);  // AP always uses the full gallery
}

TEST_CASE("single-shot ranks match a direct computation", "[eval][retrieval]") {
  // With one gallery item per identity already, single-shot sampling has no choice to make, so
  // its ranks must equal the multi-shot first-match ranks exactly.
  const std::int64_t nq = 50, ng = 40, dim = 6;
  const auto q = random_matrix(nq, dim, 41), g = random_matrix(ng, dim, 42);
  std::vector<std::int64_t> gl(ng);
  for (std::int64_t j = 0; j < ng; ++j) gl[static_cast<std::size_t>(j)] = j;
  const auto ql = random_labels(nq, ng, 43);
  BlockScorer scorer({DistanceKind::cosine}, {q.data(), nq, dim}, {g.data(), ng, dim});
  RetrievalOptions opt;
  opt.single_shot_repeats = 3;
  opt.gallery_block = 9;
  const auto r = evaluate_retrieval(scorer, {ql.data(), gl.data()}, opt);
  for (const auto& o : r.queries)
    for (auto rank : o.single_shot_ranks) CHECK(rank == o.first_rank);
  REQUIRE(r.summary.single_shot_cmc.size() == r.summary.cmc.size());
  for (std::size_t k = 0; k < r.summary.cmc.size(); ++k) CHECK(r.summary.single_shot_cmc[k] == Approx(r.summary.cmc[k]));
}

TEST_CASE("bootstrap intervals bracket the point estimate and narrow with more queries", "[eval][retrieval]") {
  auto run = [](std::int64_t nq) {
    const std::int64_t ng = 200, dim = 8;
    const auto q = random_matrix(nq, dim, 51), g = random_matrix(ng, dim, 52);
    const auto ql = random_labels(nq, 20, 53), gl = random_labels(ng, 20, 54);
    BlockScorer scorer({DistanceKind::euclidean}, {q.data(), nq, dim}, {g.data(), ng, dim});
    RetrievalOptions opt;
    opt.bootstrap = 300;
    opt.seed = 9;
    return evaluate_retrieval(scorer, {ql.data(), gl.data()}, opt).summary;
  };
  const auto small = run(50), large = run(800);
  for (const auto& s : {small, large}) {
    REQUIRE(s.ci.count("mAP"));
    CHECK(s.ci.at("mAP").low <= s.map);
    CHECK(s.ci.at("mAP").high >= s.map);
    CHECK(s.ci.at("rank-1").low <= s.cmc[0]);
    CHECK(s.ci.at("rank-1").high >= s.cmc[0]);
  }
  CHECK(large.ci.at("mAP").high - large.ci.at("mAP").low < small.ci.at("mAP").high - small.ci.at("mAP").low);
}

TEST_CASE("knn_search returns sorted neighbours and skips self", "[eval][retrieval]") {
  const std::vector<float> x{0, 3, 1, 10, 2.5f};
  BlockScorer scorer({DistanceKind::euclidean}, {x.data(), 5, 1}, {x.data(), 5, 1});
  std::vector<std::int64_t> idx;
  std::vector<float> sc;
  knn_search(scorer, 2, true, 2, 2, 1, idx, sc);
  CHECK(std::vector<std::int64_t>(idx.begin(), idx.begin() + 2) == std::vector<std::int64_t>{2, 4});  // from 0
  CHECK(std::vector<std::int64_t>(idx.begin() + 2, idx.begin() + 4) == std::vector<std::int64_t>{4, 2});  // from 3
  CHECK(sc[0] == Approx(1.0f));
  knn_search(scorer, 6, true, 8, 8, 1, idx, sc);
  CHECK(idx[3] != -1);
  CHECK(idx[4] == -1);  // only 4 others exist
  CHECK(idx[5] == -1);
}

TEST_CASE("the dense and the rescoring exact passes rank alike, and as the double-precision reference", "[eval][retrieval]") {
  // Dense positives (6 labels): the case the dense pass is for. Cameras, junk items, a junk
  // query, groups, single-shot repeats and a top list all go through both passes; integer
  // features make many exact ties, which both must break by gallery index.
  const std::int64_t nq = 90, ng = 260, dim = 5;
  for (bool integers : {false, true}) {
    const auto q = random_matrix(nq, dim, 51, true, integers), g = random_matrix(ng, dim, 52, true, integers);
    auto ql = random_labels(nq, 6, 53), gl = random_labels(ng, 6, 54);
    const auto qc = random_labels(nq, 2, 55), gc = random_labels(ng, 2, 56);
    const auto qg = random_labels(nq, 3, 57), gg = random_labels(ng, 3, 58);
    gl[4] = gl[99] = -1;
    ql[7] = -1;
    for (auto kind : {DistanceKind::sqeuclidean, DistanceKind::euclidean, DistanceKind::cosine}) {
      DYNAMIC_SECTION(distance_name(kind) << (integers ? " integers" : " reals")) {
        BlockScorer scorer({kind}, {q.data(), nq, dim}, {g.data(), ng, dim});
        REQUIRE(scorer.has_exact_blocks());
        RetrievalOptions rescore, dense;
        rescore.exact_pass = RetrievalOptions::ExactPass::rescore;
        dense.exact_pass = RetrievalOptions::ExactPass::dense;
        for (RetrievalOptions* o : {&rescore, &dense}) {
          o->query_block = 11, o->gallery_block = 37, o->threads = 2;
          o->single_shot_repeats = 4, o->seed = 9, o->keep_top = 5;
        }
        const RetrievalLabels cameras{ql.data(), gl.data(), qc.data(), gc.data()};
        const auto a = evaluate_retrieval(scorer, cameras, rescore), b = evaluate_retrieval(scorer, cameras, dense);
        const auto ref = reference_outcomes({kind}, {q.data(), nq, dim}, {g.data(), ng, dim}, cameras, dense);
        CHECK_FALSE(a.summary.dense_exact);
        CHECK(b.summary.dense_exact);
        CHECK(b.summary.exact_negatives == 0);
        for (std::int64_t i = 0; i < nq; ++i) {
          const auto &x = a.queries[static_cast<std::size_t>(i)], &y = b.queries[static_cast<std::size_t>(i)],
                     &z = ref[static_cast<std::size_t>(i)];
          INFO("query " << i);
          REQUIRE(y.status == x.status);
          REQUIRE(y.status == z.status);
          // Integer rows that are multiples of each other have equal cosines, which double
          // rounding splits one way in exact() (1 - x.y a b, both passes) and another in
          // pair_score (the reference): compare those ties between the passes only.
          if (!(integers && kind == DistanceKind::cosine)) {
            CHECK(y.first_rank == z.first_rank);
            CHECK(y.ap == Approx(z.ap).epsilon(1e-12));
          }
          CHECK(y.first_rank == x.first_rank);
          CHECK(y.ap == Approx(x.ap).epsilon(1e-12));
          CHECK(y.single_shot_ranks == x.single_shot_ranks);
        }
        // The top lists rank by float scores: the rescoring pass's come from float unit rows,
        // which split those equal cosines by rounding too.
        if (!(integers && kind == DistanceKind::cosine)) CHECK(b.top_index == a.top_index);
        CHECK(b.summary.cmc == a.summary.cmc);
        CHECK(b.summary.single_shot_cmc == a.summary.single_shot_cmc);

        // Groups: another group's items rank after all of the query's group.
        const RetrievalLabels grouped{ql.data(), gl.data(), nullptr, nullptr, qg.data(), gg.data()};
        const auto c = evaluate_retrieval(scorer, grouped, rescore), d = evaluate_retrieval(scorer, grouped, dense);
        for (std::int64_t i = 0; i < nq; ++i) {
          INFO("grouped query " << i);
          CHECK(d.queries[static_cast<std::size_t>(i)].first_rank == c.queries[static_cast<std::size_t>(i)].first_rank);
          CHECK(d.queries[static_cast<std::size_t>(i)].ap == Approx(c.queries[static_cast<std::size_t>(i)].ap).epsilon(1e-12));
        }
      }
    }
  }
}

TEST_CASE("the exact pass is chosen by the density of positives and the distance", "[eval][retrieval]") {
  const std::int64_t n = 200, dim = 4;
  const auto x = random_matrix(n, dim, 61);
  const auto few = random_labels(n, 100, 62), many = random_labels(n, 4, 63);
  RetrievalOptions opt;
  opt.exclude_self = true;
  BlockScorer l2({DistanceKind::sqeuclidean}, {x.data(), n, dim}, {x.data(), n, dim});
  CHECK_FALSE(evaluate_retrieval(l2, {few.data(), few.data()}, opt).summary.dense_exact);  // ~1% positives
  CHECK(evaluate_retrieval(l2, {many.data(), many.data()}, opt).summary.dense_exact);      // ~25%
  BlockScorer l1({DistanceKind::manhattan}, {x.data(), n, dim}, {x.data(), n, dim});
  CHECK_FALSE(evaluate_retrieval(l1, {many.data(), many.data()}, opt).summary.dense_exact);  // no DGEMM form
  opt.exact_pass = RetrievalOptions::ExactPass::dense;
  CHECK_THROWS_WITH(evaluate_retrieval(l1, {many.data(), many.data()}, opt),
                    Catch::Contains("dense exact pass") && Catch::Contains("manhattan"));
}
