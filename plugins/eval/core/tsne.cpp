// Exact t-SNE; tsne.hpp states the algorithm and where each constant comes from.
#include "tsne.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>

#include "arena_loop.hpp"

namespace embedflow::evalcore {
namespace {

constexpr double kMachineEpsilon = std::numeric_limits<double>::epsilon();
constexpr std::int64_t kExplorationIterations = 250;  // scikit-learn's _EXPLORATION_N_ITER
constexpr std::int64_t kCheckEvery = 50;              // n_iter_check
constexpr double kMinGradNorm = 1e-7;
constexpr double kMinGain = 0.01;

std::vector<double> squared_distances(const std::vector<double>& x, std::int64_t n, std::int64_t d) {
  std::vector<double> sq(static_cast<std::size_t>(n * n), 0.0);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = i + 1; j < n; ++j) {
      double s = 0;
      for (std::int64_t k = 0; k < d; ++k) {
        const double t = x[i * d + k] - x[j * d + k];
        s += t * t;
      }
      sq[i * n + j] = sq[j * n + i] = s;
    }
  return sq;
}

// Row i of the conditional distribution p_{j|i} whose entropy is log(perplexity): scikit-learn's
// _binary_search_perplexity on the precision beta of exp(-d_ij beta).
void conditional_row(const double* sq, std::int64_t n, std::int64_t i, double desired_entropy, double* p) {
  double beta = 1.0, beta_min = -std::numeric_limits<double>::infinity(), beta_max = std::numeric_limits<double>::infinity();
  for (int step = 0; step < 100; ++step) {
    double sum = 0;
    for (std::int64_t j = 0; j < n; ++j) {
      p[j] = j == i ? 0.0 : std::exp(-sq[j] * beta);
      sum += p[j];
    }
    if (sum == 0.0) sum = 1e-8;
    double sum_dist_p = 0;
    for (std::int64_t j = 0; j < n; ++j) {
      p[j] /= sum;
      sum_dist_p += sq[j] * p[j];
    }
    const double diff = std::log(sum) + beta * sum_dist_p - desired_entropy;
    if (std::fabs(diff) <= 1e-5) break;
    if (diff > 0) {
      beta_min = beta;
      beta = std::isinf(beta_max) ? beta * 2.0 : (beta + beta_max) / 2.0;
    } else {
      beta_max = beta;
      beta = std::isinf(beta_min) ? beta / 2.0 : (beta + beta_min) / 2.0;
    }
  }
}

// The first two principal components of x (power iteration on the covariance, the second
// orthogonalised against the first), scaled as scikit-learn's init="pca": std of column 0 = 1e-4.
std::vector<double> pca_init(const std::vector<double>& x, std::int64_t n, std::int64_t d) {
  std::vector<double> mean(static_cast<std::size_t>(d), 0.0), c(x.size());
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t k = 0; k < d; ++k) mean[k] += x[i * d + k] / static_cast<double>(n);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t k = 0; k < d; ++k) c[i * d + k] = x[i * d + k] - mean[k];
  auto apply = [&](const std::vector<double>& v) {  // C^T (C v)
    std::vector<double> cv(static_cast<std::size_t>(n), 0.0), out(static_cast<std::size_t>(d), 0.0);
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t k = 0; k < d; ++k) cv[i] += c[i * d + k] * v[k];
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t k = 0; k < d; ++k) out[k] += c[i * d + k] * cv[i];
    return out;
  };
  auto normalise = [](std::vector<double>& v) {
    double s = 0;
    for (double t : v) s += t * t;
    s = std::sqrt(s);
    if (s > 0)
      for (double& t : v) t /= s;
    return s;
  };
  std::vector<std::vector<double>> comps;
  for (int comp = 0; comp < 2; ++comp) {
    std::vector<double> v(static_cast<std::size_t>(d));
    for (std::int64_t k = 0; k < d; ++k) v[k] = 1.0 + 0.1 * static_cast<double>((k * 7 + comp * 3) % 11);
    auto orthogonalise = [&](std::vector<double>& w) {
      for (const auto& u : comps) {
        double dot = 0;
        for (std::int64_t k = 0; k < d; ++k) dot += w[k] * u[k];
        for (std::int64_t k = 0; k < d; ++k) w[k] -= dot * u[k];
      }
    };
    orthogonalise(v);
    normalise(v);
    for (int it = 0; it < 1000; ++it) {
      std::vector<double> w = apply(v);
      orthogonalise(w);
      if (normalise(w) == 0) break;  // no variance left in this direction
      double change = 0;
      for (std::int64_t k = 0; k < d; ++k) change = std::max(change, std::fabs(w[k] - v[k]));
      v = std::move(w);
      if (change < 1e-10) break;
    }
    comps.push_back(v);
  }
  std::vector<double> y(static_cast<std::size_t>(n * 2), 0.0);
  for (std::int64_t i = 0; i < n; ++i)
    for (int comp = 0; comp < 2; ++comp)
      for (std::int64_t k = 0; k < d; ++k) y[i * 2 + comp] += c[i * d + k] * comps[comp][k];
  double m = 0, s = 0;
  for (std::int64_t i = 0; i < n; ++i) m += y[i * 2] / static_cast<double>(n);
  for (std::int64_t i = 0; i < n; ++i) s += (y[i * 2] - m) * (y[i * 2] - m) / static_cast<double>(n);
  const double scale = s > 0 ? 1e-4 / std::sqrt(s) : 1.0;
  for (double& t : y) t *= scale;
  return y;
}

// N(0, 1e-4^2) by Box-Muller from the seed's 64-bit stream (std::normal_distribution differs
// between standard libraries; this does not).
std::vector<double> random_init(std::int64_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto uniform = [&] { return (static_cast<double>(rng() >> 11) + 0.5) / 9007199254740992.0; };
  std::vector<double> y(static_cast<std::size_t>(n * 2));
  for (std::size_t i = 0; i < y.size(); i += 2) {
    const double r = std::sqrt(-2.0 * std::log(uniform())), a = 2.0 * M_PI * uniform();
    y[i] = 1e-4 * r * std::cos(a);
    y[i + 1] = 1e-4 * r * std::sin(a);
  }
  return y;
}

// The gradient of KL(P || Q) at y, and with `with_error` KL itself (scikit-learn's _kl_divergence
// with one degree of freedom; like scikit-learn, only the iterations that check progress pay for
// the logarithms).
double kl_gradient(const std::vector<double>& p, double exaggeration, const std::vector<double>& y, std::int64_t n, int threads,
                   bool with_error, std::vector<double>& num, std::vector<double>& grad) {
  std::vector<double> row_sum(static_cast<std::size_t>(n), 0.0);
  arena_for(n, threads, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      double s = 0;
      for (std::int64_t j = 0; j < n; ++j) {
        const double dx = y[i * 2] - y[j * 2], dy = y[i * 2 + 1] - y[j * 2 + 1];
        const double t = j == i ? 0.0 : 1.0 / (1.0 + dx * dx + dy * dy);
        num[i * n + j] = t;
        s += t;
      }
      row_sum[i] = s;
    }
  });
  double total = 0;
  for (double s : row_sum) total += s;
  std::vector<double> row_kl(static_cast<std::size_t>(n), 0.0);
  arena_for(n, threads, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      double gx = 0, gy = 0, kl = 0;
      for (std::int64_t j = 0; j < n; ++j) {
        if (j == i) continue;
        const double q = std::max(num[i * n + j] / total, kMachineEpsilon), pij = p[i * n + j] * exaggeration;
        if (with_error) kl += pij * std::log(std::max(pij, kMachineEpsilon) / q);
        const double w = (pij - q) * num[i * n + j];
        gx += w * (y[i * 2] - y[j * 2]);
        gy += w * (y[i * 2 + 1] - y[j * 2 + 1]);
      }
      grad[i * 2] = 4.0 * gx;
      grad[i * 2 + 1] = 4.0 * gy;
      row_kl[i] = kl;
    }
  });
  double kl = 0;
  for (double v : row_kl) kl += v;
  return kl;
}

struct Stage {
  std::int64_t first = 0, last = 0, without_progress = 0;
  double momentum = 0, exaggeration = 1;
};

// One stage of scikit-learn's _gradient_descent; returns the last iteration run and sets `error`.
std::int64_t descend(const std::vector<double>& p, std::vector<double>& y, std::int64_t n, const Stage& stage, double rate,
                     int threads, double& error) {
  std::vector<double> update(y.size(), 0.0), gains(y.size(), 1.0), grad(y.size()), num(static_cast<std::size_t>(n * n));
  double best_error = std::numeric_limits<double>::max();
  std::int64_t best_iter = stage.first, i = stage.first;
  for (; i < stage.last; ++i) {
    const bool check = (i + 1) % kCheckEvery == 0;
    error = kl_gradient(p, stage.exaggeration, y, n, threads, check || i == stage.last - 1, num, grad);
    double norm = 0;
    for (std::size_t k = 0; k < y.size(); ++k) {
      gains[k] = update[k] * grad[k] < 0.0 ? gains[k] + 0.2 : gains[k] * 0.8;
      gains[k] = std::max(gains[k], kMinGain);
      grad[k] *= gains[k];
      update[k] = stage.momentum * update[k] - rate * grad[k];
      y[k] += update[k];
      norm += grad[k] * grad[k];
    }
    if (check) {
      if (error < best_error) {
        best_error = error;
        best_iter = i;
      } else if (i - best_iter > stage.without_progress) {
        break;
      }
      if (std::sqrt(norm) <= kMinGradNorm) break;
    }
  }
  return std::min(i, stage.last - 1);
}

}  // namespace

std::vector<double> tsne_joint_probabilities(const std::vector<double>& x, std::int64_t n, std::int64_t d, double perplexity) {
  const std::vector<double> sq = squared_distances(x, n, d);
  std::vector<double> cond(static_cast<std::size_t>(n * n), 0.0);
  const double entropy = std::log(perplexity);
  for (std::int64_t i = 0; i < n; ++i) conditional_row(&sq[i * n], n, i, entropy, &cond[i * n]);
  double sum = 0;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) sum += cond[i * n + j] + cond[j * n + i];
  sum = std::max(sum, kMachineEpsilon);
  std::vector<double> p(static_cast<std::size_t>(n * n), 0.0);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      if (i != j) p[i * n + j] = std::max((cond[i * n + j] + cond[j * n + i]) / sum, kMachineEpsilon);
  return p;
}

TsneResult tsne(const std::vector<double>& x, std::int64_t n, std::int64_t d, const TsneOptions& o) {
  if (n < 2) throw std::invalid_argument("t-SNE needs at least 2 points, got " + std::to_string(n));
  if (!(o.perplexity > 0) || o.perplexity >= static_cast<double>(n))
    throw std::invalid_argument("perplexity must be in (0, " + std::to_string(n) + "), the number of points; got " +
                                std::to_string(o.perplexity));
  if (static_cast<std::int64_t>(x.size()) != n * d) throw std::invalid_argument("x holds " + std::to_string(x.size()) + " values, not N x D");
  for (std::size_t k = 0; k < x.size(); ++k)
    if (!std::isfinite(x[k]))
      throw std::invalid_argument("point " + std::to_string(static_cast<std::int64_t>(k) / d) + " has a non-finite coordinate");
  TsneResult r;
  r.learning_rate = o.learning_rate > 0 ? o.learning_rate : std::max(static_cast<double>(n) / o.early_exaggeration / 4.0, 50.0);
  const std::vector<double> p = tsne_joint_probabilities(x, n, d, o.perplexity);
  r.embedding = o.pca_init ? pca_init(x, n, d) : random_init(n, o.seed);
  const std::int64_t explore = std::min(kExplorationIterations, o.iterations);
  double error = 0;
  std::int64_t it = descend(p, r.embedding, n, {0, explore, kExplorationIterations, 0.5, o.early_exaggeration},
                            r.learning_rate, o.threads, error);
  if (o.iterations > explore)
    it = descend(p, r.embedding, n, {it + 1, o.iterations, o.iterations_without_progress, 0.8, 1.0}, r.learning_rate, o.threads, error);
  r.kl_divergence = error;
  r.iterations = it + 1;
  return r;
}

}  // namespace embedflow::evalcore
