#include "learners.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nanoflann.hpp>
#include <numeric>
#include <random>
#include <unordered_map>

#include "embedflow/error.hpp"
#include "embedflow/rng.hpp"
#include "learner_math.hpp"

namespace embedflow::metriccore {

namespace {

// nanoflann adaptor over a row-major double matrix.
struct RowsAdaptor {
  const double* x;
  std::size_t n;
  int d;
  std::size_t kdtree_get_point_count() const { return n; }
  double kdtree_get_pt(std::size_t i, std::size_t k) const { return x[i * static_cast<std::size_t>(d) + k]; }
  template <class B>
  bool kdtree_get_bbox(B&) const { return false; }
};

}  // namespace

std::vector<float> Transform::apply(const float* x, std::int64_t n) const {
  std::vector<double> centred(x, x + n * in_dim);
  if (!mean.empty())
    for (std::int64_t i = 0; i < n; ++i)
      for (int j = 0; j < in_dim; ++j) centred[static_cast<std::size_t>(i * in_dim + j)] -= mean[static_cast<std::size_t>(j)];
  std::vector<double> y(static_cast<std::size_t>(n * out_dim));
  if (n > 0) gemm(false, true, static_cast<int>(n), out_dim, in_dim, 1.0, centred.data(), G.data(), 0.0, y.data());
  return std::vector<float>(y.begin(), y.end());
}

// ---- closed form ---------------------------------------------------------------------------

Transform mahalanobis(const Data& data, double shrinkage, CovarianceKind kind) {
  if (!(shrinkage >= 0 && shrinkage <= 1)) throw ConfigError(cat("shrinkage must be in [0, 1], got ", shrinkage));
  const int d = data.d;
  std::vector<double> mean;
  Mat cov;
  if (kind == CovarianceKind::total) {
    mean_and_covariance(data.x, data.n, d, mean, cov);
  } else {
    require_labels(data, "within-class covariance");
    std::unordered_map<std::int64_t, std::pair<std::vector<double>, std::int64_t>> sums;
    for (std::int64_t i = 0; i < data.n; ++i) {
      auto& s = sums[data.label[i]];
      if (s.first.empty()) s.first.assign(static_cast<std::size_t>(d), 0.0);
      for (int k = 0; k < d; ++k) s.first[static_cast<std::size_t>(k)] += data.x[i * d + k];
      s.second++;
    }
    Mat centred(static_cast<std::size_t>(data.n * d));
    for (std::int64_t i = 0; i < data.n; ++i) {
      const auto& s = sums[data.label[i]];
      for (int k = 0; k < d; ++k)
        centred[static_cast<std::size_t>(i * d + k)] = data.x[i * d + k] - s.first[static_cast<std::size_t>(k)] / static_cast<double>(s.second);
    }
    const std::int64_t dof = data.n - static_cast<std::int64_t>(sums.size());
    if (dof < 1) throw DataError("within-class covariance needs some class with at least 2 rows");
    cov.assign(static_cast<std::size_t>(d * d), 0.0);
    gemm(true, false, d, d, static_cast<int>(data.n), 1.0 / static_cast<double>(dof), centred.data(), centred.data(), 0.0, cov.data());
  }
  // Shrink towards a scaled identity with the same trace (Ledoit-Wolf style target).
  const double target = trace(cov, d) / d;
  for (auto& c : cov) c *= (1 - shrinkage);
  for (int i = 0; i < d; ++i) cov[static_cast<std::size_t>(i * d + i)] += shrinkage * target;
  std::vector<double> w;
  Mat v;
  sym_eig(cov, d, w, v);
  if (!(w.front() > 1e-12 * std::max(1.0, w.back())))
    throw DataError(cat("the covariance is singular (smallest eigenvalue ", w.front(), ", largest ", w.back(),
                        "); use shrinkage > 0 or fewer dims (metric.pca)"));
  Transform t;
  t.in_dim = t.out_dim = d;
  t.G = v;
  for (int k = 0; k < d; ++k)
    for (int j = 0; j < d; ++j) t.G[static_cast<std::size_t>(k * d + j)] /= std::sqrt(w[static_cast<std::size_t>(k)]);
  return t;
}

Transform pca(const Data& data, int components, bool whiten) {
  const int d = data.d;
  if (components < 1 || components > d) throw ConfigError(cat("PCA components must be in [1, ", d, "], got ", components));
  std::vector<double> mean, w;
  Mat cov, v;
  mean_and_covariance(data.x, data.n, d, mean, cov);
  sym_eig(cov, d, w, v);
  Transform t;
  t.in_dim = d;
  t.out_dim = components;
  t.mean = mean;
  t.G.resize(static_cast<std::size_t>(components * d));
  for (int c = 0; c < components; ++c) {
    const int src = d - 1 - c;  // eigenvalues ascend
    const double scale = whiten ? 1.0 / std::sqrt(std::max(w[static_cast<std::size_t>(src)], 1e-12)) : 1.0;
    // Sign convention: largest-magnitude coordinate positive, so results do not flip between
    // LAPACK builds.
    int arg = 0;
    for (int j = 1; j < d; ++j)
      if (std::fabs(v[static_cast<std::size_t>(src * d + j)]) > std::fabs(v[static_cast<std::size_t>(src * d + arg)])) arg = j;
    const double sign = v[static_cast<std::size_t>(src * d + arg)] < 0 ? -1.0 : 1.0;
    for (int j = 0; j < d; ++j) t.G[static_cast<std::size_t>(c * d + j)] = sign * scale * v[static_cast<std::size_t>(src * d + j)];
  }
  return t;
}

// ---- LMNN ----------------------------------------------------------------------------------

LmnnTargets lmnn_targets(const Data& data, int k, int threads) {
  require_labels(data, "LMNN");
  std::unordered_map<std::int64_t, std::vector<std::int64_t>> members;
  for (std::int64_t i = 0; i < data.n; ++i) members[data.label[i]].push_back(i);
  LmnnTargets t;
  t.k = k;
  t.index.assign(static_cast<std::size_t>(data.n * k), -1);
  std::int64_t usable = 0;
  for (const auto& [label, rows] : members) {
    for (std::int64_t i : rows) {
      std::vector<std::pair<double, std::int64_t>> cand;
      for (std::int64_t j : rows)
        if (j != i) cand.emplace_back(sqdist(data.x + i * data.d, data.x + j * data.d, data.d), j);
      const std::size_t take = std::min<std::size_t>(static_cast<std::size_t>(k), cand.size());
      std::partial_sort(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(take), cand.end());
      for (std::size_t r = 0; r < take; ++r) t.index[static_cast<std::size_t>(i * k) + r] = cand[r].second;
      usable += take > 0;
    }
  }
  if (usable == 0) throw DataError("LMNN needs classes with at least 2 rows (every training label is unique)");
  (void)threads;
  return t;
}

double lmnn_objective(const Data& data, const LmnnTargets& t, const Mat& L, double mu, Mat* gradient,
                      std::int64_t* active_count, ImpostorSearch search, int threads) {
  const int d = data.d, k = t.k;
  const std::int64_t n = data.n;
  const Mat z = project(data, L, d);
  const double* Z = z.data();
  std::vector<double> target_d(static_cast<std::size_t>(n * k), 0.0), radius(static_cast<std::size_t>(n), 0.0);
  double pull = 0;
  for (std::int64_t i = 0; i < n; ++i)
    for (int r = 0; r < k; ++r) {
      const auto j = t.index[static_cast<std::size_t>(i * k + r)];
      if (j < 0) continue;
      const double dij = sqdist(Z + i * d, Z + j * d, d);
      target_d[static_cast<std::size_t>(i * k + r)] = dij;
      pull += dij;
      radius[static_cast<std::size_t>(i)] = std::max(radius[static_cast<std::size_t>(i)], dij + 1.0);
    }

  // Impostors: differently labelled points inside each point's largest target radius + margin.
  std::vector<std::vector<std::pair<std::int64_t, double>>> impostors(static_cast<std::size_t>(n));
  if (search == ImpostorSearch::kdtree) {
    RowsAdaptor rows{Z, static_cast<std::size_t>(n), d};
    using Tree = nanoflann::KDTreeSingleIndexAdaptor<nanoflann::L2_Simple_Adaptor<double, RowsAdaptor>, RowsAdaptor, -1>;
    Tree tree(d, rows, nanoflann::KDTreeSingleIndexAdaptorParams(16));
    tree.buildIndex();
    std::vector<std::pair<std::uint32_t, double>> found;
    nanoflann::SearchParams params;
    params.sorted = false;
    for (std::int64_t i = 0; i < n; ++i) {
      if (radius[static_cast<std::size_t>(i)] <= 0) continue;
      found.clear();
      // nanoflann's L2 adaptors take and return squared distances.
      tree.radiusSearch(Z + i * d, radius[static_cast<std::size_t>(i)], found, params);
      for (const auto& [l, dil] : found)
        if (data.label[l] != data.label[i] && dil < radius[static_cast<std::size_t>(i)])
          impostors[static_cast<std::size_t>(i)].emplace_back(static_cast<std::int64_t>(l), dil);
    }
  } else {
    std::vector<double> norms(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
      for (int c = 0; c < d; ++c) norms[static_cast<std::size_t>(i)] += Z[i * d + c] * Z[i * d + c];
    const std::int64_t block = 512;
    std::vector<double> dots(static_cast<std::size_t>(block * n));
    for (std::int64_t i0 = 0; i0 < n; i0 += block) {
      const std::int64_t i1 = std::min(n, i0 + block);
      gemm(false, true, static_cast<int>(i1 - i0), static_cast<int>(n), d, 1.0, Z + i0 * d, Z, 0.0, dots.data());
      for (std::int64_t i = i0; i < i1; ++i) {
        const double r = radius[static_cast<std::size_t>(i)];
        if (r <= 0) continue;
        const double* row = dots.data() + (i - i0) * n;
        for (std::int64_t l = 0; l < n; ++l) {
          if (data.label[l] == data.label[i]) continue;
          const double dil = std::max(0.0, norms[static_cast<std::size_t>(i)] + norms[static_cast<std::size_t>(l)] - 2 * row[l]);
          if (dil < r) impostors[static_cast<std::size_t>(i)].emplace_back(l, dil);
        }
      }
    }
  }
  (void)threads;

  double push = 0;
  std::int64_t active = 0;
  std::vector<WeightedPair> pairs;
  for (std::int64_t i = 0; i < n; ++i) {
    for (int r = 0; r < k; ++r) {
      const auto j = t.index[static_cast<std::size_t>(i * k + r)];
      if (j < 0) continue;
      const double dij = target_d[static_cast<std::size_t>(i * k + r)];
      double wij = 1 - mu;
      for (const auto& [l, dil] : impostors[static_cast<std::size_t>(i)]) {
        const double h = 1 + dij - dil;
        if (h <= 0) continue;
        push += h;
        ++active;
        wij += mu;
        if (gradient) pairs.push_back({i, l, -mu});
      }
      if (gradient) pairs.push_back({i, j, wij});
    }
  }
  if (active_count) *active_count = active;
  if (gradient) {
    // d/dL of sum w ||L(x_a - x_b)||^2 = 2 L sum w (x_a - x_b)(x_a - x_b)^T.
    const Mat M = weighted_scatter(data, pairs);
    gradient->assign(static_cast<std::size_t>(d * d), 0.0);
    gemm(false, false, d, d, d, 2.0, L.data(), M.data(), 0.0, gradient->data());
  }
  return (1 - mu) * pull + mu * push;
}

LmnnResult lmnn(const Data& data, const LmnnOptions& o) {
  require_labels(data, "LMNN");
  if (o.k < 1) throw ConfigError(cat("LMNN k must be >= 1, got ", o.k));
  if (!(o.push_weight >= 0 && o.push_weight <= 1)) throw ConfigError("LMNN push_weight must be in [0, 1]");
  const int d = data.d;
  const LmnnTargets targets = lmnn_targets(data, o.k, o.threads);
  LmnnResult res;
  Mat L = identity(d), grad;
  std::int64_t active = 0;
  double obj = lmnn_objective(data, targets, L, o.push_weight, &grad, &active, o.impostors, o.threads);
  res.objective.push_back(obj);
  res.active_triplets.push_back(active);
  const double gnorm = frobenius(grad);
  double lr = gnorm > 0 ? o.learning_rate * frobenius(L) / gnorm : 0;
  for (res.iterations = 0; res.iterations < o.max_iterations && lr > 0; ++res.iterations) {
    if (o.stop && o.stop()) break;
    Mat trial = L;
    for (std::size_t i = 0; i < trial.size(); ++i) trial[i] -= lr * grad[i];
    Mat trial_grad;
    std::int64_t trial_active = 0;
    const double trial_obj = lmnn_objective(data, targets, trial, o.push_weight, &trial_grad, &trial_active, o.impostors, o.threads);
    if (trial_obj < obj) {
      const double gain = (obj - trial_obj) / std::max(obj, 1e-300);
      L = std::move(trial);
      grad = std::move(trial_grad);
      obj = trial_obj;
      active = trial_active;
      res.objective.push_back(obj);
      res.active_triplets.push_back(active);
      lr *= 1.01;  // bold driver: grow slowly while steps succeed
      if (gain < o.tolerance) {
        res.converged = true;
        ++res.iterations;
        break;
      }
    } else {
      lr *= 0.5;   // overshot: retry from the same L with half the step
      if (lr * gnorm < 1e-12 * frobenius(L)) {
        res.converged = true;
        ++res.iterations;
        break;
      }
    }
  }
  if (lr <= 0) res.converged = true;  // a zero gradient at the identity: nothing to descend
  res.stop_reason = res.converged ? "converged" : (o.stop && o.stop()) ? "stopped" : "iteration_cap";
  res.final_learning_rate = lr;
  res.transform.in_dim = res.transform.out_dim = d;
  res.transform.G = L;
  return res;
}

double knn_accuracy(const Data& train, const Data& test, const Transform& t, int k, int threads) {
  (void)threads;
  const bool same = train.x == test.x;
  std::vector<float> trf(train.x, train.x + train.n * train.d), tef(test.x, test.x + test.n * test.d);
  const auto a = t.apply(trf.data(), train.n), b = t.apply(tef.data(), test.n);
  const int m = t.out_dim;
  std::int64_t correct = 0;
  for (std::int64_t i = 0; i < test.n; ++i) {
    std::vector<std::pair<double, std::int64_t>> cand;
    for (std::int64_t j = 0; j < train.n; ++j) {
      if (same && i == j) continue;
      double s = 0;
      for (int c = 0; c < m; ++c) {
        const double diff = double(b[static_cast<std::size_t>(i * m + c)]) - a[static_cast<std::size_t>(j * m + c)];
        s += diff * diff;
      }
      cand.emplace_back(s, j);
    }
    const std::size_t kk = std::min<std::size_t>(static_cast<std::size_t>(k), cand.size());
    std::partial_sort(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(kk), cand.end());
    std::unordered_map<std::int64_t, int> votes;
    std::int64_t best = train.label[cand[0].second];
    int best_votes = 0;
    for (std::size_t r = 0; r < kk; ++r) {
      const auto l = train.label[cand[r].second];
      // Strictly more votes wins, so a tie stays with the label that got there first (nearer).
      if (++votes[l] > best_votes) best_votes = votes[l], best = l;
    }
    correct += best == test.label[i];
  }
  return test.n ? static_cast<double>(correct) / static_cast<double>(test.n) : 0.0;
}

}  // namespace embedflow::metriccore
