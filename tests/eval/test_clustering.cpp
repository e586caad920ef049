// k-means++ / Lloyd and the NMI / AMI scores on cases with known answers.
#include <catch2/catch.hpp>

#include "clustering.hpp"
#include "eval_test_util.hpp"

using namespace evaltest;

TEST_CASE("k-means recovers well separated blobs and is seeded", "[eval][clustering]") {
  const std::int64_t per = 50, k = 4, dim = 5;
  std::vector<float> x;
  std::vector<std::int64_t> truth;
  std::mt19937_64 rng(3);
  std::normal_distribution<float> noise(0, 0.3f);
  for (std::int64_t c = 0; c < k; ++c)
    for (std::int64_t i = 0; i < per; ++i) {
      for (std::int64_t d = 0; d < dim; ++d) x.push_back(noise(rng) + (d == c ? 10.0f : 0.0f));
      truth.push_back(c);
    }
  KMeansOptions opt;
  opt.clusters = static_cast<int>(k);
  opt.seed = 42;
  const auto a = kmeans({x.data(), per * k, dim}, opt), b = kmeans({x.data(), per * k, dim}, opt);
  CHECK(a.assignment == b.assignment);
  CHECK(a.centers == b.centers);
  CHECK(normalized_mutual_information(truth, a.assignment) == Approx(1.0));
  CHECK(adjusted_mutual_information(truth, a.assignment) == Approx(1.0));
  // Inertia ~ n * dim * 0.09 for unit-separated blobs recovered exactly.
  CHECK(a.inertia < per * k * dim * 0.09 * 1.5);
  CHECK(a.iterations >= 1);
  CHECK_THROWS_WITH(kmeans({x.data(), 3, dim}, opt), Catch::Contains("at least as many rows"));
}

TEST_CASE("NMI and AMI by hand", "[eval][clustering]") {
  // Permuted labels agree perfectly; independent labelings score AMI ~ 0.
  const std::vector<std::int64_t> a{0, 0, 1, 1, 2, 2}, b{5, 5, 3, 3, 9, 9};
  CHECK(normalized_mutual_information(a, b) == Approx(1.0));
  CHECK(adjusted_mutual_information(a, b) == Approx(1.0));
  // a = {0,0,1,1}, b = {0,1,0,1}: MI = 0, so NMI = 0.
  CHECK(normalized_mutual_information({0, 0, 1, 1}, {0, 1, 0, 1}) == Approx(0.0).margin(1e-12));
  // MI of {0,0,1,1} vs {0,0,0,1}: H(a)=ln2; MI = sum p log(p/(pa pb)) = 0.5 ln(0.5/(0.5*0.75)) + 0.25 ln(0.25/(0.5*0.75))
  //   + 0.25 ln(0.25/(0.5*0.25)).
  const double mi = 0.5 * std::log(0.5 / 0.375) + 0.25 * std::log(0.25 / 0.375) + 0.25 * std::log(2.0);
  CHECK(mutual_information({0, 0, 1, 1}, {0, 0, 0, 1}) == Approx(mi));
  CHECK_THROWS(normalized_mutual_information({0, 1}, {0}));
}
