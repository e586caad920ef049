#include "crowd.hpp"

#include <algorithm>
#include <map>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

#include "prng.hpp"

namespace gen_crowd {

double salience(const Dataset& data, const std::vector<std::size_t>& images, std::size_t k) {
  const std::size_t n = data.attributes[k].values.size();
  if (n < 2 || images.empty()) return 0;
  std::vector<double> count(n, 0);
  for (std::size_t i : images) count[static_cast<std::size_t>(data.values[i][k])] += 1;
  double sq = 0;
  for (double c : count) sq += (c / static_cast<double>(images.size())) * (c / static_cast<double>(images.size()));
  const double s = (1 - sq) / (1 - 1.0 / static_cast<double>(n));
  return std::clamp(s, 0.0, 1.0);
}

void choice_probabilities(const Worker& worker, const Grid& grid, double context_strength, std::vector<double>& p) {
  const std::size_t K = grid.salience.size();
  p.assign(K, 0.0);
  if (worker.noisy) return;
  double total = 0;
  for (std::size_t k = 0; k < K; ++k)
    if (grid.salience[k] > 0) total += (p[k] = worker.bias[k] * std::exp(context_strength * grid.salience[k]));
  if (total <= 0) {
    p.assign(K, 0.0);
    return;
  }
  for (double& x : p) x /= total;
}

std::vector<double> choice_probabilities(const Worker& worker, const Grid& grid, double context_strength) {
  std::vector<double> p;
  choice_probabilities(worker, grid, context_strength, p);
  return p;
}

Ceilings retrieval_ceilings(const Crowd& c, double context_strength) {
  Ceilings r;
  const std::size_t W = c.workers.size(), G = c.grids.size();
  if (G == 0 || c.grids[0].salience.empty()) return r;
  const std::size_t K = c.grids[0].salience.size();
  // Average P(k | w, g) over grids (per worker) and over careful workers (per grid).
  std::vector<std::vector<double>> by_worker(W, std::vector<double>(K, 0.0)), by_grid(G, std::vector<double>(K, 0.0));
  // exp(t s_k(g)) once per grid (0 for constant attributes): W x G products, not W x G exps.
  std::vector<double> lift(G * K);
  for (std::size_t g = 0; g < G; ++g)
    for (std::size_t k = 0; k < K; ++k)
      lift[g * K + k] = c.grids[g].salience[k] > 0 ? std::exp(context_strength * c.grids[g].salience[k]) : 0.0;
  std::vector<double> p(K);
  for (std::size_t w = 0; w < W; ++w) {
    if (c.workers[w].noisy) continue;
    const std::vector<double>& bias = c.workers[w].bias;
    for (std::size_t g = 0; g < G; ++g) {
      double total = 0;
      for (std::size_t k = 0; k < K; ++k) total += (p[k] = bias[k] * lift[g * K + k]);
      if (total <= 0) continue;
      for (std::size_t k = 0; k < K; ++k) {
        by_worker[w][k] += p[k] / total;
        by_grid[g][k] += p[k] / total;
      }
    }
  }
  const auto argmax = [](const std::vector<double>& v) { return static_cast<std::size_t>(std::max_element(v.begin(), v.end()) - v.begin()); };
  for (const Submission& s : c.submissions) {
    if (s.attribute < 0) continue;
    ++r.attributed;
    r.mixture += *std::max_element(s.p.begin(), s.p.end());
    r.worker_only += s.p[argmax(by_worker[static_cast<std::size_t>(s.worker)])];
    r.context_only += s.p[argmax(by_grid[static_cast<std::size_t>(s.grid)])];
  }
  if (r.attributed) {
    r.mixture /= static_cast<double>(r.attributed);
    r.worker_only /= static_cast<double>(r.attributed);
    r.context_only /= static_cast<double>(r.attributed);
  }
  return r;
}

namespace {

// Images bucketed by their full attribute combination, so a grid's candidates are gathered per
// combination (at most a few hundred) instead of by scanning every image for every grid.
struct ComboIndex {
  std::vector<std::vector<int>> combos;            // attribute values of each combination
  std::vector<std::vector<std::size_t>> images;    // dataset rows of each combination, ascending

  explicit ComboIndex(const Dataset& data) {
    std::map<std::vector<int>, std::size_t> at;
    for (std::size_t i = 0; i < data.size(); ++i) {
      auto [it, fresh] = at.try_emplace(data.values[i], combos.size());
      if (fresh) {
        combos.push_back(data.values[i]);
        images.emplace_back();
      }
      images[it->second].push_back(i);
    }
  }
};

Grid sample_grid(const Dataset& data, const ComboIndex& index, const CrowdOptions& o, std::int64_t g) {
  Prng rng(o.seed, "grid", static_cast<std::uint64_t>(g));
  const std::size_t K = data.attributes.size();
  const std::size_t S = static_cast<std::size_t>(o.rows * o.cols);
  // allowed[k][v]: value v of attribute k may appear.
  std::vector<std::vector<char>> allowed(K);
  std::vector<std::size_t> constrained;
  for (std::size_t k = 0; k < K; ++k) {
    const auto n = static_cast<std::int64_t>(data.attributes[k].values.size());
    allowed[k].assign(static_cast<std::size_t>(n), 1);
    const double u = rng.uniform();
    std::int64_t keep = n;
    if (u < o.focus_fix) keep = 1;
    else if (u < o.focus_fix + o.focus_pair && n > 2) keep = 2;
    if (keep < n) {
      std::vector<std::int64_t> order(static_cast<std::size_t>(n));
      std::iota(order.begin(), order.end(), 0);
      rng.shuffle(order);
      allowed[k].assign(static_cast<std::size_t>(n), 0);
      for (std::int64_t j = 0; j < keep; ++j) allowed[k][static_cast<std::size_t>(order[static_cast<std::size_t>(j)])] = 1;
      constrained.push_back(k);
    }
  }
  // Candidate buckets and their cumulative sizes.
  std::vector<std::size_t> buckets, cumulative;
  for (;;) {
    buckets.clear();
    cumulative.clear();
    std::size_t total = 0;
    for (std::size_t c = 0; c < index.combos.size(); ++c) {
      bool ok = true;
      for (std::size_t k : constrained)
        if (!allowed[k][static_cast<std::size_t>(index.combos[c][k])]) {
          ok = false;
          break;
        }
      if (!ok) continue;
      buckets.push_back(c);
      cumulative.push_back(total += index.images[c].size());
    }
    if (total >= S || constrained.empty()) break;
    // Too few images fit: free a random constrained attribute and try again.
    const std::size_t drop = static_cast<std::size_t>(rng.below(static_cast<std::int64_t>(constrained.size())));
    allowed[constrained[drop]].assign(allowed[constrained[drop]].size(), 1);
    constrained.erase(constrained.begin() + static_cast<std::ptrdiff_t>(drop));
  }
  // S distinct candidates by rejection (S is small next to the candidates, except in tiny
  // datasets where a few redraws cost nothing); draw order is the display order.
  Grid grid;
  const auto total = static_cast<std::int64_t>(cumulative.back());
  std::vector<std::int64_t> ranks;
  while (ranks.size() < S) {
    const std::int64_t r = rng.below(total);
    if (std::find(ranks.begin(), ranks.end(), r) != ranks.end()) continue;
    ranks.push_back(r);
    const std::size_t b = static_cast<std::size_t>(std::upper_bound(cumulative.begin(), cumulative.end(), static_cast<std::size_t>(r)) - cumulative.begin());
    const std::size_t offset = static_cast<std::size_t>(r) - (b == 0 ? 0 : cumulative[b - 1]);
    grid.images.push_back(index.images[buckets[b]][offset]);
  }
  for (std::size_t k = 0; k < K; ++k) {
    grid.salience.push_back(salience(data, grid.images, k));
    grid.allowed.push_back(static_cast<int>(std::count(allowed[k].begin(), allowed[k].end(), 1)));
  }
  return grid;
}

std::vector<Worker> make_workers(const Dataset& data, const CrowdOptions& o) {
  const std::size_t K = data.attributes.size();
  std::vector<Worker> workers(static_cast<std::size_t>(o.workers));
  Prng pick(o.seed, "noisy");
  std::vector<std::size_t> order(workers.size());
  std::iota(order.begin(), order.end(), 0);
  pick.shuffle(order);
  const auto noisy = static_cast<std::size_t>(std::llround(o.noisy_fraction * static_cast<double>(workers.size())));
  for (std::size_t j = 0; j < noisy; ++j) workers[order[j]].noisy = true;
  const auto open = std::min(workers.size() - noisy,
                             static_cast<std::size_t>(std::llround(o.open_fraction * static_cast<double>(workers.size()))));
  for (std::size_t j = noisy; j < noisy + open; ++j) workers[order[j]].open = true;
  for (std::size_t w = 0; w < workers.size(); ++w) {
    Prng rng(o.seed, "worker", w);
    // Drawn for noisy workers too, so the noisy fraction does not shift the others' draws.
    std::vector<double> bias = rng.dirichlet(K, o.bias_concentration);
    const double coarse = rng.uniform(0, o.coarsen_max);
    // A separate stream, so open workers leave every other worker's draws as they were.
    if (workers[w].open) bias = Prng(o.seed, "open-bias", w).dirichlet(K, o.open_concentration);
    workers[w].bias = workers[w].noisy ? std::vector<double>(K, 0.0) : bias;
    workers[w].coarseness = workers[w].noisy ? 0 : coarse;
  }
  return workers;
}

// The worker of every annotation slot (grid-major, workers_per_grid slots per grid).
std::vector<std::int64_t> assign_workers(const CrowdOptions& o) {
  const std::int64_t A = o.grids * o.workers_per_grid, W = o.workers;
  Prng rng(o.seed, "assign");
  const std::int64_t floor_each = std::min(o.min_grids_per_worker, A / W);
  std::vector<std::int64_t> slots;
  slots.reserve(static_cast<std::size_t>(A));
  for (std::int64_t w = 0; w < W; ++w)
    for (std::int64_t j = 0; j < floor_each; ++j) slots.push_back(w);
  std::vector<double> activity(static_cast<std::size_t>(W));
  for (double& a : activity) a = std::exp(0.75 * rng.normal());
  std::vector<double> cumulative(activity.size());
  std::partial_sum(activity.begin(), activity.end(), cumulative.begin());
  while (static_cast<std::int64_t>(slots.size()) < A) {
    const double u = rng.uniform() * cumulative.back();
    const auto it = std::upper_bound(cumulative.begin(), cumulative.end(), u);
    slots.push_back(std::min<std::int64_t>(it - cumulative.begin(), W - 1));
  }
  rng.shuffle(slots);
  // A grid must not get the same worker twice: swap duplicates with a later slot whose worker
  // is new to this grid and whose own grid does not already hold this one.
  const std::int64_t per = o.workers_per_grid;
  auto grid_has = [&](std::int64_t g, std::int64_t worker, std::int64_t except) {
    for (std::int64_t s = g * per; s < (g + 1) * per; ++s)
      if (s != except && slots[static_cast<std::size_t>(s)] == worker) return true;
    return false;
  };
  for (std::int64_t g = 0; g < o.grids && per > 1; ++g)
    for (std::int64_t s = g * per; s < (g + 1) * per; ++s) {
      if (!grid_has(g, slots[static_cast<std::size_t>(s)], s)) continue;
      bool fixed = false;
      for (std::int64_t t = 0; t < A && !fixed; ++t) {
        const std::int64_t h = t / per;
        if (h == g) continue;
        const std::int64_t mine = slots[static_cast<std::size_t>(s)], theirs = slots[static_cast<std::size_t>(t)];
        if (!grid_has(g, theirs, s) && !grid_has(h, mine, t)) {
          std::swap(slots[static_cast<std::size_t>(s)], slots[static_cast<std::size_t>(t)]);
          fixed = true;
        }
      }
      if (!fixed) throw std::invalid_argument("cannot give every grid distinct workers; use more workers");
    }
  return slots;
}

void random_clustering(Prng& rng, const CrowdOptions& o, std::size_t S, Submission& sub) {
  const int m = 1 + static_cast<int>(rng.below(o.max_clusters));
  sub.cluster.resize(S);
  for (int& c : sub.cluster) c = static_cast<int>(rng.below(m));
}

// Cluster ids renumbered by first appearance, as a GUI's group numbers would be.
void renumber(Submission& sub) {
  std::vector<int> from;
  for (int& c : sub.cluster) {
    auto it = std::find(from.begin(), from.end(), c);
    if (it == from.end()) {
      from.push_back(c);
      c = static_cast<int>(from.size()) - 1;
    } else {
      c = static_cast<int>(it - from.begin());
    }
  }
  sub.clusters = static_cast<int>(from.size());
}

Submission annotate(const Dataset& data, const CrowdOptions& o, const Grid& grid, std::int64_t g, std::int64_t slot,
                    std::int64_t w, const Worker& worker) {
  Prng rng(o.seed, "submission", static_cast<std::uint64_t>(g * o.workers_per_grid + slot));
  const std::size_t K = data.attributes.size();
  const std::size_t S = grid.images.size();
  Submission sub;
  sub.worker = w;
  sub.grid = g;
  sub.p.assign(K, 0.0);
  const bool lapse = !worker.noisy && rng.chance(o.lapse);
  const std::vector<double> p = choice_probabilities(worker, grid, o.context_strength);
  if (worker.noisy || lapse || std::all_of(p.begin(), p.end(), [](double x) { return x <= 0; })) {
    sub.lapse = lapse;
    random_clustering(rng, o, S, sub);
    renumber(sub);
    return sub;
  }
  sub.p = p;
  const std::size_t k = rng.categorical(p);
  sub.attribute = static_cast<int>(k);
  // One cluster per value present, then random merges while the worker is in a coarse mood.
  const std::size_t n = data.attributes[k].values.size();
  std::vector<int> of_value(n, -1);
  int m = 0;
  for (std::size_t i : grid.images) {
    int& c = of_value[static_cast<std::size_t>(data.values[i][k])];
    if (c < 0) c = m++;
  }
  std::vector<int> merged(static_cast<std::size_t>(m));
  std::iota(merged.begin(), merged.end(), 0);
  int live = m;
  while (live > 2 && rng.chance(worker.coarseness)) {
    std::vector<int> ids(merged);
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    const int a = ids[static_cast<std::size_t>(rng.below(static_cast<std::int64_t>(ids.size())))];
    int b = a;
    while (b == a) b = ids[static_cast<std::size_t>(rng.below(static_cast<std::int64_t>(ids.size())))];
    for (int& x : merged)
      if (x == b) x = a;
    --live;
  }
  std::vector<int> present;
  for (int x : merged)
    if (std::find(present.begin(), present.end(), x) == present.end()) present.push_back(x);
  sub.cluster.resize(S);
  for (std::size_t j = 0; j < S; ++j) {
    sub.cluster[j] = merged[static_cast<std::size_t>(of_value[static_cast<std::size_t>(data.values[grid.images[j]][k])])];
    if (rng.chance(o.slip)) sub.cluster[j] = present[static_cast<std::size_t>(rng.below(static_cast<std::int64_t>(present.size())))];
  }
  renumber(sub);
  return sub;
}

}  // namespace

Crowd simulate(const Dataset& data, const CrowdOptions& o) {
  const std::int64_t S = static_cast<std::int64_t>(o.rows) * o.cols;
  if (o.rows < 1 || o.cols < 1 || S < 2) throw std::invalid_argument("a grid needs at least 2 images");
  if (static_cast<std::int64_t>(data.size()) < S)
    throw std::invalid_argument("the dataset has " + std::to_string(data.size()) + " images, fewer than a grid's " + std::to_string(S));
  if (o.workers < 1 || o.grids < 1) throw std::invalid_argument("need at least one worker and one grid");
  if (o.workers_per_grid < 1 || o.workers_per_grid > o.workers) throw std::invalid_argument("workers-per-grid must be in [1, workers]");
  if (o.max_clusters < 1) throw std::invalid_argument("max-clusters must be >= 1");
  Crowd crowd;
  crowd.workers = make_workers(data, o);
  const ComboIndex index(data);
  for (std::int64_t g = 0; g < o.grids; ++g) crowd.grids.push_back(sample_grid(data, index, o, g));
  const std::vector<std::int64_t> slots = assign_workers(o);
  for (std::int64_t g = 0; g < o.grids; ++g)
    for (std::int64_t s = 0; s < o.workers_per_grid; ++s) {
      const std::int64_t w = slots[static_cast<std::size_t>(g * o.workers_per_grid + s)];
      Worker& worker = crowd.workers[static_cast<std::size_t>(w)];
      ++worker.annotations;
      crowd.submissions.push_back(annotate(data, o, crowd.grids[static_cast<std::size_t>(g)], g, s, w, worker));
    }
  return crowd;
}

}  // namespace gen_crowd
