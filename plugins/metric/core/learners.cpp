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

namespace embedflow::metriccore {

namespace {

struct WeightedPair {
  std::int64_t a, b;
  double w;
};

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

// ---- SGD Mahalanobis -----------------------------------------------------------------------

double pairwise_loss(const Data& data, const Mat& A, const std::vector<std::pair<std::int64_t, std::int64_t>>& pairs) {
  if (pairs.empty()) return 0;
  const std::vector<double> dist = pair_distances(data, A, pairs);
  double s = 0;
  for (std::size_t t = 0; t < pairs.size(); ++t)
    s += (data.label[pairs[t].first] == data.label[pairs[t].second] ? 1.0 : -1.0) * dist[t];
  return s / static_cast<double>(pairs.size());
}

double triplet_loss(const Data& data, const Mat& A, const std::vector<std::array<std::int64_t, 3>>& triplets, double margin) {
  if (triplets.empty()) return 0;
  std::vector<std::pair<std::int64_t, std::int64_t>> legs;
  for (const auto& t : triplets) legs.emplace_back(t[0], t[1]), legs.emplace_back(t[0], t[2]);
  const std::vector<double> dist = pair_distances(data, A, legs);
  double s = 0;
  for (std::size_t t = 0; t < triplets.size(); ++t) s += std::max(0.0, margin + dist[2 * t] - dist[2 * t + 1]);
  return s / static_cast<double>(triplets.size());
}

namespace {

// Hardest positive and hardest negative of each anchor under A (distances in the space of its
// square-root factor), plus `random` random (positive, negative) draws per anchor. The hardest
// negative scan is the O(n^2 d) part: it runs as blocked GEMM (|z_i|^2 + |z_j|^2 - 2 z_i.z_j),
// the positives (a handful per identity) are scored directly.
std::vector<std::array<std::int64_t, 3>> mine_triplets(const Data& data, const Mat& A, int random, Rng& rng) {
  const int d = data.d;
  const std::int64_t n = data.n;
  const Mat G = sqrt_factor(A, d);
  const Mat z = project(data, G, d);
  std::unordered_map<std::int64_t, std::vector<std::int64_t>> members;
  for (std::int64_t i = 0; i < n; ++i) members[data.label[i]].push_back(i);
  std::vector<double> norms(static_cast<std::size_t>(n), 0.0);
  for (std::int64_t i = 0; i < n; ++i)
    for (int k = 0; k < d; ++k) norms[static_cast<std::size_t>(i)] += z[static_cast<std::size_t>(i * d + k)] * z[static_cast<std::size_t>(i * d + k)];
  std::vector<std::int64_t> hardest_negative(static_cast<std::size_t>(n), -1);
  const std::int64_t block = 256;
  std::vector<double> dots(static_cast<std::size_t>(std::min(block, n) * n));
  for (std::int64_t i0 = 0; i0 < n; i0 += block) {
    const std::int64_t i1 = std::min(n, i0 + block);
    gemm(false, true, static_cast<int>(i1 - i0), static_cast<int>(n), d, 1.0, z.data() + i0 * d, z.data(), 0.0, dots.data());
    for (std::int64_t i = i0; i < i1; ++i) {
      const double* row = dots.data() + (i - i0) * n;
      double best = std::numeric_limits<double>::infinity();
      std::int64_t arg = -1;
      for (std::int64_t j = 0; j < n; ++j) {
        if (data.label[j] == data.label[i]) continue;
        const double dij = norms[static_cast<std::size_t>(i)] + norms[static_cast<std::size_t>(j)] - 2 * row[j];
        if (dij < best) best = dij, arg = j;
      }
      hardest_negative[static_cast<std::size_t>(i)] = arg;
    }
  }
  std::vector<std::array<std::int64_t, 3>> out;
  std::uniform_int_distribution<std::int64_t> any(0, n - 1);
  for (std::int64_t i = 0; i < n; ++i) {
    const auto& same = members[data.label[i]];
    if (same.size() < 2 || static_cast<std::int64_t>(same.size()) == n) continue;
    std::int64_t hp = -1;
    double dp = -1;
    for (std::int64_t j : same) {
      if (j == i) continue;
      const double dij = sqdist(z.data() + i * d, z.data() + j * d, d);
      if (dij > dp) dp = dij, hp = j;
    }
    out.push_back({i, hp, hardest_negative[static_cast<std::size_t>(i)]});
    std::uniform_int_distribution<std::size_t> pick(0, same.size() - 1);
    for (int r = 0; r < random; ++r) {
      std::int64_t p = i, q = -1;
      while (p == i) p = same[pick(rng)];
      do q = any(rng);
      while (data.label[q] == data.label[i]);
      out.push_back({i, p, q});
    }
  }
  return out;
}

}  // namespace

SgdResult sgd_mahalanobis(const Data& train, const Data& val, const SgdOptions& o) {
  require_labels(train, "SGD Mahalanobis");
  if (o.batch_size < 2) throw ConfigError("SGD batch_size must be >= 2");
  const int d = train.d;
  Rng rng(derive_seed(o.seed, "sgd_mahalanobis"));
  SgdResult res;
  Mat A = identity(d);
  double lr = o.learning_rate;
  const int steps = o.steps_per_epoch > 0 ? o.steps_per_epoch
                                          : static_cast<int>(std::max<std::int64_t>(1, train.n / o.batch_size));
  std::uniform_int_distribution<std::int64_t> any(0, train.n - 1);

  // Fixed validation set: pairs (pairwise loss) or triplets mined once at the start.
  std::vector<std::pair<std::int64_t, std::int64_t>> val_pairs;
  std::vector<std::array<std::int64_t, 3>> val_triplets;
  if (val.n >= 2) {
    Rng vrng(derive_seed(o.seed, "validation"));
    if (o.loss == SgdLoss::pairwise) {
      std::uniform_int_distribution<std::int64_t> vany(0, val.n - 1);
      // Balanced: as many same-identity pairs as different ones, like the batches see on average.
      std::unordered_map<std::int64_t, std::vector<std::int64_t>> members;
      for (std::int64_t i = 0; i < val.n; ++i) members[val.label[i]].push_back(i);
      for (std::int64_t i = 0; i < val.n; ++i)
        for (std::int64_t j : members[val.label[i]])
          if (j > i) val_pairs.emplace_back(i, j);
      const std::size_t positives = val_pairs.size();
      for (std::size_t c = 0; c < std::max<std::size_t>(positives, 100); ++c) {
        std::int64_t a = vany(vrng), b = vany(vrng);
        if (val.label[a] != val.label[b]) val_pairs.emplace_back(a, b);
      }
    } else {
      val_triplets = mine_triplets(val, A, o.random_triplets, vrng);
    }
  }
  auto validation_loss = [&] {
    return o.loss == SgdLoss::pairwise ? pairwise_loss(val, A, val_pairs) : triplet_loss(val, A, val_triplets, o.margin);
  };
  double last_val = std::numeric_limits<double>::infinity();
  if (!val_pairs.empty() || !val_triplets.empty()) {
    last_val = validation_loss();
    res.validation_loss.push_back(last_val);
    res.validation_epoch.push_back(0);
  }

  for (int epoch = 1; epoch <= o.epochs; ++epoch) {
    if (o.stop && o.stop()) break;
    std::vector<std::array<std::int64_t, 3>> triplets;
    if (o.loss == SgdLoss::triplet) {
      // Re-mined every epoch so the hinge keeps working on the triplets that still violate it.
      triplets = mine_triplets(train, A, o.random_triplets, rng);
      if (triplets.empty()) throw DataError("no training triplets: every identity needs 2+ rows and 2+ identities must exist");
      std::shuffle(triplets.begin(), triplets.end(), rng);
    }
    double epoch_loss = 0;
    std::int64_t cursor = 0;
    for (int s = 0; s < steps; ++s) {
      std::vector<WeightedPair> pairs;
      double loss = 0;
      if (o.loss == SgdLoss::pairwise) {
        std::vector<std::int64_t> batch(static_cast<std::size_t>(o.batch_size));
        for (auto& b : batch) b = any(rng);
        std::int64_t same = 0, different = 0;
        for (std::size_t a = 0; a < batch.size(); ++a)
          for (std::size_t b = a + 1; b < batch.size(); ++b)
            if (batch[a] != batch[b]) (train.label[batch[a]] == train.label[batch[b]] ? same : different)++;
        const double all = static_cast<double>(same + different);
        // Unbalanced: every pair weighs 1/|pairs| (the report's loss). Balanced: positives and
        // negatives each weigh 1/2 in total, so the many negative pairs cannot reward spreading
        // every direction, nuisance ones included.
        const double w_same = o.balance_pairs ? (same ? 0.5 / static_cast<double>(same) : 0.0) : 1.0 / all;
        const double w_diff = o.balance_pairs ? (different ? 0.5 / static_cast<double>(different) : 0.0) : 1.0 / all;
        for (std::size_t a = 0; a < batch.size(); ++a)
          for (std::size_t b = a + 1; b < batch.size(); ++b) {
            if (batch[a] == batch[b]) continue;
            const bool is_same = train.label[batch[a]] == train.label[batch[b]];
            pairs.push_back({batch[a], batch[b], is_same ? w_same : -w_diff});
          }
      } else {
        const std::int64_t take = std::min<std::int64_t>(o.batch_size, static_cast<std::int64_t>(triplets.size()));
        const double w = 1.0 / static_cast<double>(take);
        std::vector<std::pair<std::int64_t, std::int64_t>> legs;  // (anchor, positive), (anchor, negative), ...
        for (std::int64_t t = 0; t < take; ++t) {
          const auto& tr = triplets[static_cast<std::size_t>((cursor + t) % static_cast<std::int64_t>(triplets.size()))];
          legs.emplace_back(tr[0], tr[1]);
          legs.emplace_back(tr[0], tr[2]);
        }
        const std::vector<double> dist = pair_distances(train, A, legs);
        for (std::int64_t t = 0; t < take; ++t) {
          const double h = o.margin + dist[static_cast<std::size_t>(2 * t)] - dist[static_cast<std::size_t>(2 * t + 1)];
          if (h <= 0) continue;
          loss += w * h;
          pairs.push_back({legs[static_cast<std::size_t>(2 * t)].first, legs[static_cast<std::size_t>(2 * t)].second, w});
          pairs.push_back({legs[static_cast<std::size_t>(2 * t + 1)].first, legs[static_cast<std::size_t>(2 * t + 1)].second, -w});
        }
        cursor += take;
      }
      if (pairs.empty()) continue;
      // dL/dA = sum w (x_a - x_b)(x_a - x_b)^T (the report's Appendix I: d d_A / dA = y y^T).
      const Mat grad = weighted_scatter(train, pairs);
      // The pairwise loss is linear in A: sum w d_A(a, b) = <A, grad>, O(d^2) instead of a
      // quadratic form per pair.
      if (o.loss == SgdLoss::pairwise)
        for (std::size_t i = 0; i < A.size(); ++i) loss += A[i] * grad[i];
      epoch_loss += loss;
      for (std::size_t i = 0; i < A.size(); ++i) A[i] -= lr * grad[i];
      project_psd(A, d);
      if (o.trace_normalize) {
        const double tr = trace(A, d);
        if (tr > 0)
          for (auto& a : A) a *= d / tr;
      }
    }
    res.train_loss.push_back(epoch_loss / steps);
    res.learning_rate.push_back(lr);
    res.epochs_run = epoch;
    res.max_negative_eigenvalue = std::min(res.max_negative_eigenvalue, min_eigenvalue(A, d));
    if (o.checkpoint) o.checkpoint(epoch, A);
    if (o.validate_every > 0 && epoch % o.validate_every == 0 && (!val_pairs.empty() || !val_triplets.empty())) {
      const double v = validation_loss();
      res.validation_loss.push_back(v);
      res.validation_epoch.push_back(epoch);
      if (v > last_val) lr *= 0.5;  // the report's schedule: halve when validation loss rises
      last_val = v;
    }
  }
  if (res.train_loss.size() >= 2) {
    const double last = res.train_loss.back(), before = res.train_loss[res.train_loss.size() - 2];
    res.last_relative_change = std::fabs(last - before) / std::max(std::fabs(before), 1e-300);
    res.converged = res.last_relative_change < o.tolerance;
  }
  res.A = A;
  res.transform.in_dim = res.transform.out_dim = d;
  res.transform.G = sqrt_factor(A, d);
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
