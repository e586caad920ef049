// Exact k-nearest-neighbour search and the kNN classifier's vote.
//
// The neighbours are those of a stable argsort of double-precision scores (BlockScorer::exact,
// ties by train index): a float heap of the k best per query over the blocked SGEMM scores,
// plus every item within twice the float tolerance of its current k-th score, rescored in double
// at the end. Any true top-k item has a float score at most 2 eps above the float k-th, so none
// is missed.
#pragma once

#include <cstdint>
#include <vector>

#include "distance.hpp"

namespace embedflow::evalcore {

struct ExactNeighbours {
  std::int64_t k = 0;
  std::vector<std::int64_t> index;  // queries x k train rows, nearest first
  std::vector<double> score;        // their exact scores (smaller = nearer)
};

ExactNeighbours exact_knn(const BlockScorer& scorer, int k, std::int64_t query_block, std::int64_t gallery_block,
                          int threads);

enum class KnnWeights { uniform, distance };
// Vote ties: scikit-learn's rule (the smallest label wins) or the label of the nearest
// neighbour among the tied labels.
enum class KnnTieRule { smallest_label, nearest };

// One query's predicted label from its neighbours' labels and values (distances, or kernel
// similarities), nearest first. Weights: uniform, or as scikit-learn's `distance`: 1 / distance,
// and when some neighbours are at distance 0, those alone with weight 1; for kernels the
// similarity itself. Weights are summed per label in neighbour order.
std::int64_t knn_vote(const std::int64_t* labels, const double* values, std::int64_t k, KnnWeights weights, bool kernel,
                      KnnTieRule tie_rule);

}  // namespace embedflow::evalcore
