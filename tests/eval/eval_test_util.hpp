// Shared helpers for the eval tests: seeded random matrices and a brute-force reference ranking
// (every pair scored in double, stable sort by (score, index)) that the blocked code must match.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "distance.hpp"
#include "retrieval.hpp"

namespace evaltest {

using namespace embedflow::evalcore;
using embedflow::MatrixView;

inline std::vector<float> random_matrix(std::int64_t rows, std::int64_t cols, std::uint64_t seed, bool nonnegative = false,
                                        bool integers = false) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  std::uniform_int_distribution<int> small(0, 4);
  std::vector<float> m(static_cast<std::size_t>(rows * cols));
  for (auto& v : m) {
    v = integers ? static_cast<float>(small(rng)) : normal(rng);
    if (nonnegative) v = std::fabs(v);
  }
  return m;
}

inline std::vector<std::int64_t> random_labels(std::int64_t n, std::int64_t classes, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int64_t> pick(0, classes - 1);
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = pick(rng);
  return v;
}

// Reference: full ranking per query, exclusions applied, positives' 1-based ranks.
inline std::vector<QueryOutcome> reference_outcomes(const DistanceSpec& spec, MatrixView Q, MatrixView G,
                                                    const RetrievalLabels& L, const RetrievalOptions& opt) {
  std::vector<QueryOutcome> out;
  const bool cams = opt.exclude_same_camera && L.query_camera && L.gallery_camera;
  for (std::int64_t q = 0; q < Q.rows; ++q) {
    if (L.query_label[q] == opt.junk_label) {
      QueryOutcome o;
      o.status = QueryOutcome::Status::junk_query;
      out.push_back(o);
      continue;
    }
    std::vector<std::pair<double, std::int64_t>> items;
    for (std::int64_t j = 0; j < G.rows; ++j) {
      if (L.gallery_label[j] == opt.junk_label) continue;
      if (opt.exclude_self && j == q) continue;
      if (cams && L.gallery_label[j] == L.query_label[q] && L.gallery_camera[j] == L.query_camera[q]) continue;
      items.emplace_back(pair_score(spec, Q.row(q), G.row(j), Q.cols), j);
    }
    std::stable_sort(items.begin(), items.end());
    std::vector<std::int64_t> ranks;
    for (std::size_t r = 0; r < items.size(); ++r)
      if (L.gallery_label[items[r].second] == L.query_label[q]) ranks.push_back(static_cast<std::int64_t>(r) + 1);
    out.push_back(outcome_from_ranks(ranks));
  }
  return out;
}

}  // namespace evaltest
