#include "clustering.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "embedflow/error.hpp"
#include "embedflow/rng.hpp"
#include "retrieval.hpp"

namespace embedflow::evalcore {

std::vector<std::int64_t> assign_to_centers(MatrixView data, const std::vector<float>& centers, int threads) {
  const MatrixView c{centers.data(), static_cast<std::int64_t>(centers.size()) / data.cols, data.cols};
  BlockScorer scorer({DistanceKind::sqeuclidean, 1.0}, data, c);
  std::vector<std::int64_t> index;
  std::vector<float> score;
  knn_search(scorer, 1, false, 2048, 1024, threads, index, score);
  return index;
}

namespace {

KMeansResult kmeans_once(MatrixView X, const KMeansOptions& opt, int restart) {
  const std::int64_t n = X.rows, dim = X.cols, k = opt.clusters;
  // Restart 0 keeps the seed stream of a single run, so n_init: 1 reproduces earlier results.
  Rng rng(restart == 0 ? derive_seed(opt.seed, "kmeans++") : derive_seed(opt.seed, cat("kmeans++/", restart)));
  KMeansResult res;
  res.centers.assign(static_cast<std::size_t>(k * dim), 0.0f);
  auto set_center = [&](std::int64_t c, std::int64_t row) {
    std::copy(X.row(row), X.row(row) + dim, res.centers.begin() + c * dim);
  };
  auto sq = [&](const float* a, const float* b) {
    double s = 0;
    for (std::int64_t d = 0; d < dim; ++d) s += (double(a[d]) - b[d]) * (double(a[d]) - b[d]);
    return s;
  };
  // k-means++: each next centre drawn with probability proportional to D(x)^2.
  set_center(0, std::uniform_int_distribution<std::int64_t>(0, n - 1)(rng));
  std::vector<double> closest(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) closest[static_cast<std::size_t>(i)] = sq(X.row(i), res.centers.data());
  for (std::int64_t c = 1; c < k; ++c) {
    double total = 0;
    for (double v : closest) total += v;
    std::int64_t chosen = 0;
    if (total <= 0) {
      chosen = std::uniform_int_distribution<std::int64_t>(0, n - 1)(rng);
    } else {
      double u = std::uniform_real_distribution<double>(0, total)(rng);
      for (chosen = 0; chosen < n - 1; ++chosen) {
        u -= closest[static_cast<std::size_t>(chosen)];
        if (u <= 0) break;
      }
    }
    set_center(c, chosen);
    const float* cc = res.centers.data() + c * dim;
    for (std::int64_t i = 0; i < n; ++i)
      closest[static_cast<std::size_t>(i)] = std::min(closest[static_cast<std::size_t>(i)], sq(X.row(i), cc));
  }

  double variance = 0;
  for (std::int64_t d = 0; d < dim; ++d) {
    double m = 0, m2 = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      m += X.row(i)[d];
      m2 += double(X.row(i)[d]) * X.row(i)[d];
    }
    m /= static_cast<double>(n);
    variance += m2 / static_cast<double>(n) - m * m;
  }
  const double stop = opt.tolerance * variance / static_cast<double>(dim);

  std::vector<double> sums(static_cast<std::size_t>(k * dim));
  std::vector<std::int64_t> sizes(static_cast<std::size_t>(k));
  for (res.iterations = 1; res.iterations <= opt.max_iterations; ++res.iterations) {
    res.assignment = assign_to_centers(X, res.centers, opt.threads);
    std::fill(sums.begin(), sums.end(), 0.0);
    std::fill(sizes.begin(), sizes.end(), 0);
    for (std::int64_t i = 0; i < n; ++i) {
      const auto c = res.assignment[static_cast<std::size_t>(i)];
      sizes[static_cast<std::size_t>(c)]++;
      for (std::int64_t d = 0; d < dim; ++d) sums[static_cast<std::size_t>(c * dim + d)] += X.row(i)[d];
    }
    double shift = 0;
    for (std::int64_t c = 0; c < k; ++c) {
      std::vector<double> next(static_cast<std::size_t>(dim));
      if (sizes[static_cast<std::size_t>(c)] == 0) {
        // An empty cluster takes the point farthest from its centre, so k clusters survive.
        std::int64_t far = 0;
        double best = -1;
        for (std::int64_t i = 0; i < n; ++i) {
          const auto a = res.assignment[static_cast<std::size_t>(i)];
          const double dd = sq(X.row(i), res.centers.data() + a * dim);
          if (dd > best) best = dd, far = i;
        }
        for (std::int64_t d = 0; d < dim; ++d) next[static_cast<std::size_t>(d)] = X.row(far)[d];
        res.assignment[static_cast<std::size_t>(far)] = c;
      } else {
        for (std::int64_t d = 0; d < dim; ++d)
          next[static_cast<std::size_t>(d)] = sums[static_cast<std::size_t>(c * dim + d)] / static_cast<double>(sizes[static_cast<std::size_t>(c)]);
      }
      for (std::int64_t d = 0; d < dim; ++d) {
        float& cur = res.centers[static_cast<std::size_t>(c * dim + d)];
        shift += (next[static_cast<std::size_t>(d)] - cur) * (next[static_cast<std::size_t>(d)] - cur);
        cur = static_cast<float>(next[static_cast<std::size_t>(d)]);
      }
    }
    if (shift <= stop) break;
  }
  res.iterations = std::min(res.iterations, opt.max_iterations);
  res.assignment = assign_to_centers(X, res.centers, opt.threads);
  res.inertia = 0;
  for (std::int64_t i = 0; i < n; ++i)
    res.inertia += sq(X.row(i), res.centers.data() + res.assignment[static_cast<std::size_t>(i)] * dim);
  return res;
}

}  // namespace

KMeansResult kmeans(MatrixView X, const KMeansOptions& opt) {
  const std::int64_t n = X.rows, k = opt.clusters;
  if (k < 1) throw ConfigError(cat("k-means needs clusters >= 1, got ", k));
  if (opt.n_init < 1) throw ConfigError(cat("k-means needs n_init >= 1, got ", opt.n_init));
  if (n < k) throw DataError(cat("k-means with ", k, " clusters needs at least as many rows, got ", n));
  KMeansResult best;
  std::vector<double> inertia;
  for (int r = 0; r < opt.n_init; ++r) {
    KMeansResult res = kmeans_once(X, opt, r);
    inertia.push_back(res.inertia);
    // Strictly lower: ties keep the earlier restart, so the result does not depend on n_init
    // beyond the restarts that improve on it.
    if (r == 0 || res.inertia < best.inertia) {
      best = std::move(res);
      best.best_init = r;
    }
  }
  best.init_inertia = std::move(inertia);
  return best;
}

double assignment_inertia(MatrixView X, const std::vector<std::int64_t>& assignment, std::vector<float>& centers,
                          std::vector<std::int64_t>& ids) {
  if (static_cast<std::int64_t>(assignment.size()) != X.rows)
    throw DataError(cat("the assignment has ", assignment.size(), " values for ", X.rows, " rows"));
  std::map<std::int64_t, std::size_t> index;
  for (auto a : assignment) index.emplace(a, 0);
  ids.clear();
  for (auto& [id, i] : index) i = ids.size(), ids.push_back(id);
  const std::int64_t dim = X.cols;
  std::vector<double> sums(ids.size() * static_cast<std::size_t>(dim), 0.0);
  std::vector<std::int64_t> sizes(ids.size(), 0);
  for (std::int64_t i = 0; i < X.rows; ++i) {
    const std::size_t c = index[assignment[static_cast<std::size_t>(i)]];
    sizes[c]++;
    for (std::int64_t d = 0; d < dim; ++d) sums[c * static_cast<std::size_t>(dim) + static_cast<std::size_t>(d)] += X.row(i)[d];
  }
  centers.assign(sums.size(), 0.0f);
  for (std::size_t c = 0; c < ids.size(); ++c)
    for (std::int64_t d = 0; d < dim; ++d) {
      const std::size_t at = c * static_cast<std::size_t>(dim) + static_cast<std::size_t>(d);
      centers[at] = static_cast<float>(sums[at] / static_cast<double>(sizes[c]));
    }
  double inertia = 0;
  for (std::int64_t i = 0; i < X.rows; ++i) {
    const std::size_t c = index[assignment[static_cast<std::size_t>(i)]];
    for (std::int64_t d = 0; d < dim; ++d) {
      const double t = double(X.row(i)[d]) - sums[c * static_cast<std::size_t>(dim) + static_cast<std::size_t>(d)] /
                                                 static_cast<double>(sizes[c]);
      inertia += t * t;
    }
  }
  return inertia;
}

namespace {

struct Contingency {
  std::vector<std::int64_t> a_sizes, b_sizes;
  std::map<std::pair<std::int64_t, std::int64_t>, std::int64_t> cells;  // (a class, b class) -> count
  std::int64_t n = 0;
};

Contingency contingency(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b) {
  if (a.size() != b.size()) throw DataError(cat("label vectors differ in length: ", a.size(), " vs ", b.size()));
  std::map<std::int64_t, std::int64_t> ia, ib;
  for (auto v : a) ia.emplace(v, static_cast<std::int64_t>(ia.size()));
  for (auto v : b) ib.emplace(v, static_cast<std::int64_t>(ib.size()));
  Contingency c;
  c.n = static_cast<std::int64_t>(a.size());
  c.a_sizes.assign(ia.size(), 0);
  c.b_sizes.assign(ib.size(), 0);
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto x = ia[a[i]], y = ib[b[i]];
    c.a_sizes[static_cast<std::size_t>(x)]++;
    c.b_sizes[static_cast<std::size_t>(y)]++;
    c.cells[{x, y}]++;
  }
  return c;
}

double entropy(const std::vector<std::int64_t>& sizes, std::int64_t n) {
  double h = 0;
  for (auto s : sizes)
    if (s > 0) {
      const double p = static_cast<double>(s) / static_cast<double>(n);
      h -= p * std::log(p);
    }
  return h;
}

double mi(const Contingency& c) {
  double m = 0;
  const double n = static_cast<double>(c.n);
  for (const auto& [key, nij] : c.cells) {
    const double a = static_cast<double>(c.a_sizes[static_cast<std::size_t>(key.first)]);
    const double b = static_cast<double>(c.b_sizes[static_cast<std::size_t>(key.second)]);
    m += (static_cast<double>(nij) / n) * std::log(n * static_cast<double>(nij) / (a * b));
  }
  return std::max(0.0, m);
}

// Expected MI under the hypergeometric model of random labelings with fixed marginals
// (Vinh, Epps & Bailey 2010), as sklearn's expected_mutual_information.
double expected_mi(const Contingency& c) {
  const double N = static_cast<double>(c.n);
  double emi = 0;
  for (auto ai : c.a_sizes)
    for (auto bj : c.b_sizes) {
      const double a = static_cast<double>(ai), b = static_cast<double>(bj);
      const std::int64_t lo = std::max<std::int64_t>(1, ai + bj - c.n), hi = std::min(ai, bj);
      const double base = std::lgamma(a + 1) + std::lgamma(b + 1) + std::lgamma(N - a + 1) + std::lgamma(N - b + 1) -
                          std::lgamma(N + 1);
      for (std::int64_t nij = lo; nij <= hi; ++nij) {
        const double x = static_cast<double>(nij);
        const double log_p = base - std::lgamma(x + 1) - std::lgamma(a - x + 1) - std::lgamma(b - x + 1) -
                             std::lgamma(N - a - b + x + 1);
        emi += (x / N) * std::log(N * x / (a * b)) * std::exp(log_p);
      }
    }
  return emi;
}

}  // namespace

double mutual_information(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b) {
  return mi(contingency(a, b));
}

double normalized_mutual_information(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b) {
  const Contingency c = contingency(a, b);
  if (c.a_sizes.size() == c.b_sizes.size() && c.a_sizes.size() <= 1) return 1.0;
  const double norm = (entropy(c.a_sizes, c.n) + entropy(c.b_sizes, c.n)) / 2;
  return mi(c) / std::max(norm, 1e-300);
}

double adjusted_mutual_information(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b) {
  const Contingency c = contingency(a, b);
  if (c.a_sizes.size() == c.b_sizes.size() && c.a_sizes.size() <= 1) return 1.0;
  const double m = mi(c), emi = expected_mi(c);
  const double norm = (entropy(c.a_sizes, c.n) + entropy(c.b_sizes, c.n)) / 2;
  double denom = norm - emi;
  // sklearn guards the 0/0 of identical degenerate labelings the same way.
  const double tiny = 2.220446049250313e-16;
  if (denom < 0) denom = std::min(denom, -tiny);
  else denom = std::max(denom, tiny);
  return (m - emi) / denom;
}

double adjusted_rand_index(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b) {
  // scikit-learn's adjusted_rand_score through the pair confusion matrix, in double (the pair
  // counts reach n^2, whose products overflow 64-bit integers beyond n ~ 50k).
  const Contingency c = contingency(a, b);
  const double n = static_cast<double>(c.n);
  double sum_squares = 0, a2 = 0, b2 = 0;
  for (const auto& [key, nij] : c.cells) sum_squares += static_cast<double>(nij) * static_cast<double>(nij);
  for (auto s : c.a_sizes) a2 += static_cast<double>(s) * static_cast<double>(s);
  for (auto s : c.b_sizes) b2 += static_cast<double>(s) * static_cast<double>(s);
  const double tp = sum_squares - n;
  const double fp = b2 - sum_squares;  // same cluster of b, different class of a
  const double fn = a2 - sum_squares;
  const double tn = n * n - fp - fn - sum_squares;
  if (fn == 0 && fp == 0) return 1.0;  // identical partitions (special cases included)
  return 2.0 * (tp * tn - fn * fp) / ((tp + fn) * (fn + tn) + (tp + fp) * (fp + tn));
}

double purity(const std::vector<std::int64_t>& truth, const std::vector<std::int64_t>& clusters) {
  const Contingency c = contingency(truth, clusters);
  if (c.n == 0) return 0.0;
  std::vector<std::int64_t> best(c.b_sizes.size(), 0);
  for (const auto& [key, nij] : c.cells) {
    auto& m = best[static_cast<std::size_t>(key.second)];
    m = std::max(m, nij);
  }
  double sum = 0;
  for (auto m : best) sum += static_cast<double>(m);
  return sum / static_cast<double>(c.n);
}

}  // namespace embedflow::evalcore
