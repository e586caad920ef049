// Blocked scores against the double-precision pair reference, for every measure.
#include <catch2/catch.hpp>

#include <cmath>

#include "eval_test_util.hpp"

using namespace evaltest;

TEST_CASE("every distance and kernel: blocked scores match pair_score", "[eval][distance]") {
  const std::int64_t nq = 37, ng = 53, dim = 19;
  const auto q = random_matrix(nq, dim, 1, true), g = random_matrix(ng, dim, 2, true);
  const MatrixView Q{q.data(), nq, dim}, G{g.data(), ng, dim};
  for (const auto& name : distance_names()) {
    DYNAMIC_SECTION(name) {
      const DistanceSpec spec{parse_distance(name), 0.05};
      BlockScorer scorer(spec, Q, G);
      const auto ref = score_matrix_reference(spec, Q, G);
      std::vector<float> block(static_cast<std::size_t>(nq * ng));
      // Odd block edges exercise the partial tiles.
      for (std::int64_t q0 = 0; q0 < nq; q0 += 8)
        for (std::int64_t g0 = 0; g0 < ng; g0 += 11)
          scorer.compute(q0, std::min(nq, q0 + 8), g0, std::min(ng, g0 + 11),
                         block.data() + q0 * ng + g0, ng, 2);
      for (std::int64_t i = 0; i < nq; ++i)
        for (std::int64_t j = 0; j < ng; ++j) {
          const double r = ref[static_cast<std::size_t>(i * ng + j)], b = block[static_cast<std::size_t>(i * ng + j)];
          REQUIRE(std::fabs(r - b) <= scorer.tolerance(i));
        }
    }
  }
}

TEST_CASE("hand-computed distances on two 3-d points", "[eval][distance]") {
  const float x[] = {1, 2, 3}, y[] = {4, 0, 3};
  // diff = (-3, 2, 0): L2^2 = 13, L1 = 5; chi2 = 9/5 + 4/2 + 0/6 = 3.8; cos = (4+0+9)/(sqrt14*5)
  CHECK(pair_score({DistanceKind::sqeuclidean}, x, y, 3) == Approx(13));
  CHECK(score_to_value({DistanceKind::euclidean}, pair_score({DistanceKind::euclidean}, x, y, 3)) == Approx(std::sqrt(13.0)));
  CHECK(pair_score({DistanceKind::manhattan}, x, y, 3) == Approx(5));
  CHECK(pair_score({DistanceKind::chi_square}, x, y, 3) == Approx(3.8));
  CHECK(pair_score({DistanceKind::cosine}, x, y, 3) == Approx(1 - 13 / (std::sqrt(14.0) * 5)));
  CHECK(score_to_value({DistanceKind::gaussian_kernel, 0.1}, pair_score({DistanceKind::gaussian_kernel, 0.1}, x, y, 3)) ==
        Approx(std::exp(-1.3)));
  CHECK(score_to_value({DistanceKind::laplacian_kernel, 0.2}, pair_score({DistanceKind::laplacian_kernel, 0.2}, x, y, 3)) ==
        Approx(std::exp(-1.0)));
  CHECK(score_to_value({DistanceKind::chi2_kernel, 0.5}, pair_score({DistanceKind::chi2_kernel, 0.5}, x, y, 3)) ==
        Approx(std::exp(-1.9)));
}

TEST_CASE("bad inputs get clear errors", "[eval][distance]") {
  const std::vector<float> a{1, -2, 3, 4}, b{1, 2, 3};
  CHECK_THROWS_WITH(BlockScorer({DistanceKind::euclidean}, {a.data(), 1, 4}, {b.data(), 1, 3}),
                    Catch::Contains("4 dims") && Catch::Contains("3"));
  CHECK_THROWS_WITH(BlockScorer({DistanceKind::chi_square}, {a.data(), 2, 2}, {a.data(), 2, 2}),
                    Catch::Contains("negative") && Catch::Contains("row 0 dim 1"));
  CHECK_THROWS_WITH(parse_distance("hamming"), Catch::Contains("unknown distance 'hamming'") && Catch::Contains("cosine"));
  const std::vector<float> nan{1, std::nanf("")};
  CHECK_THROWS_WITH(BlockScorer({DistanceKind::euclidean}, {nan.data(), 1, 2}, {nan.data(), 1, 2}),
                    Catch::Contains("not finite"));
}
