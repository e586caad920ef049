// SGD Mahalanobis: a PSD matrix A learned by projected gradient descent on a pairwise or a
// triplet hinge loss, with the learning rate halved whenever the validation loss rises.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <unordered_map>

#include "embedflow/error.hpp"
#include "embedflow/rng.hpp"
#include "learner_math.hpp"
#include "learners.hpp"

namespace embedflow::metriccore {

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

// Fixed validation set: pairs (pairwise loss) or triplets mined once at the start.
struct ValidationSet {
  std::vector<std::pair<std::int64_t, std::int64_t>> pairs;
  std::vector<std::array<std::int64_t, 3>> triplets;
  bool empty() const { return pairs.empty() && triplets.empty(); }
  double loss(const Data& val, const Mat& A, const SgdOptions& o) const {
    return o.loss == SgdLoss::pairwise ? pairwise_loss(val, A, pairs) : triplet_loss(val, A, triplets, o.margin);
  }
};

ValidationSet validation_set(const Data& val, const Mat& A, const SgdOptions& o) {
  ValidationSet v;
  if (val.n < 2) return v;
  Rng vrng(derive_seed(o.seed, "validation"));
  if (o.loss != SgdLoss::pairwise) {
    v.triplets = mine_triplets(val, A, o.random_triplets, vrng);
    return v;
  }
  std::uniform_int_distribution<std::int64_t> vany(0, val.n - 1);
  // Balanced: as many same-identity pairs as different ones, like the batches see on average.
  std::unordered_map<std::int64_t, std::vector<std::int64_t>> members;
  for (std::int64_t i = 0; i < val.n; ++i) members[val.label[i]].push_back(i);
  for (std::int64_t i = 0; i < val.n; ++i)
    for (std::int64_t j : members[val.label[i]])
      if (j > i) v.pairs.emplace_back(i, j);
  const std::size_t positives = v.pairs.size();
  for (std::size_t c = 0; c < std::max<std::size_t>(positives, 100); ++c) {
    std::int64_t a = vany(vrng), b = vany(vrng);
    if (val.label[a] != val.label[b]) v.pairs.emplace_back(a, b);
  }
  return v;
}

// A random batch of rows and every pair of distinct rows in it, weighted +w (same identity) or
// -w (different).
std::vector<WeightedPair> pairwise_batch(const Data& train, const SgdOptions& o,
                                         std::uniform_int_distribution<std::int64_t>& any, Rng& rng) {
  std::vector<WeightedPair> pairs;
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
  return pairs;
}

// The next batch_size triplets from `cursor` (wrapping): each one violating the margin adds its
// hinge to `loss` and its two legs to the pairs, +w towards the positive, -w from the negative.
std::vector<WeightedPair> triplet_batch(const Data& train, const Mat& A, const SgdOptions& o,
                                        const std::vector<std::array<std::int64_t, 3>>& triplets, std::int64_t& cursor,
                                        double& loss) {
  std::vector<WeightedPair> pairs;
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
  return pairs;
}

// One gradient step on A from the batch's pairs, back onto the PSD cone (and to trace d when
// asked). Returns the batch's loss, `loss` being what the triplet hinge already added.
double descend(const Data& train, const std::vector<WeightedPair>& pairs, const SgdOptions& o, double lr, double loss,
               Mat& A) {
  const int d = train.d;
  // dL/dA = sum w (x_a - x_b)(x_a - x_b)^T (the report's Appendix I: d d_A / dA = y y^T).
  const Mat grad = weighted_scatter(train, pairs);
  // The pairwise loss is linear in A: sum w d_A(a, b) = <A, grad>, O(d^2) instead of a
  // quadratic form per pair.
  if (o.loss == SgdLoss::pairwise)
    for (std::size_t i = 0; i < A.size(); ++i) loss += A[i] * grad[i];
  for (std::size_t i = 0; i < A.size(); ++i) A[i] -= lr * grad[i];
  project_psd(A, d);
  if (o.trace_normalize) {
    const double tr = trace(A, d);
    if (tr > 0)
      for (auto& a : A) a *= d / tr;
  }
  return loss;
}

// One epoch of `steps` batches; returns the sum of the batches' losses.
double sgd_epoch(const Data& train, const SgdOptions& o, int steps, double lr, Rng& rng,
                 std::uniform_int_distribution<std::int64_t>& any, Mat& A) {
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
    double loss = 0;
    const std::vector<WeightedPair> pairs = o.loss == SgdLoss::pairwise
                                                ? pairwise_batch(train, o, any, rng)
                                                : triplet_batch(train, A, o, triplets, cursor, loss);
    if (pairs.empty()) continue;
    epoch_loss += descend(train, pairs, o, lr, loss, A);
  }
  return epoch_loss;
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
  const ValidationSet validation = validation_set(val, A, o);
  double last_val = std::numeric_limits<double>::infinity();
  if (!validation.empty()) {
    last_val = validation.loss(val, A, o);
    res.validation_loss.push_back(last_val);
    res.validation_epoch.push_back(0);
  }
  for (int epoch = 1; epoch <= o.epochs; ++epoch) {
    if (o.stop && o.stop()) break;
    const double epoch_loss = sgd_epoch(train, o, steps, lr, rng, any, A);
    res.train_loss.push_back(epoch_loss / steps);
    res.learning_rate.push_back(lr);
    res.epochs_run = epoch;
    res.max_negative_eigenvalue = std::min(res.max_negative_eigenvalue, min_eigenvalue(A, d));
    if (o.checkpoint) o.checkpoint(epoch, A);
    if (o.validate_every > 0 && epoch % o.validate_every == 0 && !validation.empty()) {
      const double v = validation.loss(val, A, o);
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

}  // namespace embedflow::metriccore
