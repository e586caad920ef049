// k-means (k-means++ seeding, Lloyd iterations over blocked SGEMM distances) and the clustering
// agreement scores NMI and AMI (arithmetic normalisation, as scikit-learn's defaults).
#pragma once

#include <cstdint>
#include <vector>

#include "distance.hpp"

namespace embedflow::evalcore {

struct KMeansOptions {
  int clusters = 8;
  int max_iterations = 100;
  double tolerance = 1e-4;  // stop when centre movement^2 < tolerance * mean feature variance
  std::uint64_t seed = 0;
  int threads = 1;
};

struct KMeansResult {
  std::vector<float> centers;             // clusters x dim
  std::vector<std::int64_t> assignment;   // n
  double inertia = 0;                     // sum of squared distances to assigned centre
  int iterations = 0;
};

KMeansResult kmeans(MatrixView data, const KMeansOptions& options);
// Nearest centre (squared L2) of each row.
std::vector<std::int64_t> assign_to_centers(MatrixView data, const std::vector<float>& centers, int threads);

double mutual_information(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b);
double normalized_mutual_information(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b);
double adjusted_mutual_information(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b);

}  // namespace embedflow::evalcore
