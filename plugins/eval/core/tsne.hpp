// Exact t-SNE (van der Maaten and Hinton 2008) as scikit-learn's TSNE(method="exact") computes
// it, so an embedflow plot and a scikit-learn one of the same points mean the same thing:
//   - input affinities: squared Euclidean distances, a binary search per point for the Gaussian
//     precision whose conditional distribution has the asked perplexity (natural-log entropy,
//     tolerance 1e-5, at most 100 steps), P = (P_cond + P_cond^T) / sum, floored at machine eps;
//   - output: Student-t with one degree of freedom, Q_ij ∝ (1 + ||y_i - y_j||^2)^-1;
//   - gradient descent on KL(P || Q) with momentum and per-coordinate adaptive gains (+0.2 when
//     the gradient changes sign against the last update, x0.8 otherwise, at least 0.01): 250
//     iterations with P multiplied by `early_exaggeration` and momentum 0.5, then momentum 0.8
//     up to `iterations` (update and gains restart between the two stages, as in scikit-learn);
//     the error is checked every 50 iterations and a stage stops early after
//     `iterations_without_progress` iterations without a lower error or when the gradient norm
//     falls below 1e-7;
//   - learning rate "auto" (0): max(N / early_exaggeration / 4, 50);
//   - initialisation: PCA (the first two principal components scaled so the first has standard
//     deviation 1e-4, scikit-learn's default since 1.2) or random N(0, 1e-4^2) from the seed.
// O(N^2) memory and time per iteration: meant for up to a few thousand points.
#pragma once

#include <cstdint>
#include <vector>

namespace embedflow::evalcore {

struct TsneOptions {
  double perplexity = 30.0;
  double early_exaggeration = 12.0;
  double learning_rate = 0.0;  // 0: "auto"
  std::int64_t iterations = 1000;
  std::int64_t iterations_without_progress = 300;
  bool pca_init = true;
  std::uint64_t seed = 0;  // random initialisation only
  int threads = 1;         // rows of the gradient in parallel; the result does not depend on it
};

struct TsneResult {
  std::vector<double> embedding;  // N x 2, row-major
  double kl_divergence = 0.0;     // KL(P || Q) at the last iteration, P without exaggeration
  std::int64_t iterations = 0;    // iterations run (both stages)
  double learning_rate = 0.0;     // the rate used (after "auto")
};

// `x` is N x D row-major (finite). Throws std::invalid_argument for N < 2, perplexity outside
// (0, N) or non-finite values; the caller adds the node and parameter context.
TsneResult tsne(const std::vector<double>& x, std::int64_t n, std::int64_t d, const TsneOptions& options);

// The symmetric joint probabilities P (N x N, zero diagonal) of `x` at `perplexity`, as used by tsne.
std::vector<double> tsne_joint_probabilities(const std::vector<double>& x, std::int64_t n, std::int64_t d, double perplexity);

}  // namespace embedflow::evalcore
