// Bayesian crowd clustering by mean-field variational Bayes; bcc.hpp has the model and the bound.
#include "bcc.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

namespace embedflow::crowd {
namespace {

// λ(ξ) = tanh(ξ/2) / (4ξ), whose limit at ξ = 0 is 1/8.
double jj_lambda(double xi) { return xi < 1e-4 ? 0.125 - xi * xi / 96.0 : std::tanh(xi / 2.0) / (4.0 * xi); }
double log_sigmoid(double v) { return v >= 0 ? -std::log1p(std::exp(-v)) : v - std::log1p(std::exp(v)); }

// ψ(a): the recurrence up to a >= 6, then the asymptotic series (error below 1e-12 there).
double digamma(double a) {
  double r = 0;
  while (a < 6) r -= 1 / a, a += 1;
  const double f = 1 / (a * a);
  return r + std::log(a) - 0.5 / a - f * (1.0 / 12 - f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240 - f / 132))));
}

// E log p(α) + H(q(α)) for p = Gamma(a0, b0), q = Gamma(a, b) (shape, rate).
double gamma_terms(double a0, double b0, double a, double b) {
  const double mean = a / b, mean_log = digamma(a) - std::log(b);
  return a0 * std::log(b0) - std::lgamma(a0) + (a0 - 1) * mean_log - b0 * mean + a - std::log(b) + std::lgamma(a) + (1 - a) * digamma(a);
}

// For each item (or worker), the pairs that involve it: CSR offsets into a pair list.
struct Incidence {
  std::vector<std::int64_t> offset, pair;
  Incidence(std::int64_t n, const std::vector<BccPair>& pairs, bool by_worker) : offset(static_cast<std::size_t>(n + 1), 0) {
    auto each = [&](auto&& f) {
      for (std::size_t p = 0; p < pairs.size(); ++p) {
        if (by_worker) {
          f(pairs[p].worker, p);
        } else {
          f(pairs[p].a, p);
          f(pairs[p].b, p);
        }
      }
    };
    each([&](std::int64_t k, std::size_t) { ++offset[static_cast<std::size_t>(k) + 1]; });
    for (std::size_t k = 1; k < offset.size(); ++k) offset[k] += offset[k - 1];
    pair.resize(static_cast<std::size_t>(offset.back()));
    std::vector<std::int64_t> next(offset.begin(), offset.end() - 1);
    each([&](std::int64_t k, std::size_t p) { pair[static_cast<std::size_t>(next[static_cast<std::size_t>(k)]++)] = static_cast<std::int64_t>(p); });
  }
};

// The state of one fit: q, and E[z_p] of every pair kept current as the factors move.
class Fit {
 public:
  Fit(const std::vector<BccPair>& pairs, BccPosterior& q) : pairs_(pairs), q_(q), ez_(pairs.size()) {}

  void refresh_means() {
    for (std::size_t p = 0; p < pairs_.size(); ++p) {
      double var = 0;
      q_.moments(pairs_[p].a, pairs_[p].b, pairs_[p].worker, ez_[p], var);
    }
  }

  // One Gaussian factor v (mean m, variance s) with prior precision `prior`; term(p, ec, ec2)
  // gives E[c_p] and E[c_p^2] of the coefficient c_p with z_p = c_p v + r_p.
  template <class Term>
  void update(double& m, double& s, double prior, const std::int64_t* begin, const std::int64_t* end, Term&& term) {
    double precision = prior, weighted = 0;
    for (const std::int64_t* it = begin; it != end; ++it) {
      const auto p = static_cast<std::size_t>(*it);
      double ec = 0, ec2 = 0;
      term(p, ec, ec2);
      const double lam = jj_lambda(q_.xi[p]), sign = pairs_[p].same ? 1.0 : -1.0;
      const double er = ez_[p] - m * ec;
      precision += 2 * lam * ec2;
      weighted += sign / 2 * ec - 2 * lam * ec * er;
    }
    const double old = m;
    m = weighted / precision;
    s = 1 / precision;
    for (const std::int64_t* it = begin; it != end; ++it) {
      const auto p = static_cast<std::size_t>(*it);
      double ec = 0, ec2 = 0;
      term(p, ec, ec2);
      ez_[p] += (m - old) * ec;
    }
  }

  void sweep(const Incidence& by_worker, const Incidence& by_item) {
    const std::int64_t D = q_.dim;
    auto sq = [](const std::vector<double>& mean, const std::vector<double>& var, std::size_t k) { return mean[k] * mean[k] + var[k]; };
    const double alpha_w = q_.alpha_w_shape / q_.alpha_w_rate, alpha_tau = q_.alpha_tau_shape / q_.alpha_tau_rate;
    for (std::int64_t j = 0; j < q_.workers; ++j) {
      const std::int64_t* b = by_worker.pair.data() + by_worker.offset[static_cast<std::size_t>(j)];
      const std::int64_t* e = by_worker.pair.data() + by_worker.offset[static_cast<std::size_t>(j) + 1];
      for (std::int64_t d = 0; d < D; ++d) {
        const auto k = static_cast<std::size_t>(j * D + d);
        update(q_.w_mean[k], q_.w_var[k], alpha_w, b, e, [&](std::size_t p, double& ec, double& ec2) {
          const auto xa = static_cast<std::size_t>(pairs_[p].a * D + d), xb = static_cast<std::size_t>(pairs_[p].b * D + d);
          ec = q_.x_mean[xa] * q_.x_mean[xb];
          ec2 = sq(q_.x_mean, q_.x_var, xa) * sq(q_.x_mean, q_.x_var, xb);
        });
      }
      update(q_.tau_mean[static_cast<std::size_t>(j)], q_.tau_var[static_cast<std::size_t>(j)], alpha_tau, b, e,
             [](std::size_t, double& ec, double& ec2) { ec = ec2 = 1.0; });
    }
    for (std::int64_t i = 0; i < q_.items; ++i) {
      const std::int64_t* b = by_item.pair.data() + by_item.offset[static_cast<std::size_t>(i)];
      const std::int64_t* e = by_item.pair.data() + by_item.offset[static_cast<std::size_t>(i) + 1];
      for (std::int64_t d = 0; d < D; ++d) {
        const auto k = static_cast<std::size_t>(i * D + d);
        update(q_.x_mean[k], q_.x_var[k], 1.0, b, e, [&](std::size_t p, double& ec, double& ec2) {
          const std::int64_t other = pairs_[p].a == i ? pairs_[p].b : pairs_[p].a;
          const auto xo = static_cast<std::size_t>(other * D + d), w = static_cast<std::size_t>(pairs_[p].worker * D + d);
          ec = q_.w_mean[w] * q_.x_mean[xo];
          ec2 = sq(q_.w_mean, q_.w_var, w) * sq(q_.x_mean, q_.x_var, xo);
        });
      }
    }
    double w2 = 0, tau2 = 0;
    for (std::size_t k = 0; k < q_.w_mean.size(); ++k) w2 += sq(q_.w_mean, q_.w_var, k);
    for (std::size_t k = 0; k < q_.tau_mean.size(); ++k) tau2 += sq(q_.tau_mean, q_.tau_var, k);
    q_.alpha_w_shape = q_.prior_shape + 0.5 * static_cast<double>(q_.w_mean.size());
    q_.alpha_w_rate = q_.prior_rate + 0.5 * w2;
    q_.alpha_tau_shape = q_.prior_shape + 0.5 * static_cast<double>(q_.tau_mean.size());
    q_.alpha_tau_rate = q_.prior_rate + 0.5 * tau2;
    update_xi();
  }

  void update_xi() {
    for (std::size_t p = 0; p < pairs_.size(); ++p) {
      double mean = 0, var = 0;
      q_.moments(pairs_[p].a, pairs_[p].b, pairs_[p].worker, mean, var);
      q_.xi[p] = std::sqrt(var + mean * mean);
    }
  }

 private:
  const std::vector<BccPair>& pairs_;
  BccPosterior& q_;
  std::vector<double> ez_;
};

// The starting E[x]: the top `dim` eigenvectors of the signed co-clustering matrix M_ab =
// sum over the pairs of (a, b) of (2 l - 1), by orthogonal iteration on M + c I (c: the largest
// absolute row sum, so the top of the shifted spectrum is M's largest algebraic eigenvalues),
// each scaled to unit mean square. A random start leaves mean-field updates of a bilinear model
// at its trivial fixed point (E[x] = E[w] = 0, every pair "different") on crowds with few labels
// per image; images that share clusters start close, as in spectral clustering.
std::vector<double> spectral_start(const std::vector<BccPair>& pairs, std::int64_t n, std::int64_t dim, std::mt19937_64& rng) {
  std::vector<double> row_abs(static_cast<std::size_t>(n), 0.0);
  for (const BccPair& p : pairs) row_abs[static_cast<std::size_t>(p.a)] += 1, row_abs[static_cast<std::size_t>(p.b)] += 1;
  double shift = 0;
  for (double v : row_abs) shift = std::max(shift, v);
  std::vector<double> v(static_cast<std::size_t>(n * dim));
  for (double& t : v) t = static_cast<double>(rng() >> 11) / 9007199254740992.0 - 0.5;
  auto orthonormalise = [&] {
    for (std::int64_t d = 0; d < dim; ++d) {
      for (std::int64_t e = 0; e < d; ++e) {
        double dot = 0;
        for (std::int64_t i = 0; i < n; ++i) dot += v[i * dim + d] * v[i * dim + e];
        for (std::int64_t i = 0; i < n; ++i) v[i * dim + d] -= dot * v[i * dim + e];
      }
      double norm = 0;
      for (std::int64_t i = 0; i < n; ++i) norm += v[i * dim + d] * v[i * dim + d];
      norm = std::sqrt(norm);
      for (std::int64_t i = 0; i < n; ++i) v[i * dim + d] = norm > 0 ? v[i * dim + d] / norm : 0.0;
    }
  };
  orthonormalise();
  for (int it = 0; it < 100; ++it) {
    std::vector<double> next(v.size());
    for (std::size_t k = 0; k < v.size(); ++k) next[k] = shift * v[k];
    for (const BccPair& p : pairs) {
      const double sign = p.same ? 1.0 : -1.0;
      for (std::int64_t d = 0; d < dim; ++d) {
        next[static_cast<std::size_t>(p.a * dim + d)] += sign * v[static_cast<std::size_t>(p.b * dim + d)];
        next[static_cast<std::size_t>(p.b * dim + d)] += sign * v[static_cast<std::size_t>(p.a * dim + d)];
      }
    }
    v = std::move(next);
    orthonormalise();
  }
  for (double& t : v) t *= std::sqrt(static_cast<double>(n));
  return v;
}

}  // namespace

void BccPosterior::moments(std::int64_t a, std::int64_t b, std::int64_t worker, double& mean, double& var) const {
  mean = tau_mean[static_cast<std::size_t>(worker)];
  var = tau_var[static_cast<std::size_t>(worker)];
  for (std::int64_t d = 0; d < dim; ++d) {
    const auto xa = static_cast<std::size_t>(a * dim + d), xb = static_cast<std::size_t>(b * dim + d),
               w = static_cast<std::size_t>(worker * dim + d);
    const double m = x_mean[xa] * w_mean[w] * x_mean[xb];
    mean += m;
    var += (x_mean[xa] * x_mean[xa] + x_var[xa]) * (w_mean[w] * w_mean[w] + w_var[w]) * (x_mean[xb] * x_mean[xb] + x_var[xb]) - m * m;
  }
}

double BccPosterior::probability_same(std::int64_t a, std::int64_t b, std::int64_t worker) const {
  double mean = 0, var = 0;
  moments(a, b, worker, mean, var);
  return 1.0 / (1.0 + std::exp(-mean / std::sqrt(1.0 + M_PI * var / 8.0)));
}

double bcc_bound(const BccPosterior& q, const std::vector<BccPair>& pairs) {
  double bound = 0;
  for (std::size_t p = 0; p < pairs.size(); ++p) {
    double mean = 0, var = 0;
    q.moments(pairs[p].a, pairs[p].b, pairs[p].worker, mean, var);
    const double xi = q.xi[p], sign = pairs[p].same ? 1.0 : -1.0;
    bound += log_sigmoid(xi) + (sign * mean - xi) / 2 - jj_lambda(xi) * (var + mean * mean - xi * xi);
  }
  // E log N(v; 0, 1/α) + H(N(m, s)) = 0.5 (E log α - E α (m^2 + s) + 1 + log s): the priors' and
  // the entropies' log 2π cancel.
  auto gaussians = [&](const std::vector<double>& m, const std::vector<double>& s, double e_alpha, double e_log_alpha) {
    double t = 0;
    for (std::size_t k = 0; k < m.size(); ++k) t += 0.5 * (e_log_alpha - e_alpha * (m[k] * m[k] + s[k]) + 1 + std::log(s[k]));
    return t;
  };
  bound += gaussians(q.x_mean, q.x_var, 1.0, 0.0);
  bound += gaussians(q.w_mean, q.w_var, q.alpha_w_shape / q.alpha_w_rate, digamma(q.alpha_w_shape) - std::log(q.alpha_w_rate));
  bound += gaussians(q.tau_mean, q.tau_var, q.alpha_tau_shape / q.alpha_tau_rate, digamma(q.alpha_tau_shape) - std::log(q.alpha_tau_rate));
  bound += gamma_terms(q.prior_shape, q.prior_rate, q.alpha_w_shape, q.alpha_w_rate);
  bound += gamma_terms(q.prior_shape, q.prior_rate, q.alpha_tau_shape, q.alpha_tau_rate);
  return bound;
}

BccPosterior fit_bcc(const std::vector<BccPair>& pairs, const BccOptions& o) {
  if (pairs.empty()) throw std::invalid_argument("no training pairs");
  for (std::size_t p = 0; p < pairs.size(); ++p) {
    const BccPair& r = pairs[p];
    if (r.a < 0 || r.a >= o.items || r.b < 0 || r.b >= o.items || r.a == r.b)
      throw std::invalid_argument("pair " + std::to_string(p) + " has image ids (" + std::to_string(r.a) + ", " + std::to_string(r.b) +
                                  "): they must differ and lie in 0.." + std::to_string(o.items - 1) + " (raise `images`)");
    if (r.worker < 0 || r.worker >= o.workers)
      throw std::invalid_argument("pair " + std::to_string(p) + " has worker " + std::to_string(r.worker) + " outside 0.." +
                                  std::to_string(o.workers - 1) + " (raise `workers`)");
  }
  BccPosterior q;
  q.items = o.items, q.workers = o.workers, q.dim = o.dim;
  q.prior_shape = o.prior_shape, q.prior_rate = o.prior_rate;
  const auto nx = static_cast<std::size_t>(o.items * o.dim), nw = static_cast<std::size_t>(o.workers * o.dim);
  // Box-Muller on the seed's 64-bit stream (std::normal_distribution differs between libraries).
  std::mt19937_64 rng(o.seed);
  auto uniform = [&] { return (static_cast<double>(rng() >> 11) + 0.5) / 9007199254740992.0; };
  q.x_mean = spectral_start(pairs, o.items, o.dim, rng);
  for (double& v : q.x_mean) v += o.init_std * std::sqrt(-2.0 * std::log(uniform())) * std::cos(2.0 * M_PI * uniform());
  q.x_var.assign(nx, o.init_std * o.init_std);
  q.w_mean.assign(nw, 0.0);
  q.w_var.assign(nw, 0.1);
  q.tau_mean.assign(static_cast<std::size_t>(o.workers), 0.0);
  q.tau_var.assign(static_cast<std::size_t>(o.workers), 0.1);
  q.alpha_w_shape = q.alpha_tau_shape = o.prior_shape;
  q.alpha_w_rate = q.alpha_tau_rate = o.prior_rate;
  q.xi.assign(pairs.size(), 0.0);
  Fit fit(pairs, q);
  fit.update_xi();
  q.bound.push_back(bcc_bound(q, pairs));
  const Incidence by_worker(o.workers, pairs, true), by_item(o.items, pairs, false);
  for (std::int64_t s = 0; s < o.sweeps; ++s) {
    fit.refresh_means();  // from scratch each sweep, so rounding in the running sums never accumulates
    fit.sweep(by_worker, by_item);
    q.bound.push_back(bcc_bound(q, pairs));
    const double gain = q.bound.back() - q.bound[q.bound.size() - 2];
    if (gain < o.tolerance * std::fabs(q.bound.back())) break;
  }
  return q;
}

}  // namespace embedflow::crowd
