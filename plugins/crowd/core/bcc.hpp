// Bayesian crowd clustering (Gomes, Welinder, Krause and Perona, "Crowdclustering", NIPS 2011),
// the CEN paper's baseline that models workers as linear classifiers in one entangled embedding:
//
//   x_i ~ N(0, I_D)                        item (image) i's embedding
//   w_j ~ N(0, α_w^-1 I_D),  τ_j ~ N(0, α_τ^-1)   worker j: a diagonal W_j = diag(w_j) and a bias
//   α_w, α_τ ~ Gamma(a0, b0)               shared precisions (shape a0, rate b0)
//   l_p ~ Bernoulli(σ(z_p)),  z_p = x_i^T diag(w_j) x_i' + τ_j   for pair p = (i, i') labelled by j
//
// Inference is mean-field variational Bayes with fully factorised q: a Gaussian per coordinate of
// x_i, w_j and per τ_j, a Gamma per precision, and Jaakkola and Jordan's bound on the logistic
// likelihood with one variational parameter ξ_p per pair:
//   log σ((2l-1) z) >= log σ(ξ) + ((2l-1) z - ξ) / 2 - λ(ξ) (z^2 - ξ^2),  λ(ξ) = tanh(ξ/2) / (4ξ).
// Under q the D products x_id w_jd x_i'd involve distinct variables, so E[z] and E[z^2] are exact,
// and every update below maximises the bound in its own factor exactly: the bound (the ELBO
// `bound` returns) never decreases, which the tests check on every sweep.
// A sweep updates, in order: every worker's w_j and τ_j, every item's x_i (coordinate by
// coordinate), α_w and α_τ, then every ξ_p = sqrt(E[z_p^2]). E[x] starts from the top D
// eigenvectors of the signed co-clustering matrix (sum of 2l - 1 over each image pair's labels):
// from a random start the updates fall to the trivial fixed point E[x] = E[w] = 0.
#pragma once

#include <cstdint>
#include <vector>

namespace embedflow::crowd {

struct BccPair {
  std::int64_t a = 0, b = 0, worker = 0;
  bool same = false;
};

struct BccOptions {
  std::int64_t items = 0, workers = 0, dim = 4;
  std::int64_t sweeps = 50;
  double tolerance = 1e-6;       // stop when a sweep raises the bound by less than this fraction of |bound|
  double init_std = 0.5;        // noise N(0, init_std^2) from the seed on the spectral start of E[x]; x's initial variance
  double prior_shape = 1.0, prior_rate = 1.0;  // a0, b0
  std::uint64_t seed = 0;
};

// The variational posterior: means and variances of each Gaussian factor, the Gamma factors'
// shape and rate, and the pairs' ξ.
struct BccPosterior {
  std::int64_t items = 0, workers = 0, dim = 0;
  std::vector<double> x_mean, x_var;  // items x dim
  std::vector<double> w_mean, w_var;  // workers x dim
  std::vector<double> tau_mean, tau_var;  // workers
  double alpha_w_shape = 0, alpha_w_rate = 0, alpha_tau_shape = 0, alpha_tau_rate = 0;
  double prior_shape = 1, prior_rate = 1;
  std::vector<double> xi;  // per training pair
  std::vector<double> bound;  // the ELBO after each sweep (entry 0: after initialisation)

  // E[z] and Var[z] of a pair under q; P(same) = σ(E[z] / sqrt(1 + π Var[z] / 8)) (the probit
  // approximation of the predictive logistic-Gaussian integral).
  void moments(std::int64_t a, std::int64_t b, std::int64_t worker, double& mean, double& var) const;
  double probability_same(std::int64_t a, std::int64_t b, std::int64_t worker) const;
};

// Fits q to the pairs. Throws std::invalid_argument naming the first pair whose ids fall outside
// items or workers, and for an empty pair list.
BccPosterior fit_bcc(const std::vector<BccPair>& pairs, const BccOptions& options);

// The evidence lower bound of `q` on `pairs` (the same pairs, in the same order as q.xi).
double bcc_bound(const BccPosterior& q, const std::vector<BccPair>& pairs);

}  // namespace embedflow::crowd
