// k-means (k-means++ seeding, Lloyd iterations over blocked SGEMM distances, n_init restarts
// keeping the lowest inertia) and the clustering agreement scores NMI and AMI (arithmetic
// normalisation, as scikit-learn's defaults), ARI (scikit-learn's pair-confusion form) and purity.
#pragma once

#include <cstdint>
#include <vector>

#include "distance.hpp"

namespace embedflow::evalcore {

struct KMeansOptions {
  int clusters = 8;
  int max_iterations = 100;
  int n_init = 1;           // restarts from independent k-means++ seedings; the lowest inertia wins
  double tolerance = 1e-4;  // stop when centre movement^2 < tolerance * mean feature variance
  std::uint64_t seed = 0;
  int threads = 1;
};

struct KMeansResult {
  std::vector<float> centers;             // clusters x dim
  std::vector<std::int64_t> assignment;   // n
  double inertia = 0;                     // sum of squared distances to assigned centre
  int iterations = 0;
  int best_init = 0;                      // which restart was kept (0-based)
  std::vector<double> init_inertia;       // every restart's final inertia
};

KMeansResult kmeans(MatrixView data, const KMeansOptions& options);
// Nearest centre (squared L2) of each row.
std::vector<std::int64_t> assign_to_centers(MatrixView data, const std::vector<float>& centers, int threads);

double mutual_information(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b);
double normalized_mutual_information(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b);
double adjusted_mutual_information(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b);
double adjusted_rand_index(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b);
// Fraction of rows whose cluster's most frequent true label is their own: sum over clusters of
// the largest count / n. `truth` first, `clusters` second.
double purity(const std::vector<std::int64_t>& truth, const std::vector<std::int64_t>& clusters);
// Sum of squared distances of each row to the mean of its cluster, and those means (clusters are
// the distinct values of `assignment`, in increasing order; `ids` receives them).
double assignment_inertia(MatrixView data, const std::vector<std::int64_t>& assignment, std::vector<float>& centers,
                          std::vector<std::int64_t>& ids);

}  // namespace embedflow::evalcore
