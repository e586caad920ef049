// The pair arithmetic LMNN and SGD Mahalanobis share (see learner_math.hpp).
#include "learner_math.hpp"

#include <algorithm>
#include <unordered_map>

#include "embedflow/error.hpp"

namespace embedflow::metriccore {

// M = sum_e w_e (x_a - x_b)(x_a - x_b)^T, as X_S^T Y_S over the rows S the pairs touch, where
// Y = (graph Laplacian of the weights) X: n_S x d x d flops instead of |pairs| x d x d.
Mat weighted_scatter(const Data& data, const std::vector<WeightedPair>& pairs) {
  const int d = data.d;
  std::unordered_map<std::int64_t, std::int64_t> local;
  std::vector<std::int64_t> rows;
  auto slot = [&](std::int64_t r) {
    auto [it, added] = local.emplace(r, static_cast<std::int64_t>(rows.size()));
    if (added) rows.push_back(r);
    return it->second;
  };
  for (const auto& p : pairs) slot(p.a), slot(p.b);
  const auto m = static_cast<std::int64_t>(rows.size());
  Mat xs(static_cast<std::size_t>(m * d)), ys(static_cast<std::size_t>(m * d), 0.0);
  for (std::int64_t i = 0; i < m; ++i)
    std::copy(data.x + rows[static_cast<std::size_t>(i)] * d, data.x + (rows[static_cast<std::size_t>(i)] + 1) * d,
              xs.begin() + i * d);
  for (const auto& p : pairs) {
    const std::int64_t a = local[p.a], b = local[p.b];
    for (int k = 0; k < d; ++k) {
      const double diff = p.w * (xs[static_cast<std::size_t>(a * d + k)] - xs[static_cast<std::size_t>(b * d + k)]);
      ys[static_cast<std::size_t>(a * d + k)] += diff;
      ys[static_cast<std::size_t>(b * d + k)] -= diff;
    }
  }
  Mat out(static_cast<std::size_t>(d * d), 0.0);
  if (m > 0) gemm(true, false, d, d, static_cast<int>(m), 1.0, xs.data(), ys.data(), 0.0, out.data());
  return out;
}

// Z = X G^T (n x k).
Mat project(const Data& data, const Mat& G, int k) {
  Mat z(static_cast<std::size_t>(data.n * k));
  gemm(false, true, static_cast<int>(data.n), k, data.d, 1.0, data.x, G.data(), 0.0, z.data());
  return z;
}

double sqdist(const double* a, const double* b, int d) {
  double s = 0;
  for (int k = 0; k < d; ++k) s += (a[k] - b[k]) * (a[k] - b[k]);
  return s;
}

// d_A(a_t, b_t) for many pairs at once: rows of differences times A by one GEMM.
std::vector<double> pair_distances(const Data& data, const Mat& A, const std::vector<std::pair<std::int64_t, std::int64_t>>& pairs) {
  const int d = data.d;
  const auto m = static_cast<std::int64_t>(pairs.size());
  std::vector<double> out(static_cast<std::size_t>(m), 0.0);
  if (m == 0) return out;
  Mat diff(static_cast<std::size_t>(m * d)), da(static_cast<std::size_t>(m * d));
  for (std::int64_t t = 0; t < m; ++t)
    for (int k = 0; k < d; ++k)
      diff[static_cast<std::size_t>(t * d + k)] =
          data.x[pairs[static_cast<std::size_t>(t)].first * d + k] - data.x[pairs[static_cast<std::size_t>(t)].second * d + k];
  gemm(false, false, static_cast<int>(m), d, d, 1.0, diff.data(), A.data(), 0.0, da.data());
  for (std::int64_t t = 0; t < m; ++t) {
    double s = 0;
    for (int k = 0; k < d; ++k) s += diff[static_cast<std::size_t>(t * d + k)] * da[static_cast<std::size_t>(t * d + k)];
    out[static_cast<std::size_t>(t)] = s;
  }
  return out;
}

void require_labels(const Data& data, const char* who) {
  if (!data.label) throw DataError(cat(who, " needs labels"));
  if (data.n < 2) throw DataError(cat(who, " needs at least 2 training rows, got ", data.n));
}

}  // namespace embedflow::metriccore
