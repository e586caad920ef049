// Metric learners. Each returns a linear map G (k x d) and an optional mean, so that
// y = G (x - mean) and ||y1 - y2||^2 is the learned (squared Mahalanobis) distance with
// A = G^T G. All work in double on row-major n x d data.
//
//   mahalanobis       A = (shrunk covariance)^-1, total or within-class; closed form.
//   pca               G = top-k eigenvectors of the covariance (optionally whitened).
//   lmnn              Weinberger & Saul's large-margin nearest neighbour, optimised over L
//                     (A = L^T L) by gradient descent with step-size adaptation; impostors
//                     found by blocked GEMM or a KD-tree (nanoflann).
//   sgd_mahalanobis   the re-identification report's SGD on A with PSD projection after every
//                     step: (i) pairwise loss sum y_ij d_A(i,j) (y = +1 same, -1 different),
//                     (ii) triplet hinge [1 + d_A(i,j) - d_A(i,k)]_+ on hardest positive /
//                     hardest negative plus random triplets; validation loss every N epochs,
//                     learning rate halved when it rises, a checkpoint callback each epoch.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "linalg.hpp"

namespace embedflow::metriccore {

struct Transform {
  int out_dim = 0, in_dim = 0;
  Mat G;                     // out_dim x in_dim
  std::vector<double> mean;  // in_dim, or empty for no centring
  std::vector<float> apply(const float* x, std::int64_t n) const;  // n x out_dim
};

struct Data {
  const double* x = nullptr;  // n x d
  std::int64_t n = 0;
  int d = 0;
  const std::int64_t* label = nullptr;  // n (may be null where unused)
};

// ---- closed form ---------------------------------------------------------------------------

enum class CovarianceKind { total, within_class };
Transform mahalanobis(const Data& data, double shrinkage, CovarianceKind kind);
Transform pca(const Data& data, int components, bool whiten);

// ---- LMNN ----------------------------------------------------------------------------------

enum class ImpostorSearch { gemm, kdtree };

struct LmnnOptions {
  int k = 3;                    // target neighbours per point (same class)
  double push_weight = 0.5;     // mu: (1-mu) pull + mu push
  double learning_rate = 1e-2;  // first step moves L by this fraction of ||L||
  int max_iterations = 200;
  double tolerance = 1e-6;      // stop when the relative objective decrease is below this
  ImpostorSearch impostors = ImpostorSearch::gemm;
  int threads = 1;
  std::function<bool()> stop;   // returns true to stop early (SIGINT)
};

struct LmnnResult {
  Transform transform;
  std::vector<double> objective;  // accepted objective values, first = at the identity
  std::vector<std::int64_t> active_triplets;
  int iterations = 0;
  double final_learning_rate = 0;
  // How it ended: "converged" (relative decrease below tolerance, or the step shrank to nothing),
  // "iteration_cap" (max_iterations reached first) or "stopped" (interrupted).
  bool converged = false;
  std::string stop_reason;
};

LmnnResult lmnn(const Data& data, const LmnnOptions& options);

// Objective and active-triplet count of L (d x d) for the given target neighbours; exposed for
// tests (finite-difference gradient check) and reporting.
struct LmnnTargets {
  int k = 0;
  std::vector<std::int64_t> index;  // n x k
};
LmnnTargets lmnn_targets(const Data& data, int k, int threads);
double lmnn_objective(const Data& data, const LmnnTargets& t, const Mat& L, double push_weight, Mat* gradient,
                      std::int64_t* active, ImpostorSearch search, int threads);

// ---- SGD Mahalanobis -----------------------------------------------------------------------

enum class SgdLoss { pairwise, triplet };

struct SgdOptions {
  SgdLoss loss = SgdLoss::pairwise;
  double learning_rate = 1e-3;
  int epochs = 100;
  int batch_size = 50;
  int steps_per_epoch = 0;         // 0: n / batch_size
  int validate_every = 10;         // epochs
  int random_triplets = 2;         // per anchor, besides the hardest one (triplet loss)
  double margin = 1.0;
  bool trace_normalize = true;     // keep tr(A) = d: the pairwise loss is unbounded otherwise
  bool balance_pairs = false;      // pairwise: weigh same / different pairs 1/2 each in total
  std::uint64_t seed = 0;
  double tolerance = 1e-3;         // relative change of the epoch loss taken as converged
  std::function<void(int epoch, const Mat& A)> checkpoint;
  std::function<bool()> stop;
};

struct SgdResult {
  Transform transform;
  Mat A;
  std::vector<double> train_loss;       // per epoch (mean over its batches)
  std::vector<double> validation_loss;  // per validation
  std::vector<int> validation_epoch;
  std::vector<double> learning_rate;    // per epoch
  double max_negative_eigenvalue = 0;   // most negative eigenvalue of A seen after projection
  int epochs_run = 0;
  // The last epoch changed the mean training loss by less than tolerance (relative). SGD runs
  // its epochs whatever this says; it only tells whether the cap cut a still-moving descent.
  bool converged = false;
  double last_relative_change = 0;
};

// `validation` may have n == 0 (then no learning-rate schedule).
SgdResult sgd_mahalanobis(const Data& train, const Data& validation, const SgdOptions& options);

// Loss of A on fixed pairs / triplets (what the validation uses).
double pairwise_loss(const Data& data, const Mat& A, const std::vector<std::pair<std::int64_t, std::int64_t>>& pairs);
double triplet_loss(const Data& data, const Mat& A, const std::vector<std::array<std::int64_t, 3>>& triplets, double margin);

// Leave-one-out kNN classification accuracy of `data` under G (for tests and reports).
double knn_accuracy(const Data& train, const Data& test, const Transform& t, int k, int threads);

}  // namespace embedflow::metriccore
