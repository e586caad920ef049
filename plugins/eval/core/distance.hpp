// Distances and kernels between row-major float matrices, computed block by block.
//
// Every measure is turned into a "score" where smaller means closer, so one ranking routine
// serves all of them:
//   euclidean, sqeuclidean   squared L2 (euclidean reports its square root)
//   manhattan                L1
//   cosine                   1 - cos(x, y)
//   chi_square               sum (x-y)^2 / (x+y) over dims with x+y > 0 (needs x, y >= 0)
//   chi2_kernel              -exp(-gamma * chi_square)       (kernels rank by decreasing value)
//   gaussian_kernel          -exp(-gamma * ||x-y||^2)
//   laplacian_kernel         -exp(-gamma * ||x-y||_1)
// Squared L2 and cosine come from one SGEMM per block (|q|^2 + |g|^2 - 2 q.g); the others are
// direct loops. Kernels keep the ranking of their base distance except where exp() underflows in
// float (gamma * d > ~87), where saturated items tie and are ordered by index.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "embedflow/features.hpp"  // MatrixView

namespace embedflow::evalcore {

enum class DistanceKind {
  euclidean,
  sqeuclidean,
  manhattan,
  cosine,
  chi_square,
  chi2_kernel,
  gaussian_kernel,
  laplacian_kernel,
};

struct DistanceSpec {
  DistanceKind kind = DistanceKind::euclidean;
  double gamma = 1.0;  // kernels only
};

// Throws std::invalid_argument naming the accepted names.
DistanceKind parse_distance(const std::string& name);
std::string distance_name(DistanceKind kind);
const std::vector<std::string>& distance_names();
bool is_kernel(DistanceKind kind);

// Converts a score back to the value users expect to read (distance, or kernel similarity).
double score_to_value(const DistanceSpec& spec, double score);

// Score of one pair, computed in double. The reference for tests and for the few per-query
// evaluations (positives) that do not go through the blocked path.
double pair_score(const DistanceSpec& spec, const float* x, const float* y, std::int64_t dim);

// Holds per-row precomputations (norms, normalised copies) of a query and a gallery matrix and
// fills score blocks. Thread-compatible: compute() may run concurrently on disjoint outputs.
class BlockScorer {
 public:
  // Validates inputs: equal dims, non-negative values for chi-square measures, finite values.
  BlockScorer(const DistanceSpec& spec, MatrixView query, MatrixView gallery);

  // out[(i - q_begin) * ld + (j - g_begin)] = score(query i, gallery j). Uses `threads` threads
  // for the loop-based measures; SGEMM uses OpenBLAS's own thread setting.
  void compute(std::int64_t q_begin, std::int64_t q_end, std::int64_t g_begin, std::int64_t g_end,
               float* out, std::int64_t ld, int threads) const;

  // The score of query row i and gallery row j in double precision: what the exactness pass of
  // evaluate_retrieval ranks by. Equals pair_score up to double rounding (cosine uses the rows'
  // norms computed once; every kernel sums in a fixed lane order), and two identical gallery
  // rows always get the same value, so exact ties still fall back to the gallery index.
  double exact(std::int64_t i, std::int64_t j) const;

  // Whether compute_exact() is available: squared L2, euclidean and cosine, whose double scores
  // come from one DGEMM per block.
  bool has_exact_blocks() const;
  // out[(i - q_begin) * ld + (j - g_begin)] = the pair's score in double precision, from one DGEMM
  // over the rows converted to double (cosine: 1 - q.g a b with exact()'s inverse norms a, b;
  // squared L2: |q|^2 + |g|^2 - 2 q.g with double norms). Where positives are dense, ranking every item of a
  // query by these is cheaper than ranking by float scores and rescoring the many near-ties with
  // exact(); the two agree up to double rounding, so one ranking must use one of them throughout.
  // Converts at most kExactChunk gallery rows at a time (memory: that many rows and the query
  // rows, in double).
  void compute_exact(std::int64_t q_begin, std::int64_t q_end, std::int64_t g_begin, std::int64_t g_end,
                     double* out, std::int64_t ld) const;
  static constexpr std::int64_t kExactChunk = 1024;
  // A loose upper bound on any score (used to push items of another cluster behind all others).
  double score_bound() const { return score_bound_; }
  // Absolute tolerance between this scorer's float scores and pair_score() for query row i.
  double tolerance(std::int64_t query_row) const;

  const DistanceSpec& spec() const { return spec_; }
  MatrixView query() const { return query_; }
  MatrixView gallery() const { return gallery_; }

 private:
  DistanceSpec spec_;
  MatrixView query_, gallery_;
  std::vector<float> query_norm2_, gallery_norm2_;         // squared L2 norms
  std::vector<float> query_unit_, gallery_unit_;           // cosine: rows scaled to unit length
  std::vector<float> query_l1_, gallery_l1_;               // L1 norms (bounds and tolerances)
  std::vector<double> query_inv_norm_, gallery_inv_norm_;  // cosine: 1 / ||row|| in double (0 for a zero row)
  double gallery_max_norm2_ = 0, gallery_max_l1_ = 0;
  double score_bound_ = 0;
};

// Full score matrix, unblocked and in double: the test oracle for the blocked path.
std::vector<double> score_matrix_reference(const DistanceSpec& spec, MatrixView query, MatrixView gallery);

}  // namespace embedflow::evalcore
