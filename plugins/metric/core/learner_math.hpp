// Pair arithmetic the learners share (private to the metric core): weighted scatter matrices,
// Mahalanobis distances of many pairs by one GEMM, projections and the label check every
// supervised learner starts with.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "learners.hpp"

namespace embedflow::metriccore {

// One term w (x_a - x_b)(x_a - x_b)^T of a scatter matrix.
struct WeightedPair {
  std::int64_t a, b;
  double w;
};

// M = sum_e w_e (x_a - x_b)(x_a - x_b)^T.
Mat weighted_scatter(const Data& data, const std::vector<WeightedPair>& pairs);
// Rows of `data` times G^T: n x k.
Mat project(const Data& data, const Mat& G, int k);
double sqdist(const double* a, const double* b, int d);
// d_A(a_t, b_t) for many pairs at once.
std::vector<double> pair_distances(const Data& data, const Mat& A,
                                   const std::vector<std::pair<std::int64_t, std::int64_t>>& pairs);
// DataError unless `data` has labels and at least 2 rows; `who` names the learner.
void require_labels(const Data& data, const char* who);

}  // namespace embedflow::metriccore
