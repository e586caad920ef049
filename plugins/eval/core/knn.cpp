#include "knn.hpp"

#include <algorithm>
#include <map>

#include "embedflow/error.hpp"
#include "block_scan.hpp"
#include "arena_loop.hpp"
#include "top_k.hpp"

namespace embedflow::evalcore {

ExactNeighbours exact_knn(const BlockScorer& scorer, int k, std::int64_t query_block, std::int64_t gallery_block,
                          int threads) {
  const MatrixView Q = scorer.query(), G = scorer.gallery();
  if (k < 1) throw ConfigError(cat("k must be >= 1, got ", k));
  if (k > G.rows) throw ConfigError(cat("k = ", k, " is larger than the training set (", G.rows, " rows)"));
  const auto kk = static_cast<std::size_t>(k);
  ExactNeighbours out;
  out.k = k;
  out.index.assign(static_cast<std::size_t>(Q.rows) * kk, -1);
  out.score.assign(static_cast<std::size_t>(Q.rows) * kk, 0.0);
  const std::int64_t qb = std::max<std::int64_t>(1, std::min(query_block, Q.rows));
  const std::int64_t gb = std::max<std::int64_t>(1, std::min(gallery_block, G.rows));
  std::vector<float> buffer(static_cast<std::size_t>(qb * gb));
  using Item = ScoredItem;
  std::vector<std::vector<Item>> heaps(static_cast<std::size_t>(qb)), candidates(static_cast<std::size_t>(qb));
  for (std::int64_t q0 = 0; q0 < Q.rows; q0 += qb) {
    const std::int64_t q1 = std::min(Q.rows, q0 + qb);
    for (std::int64_t s = 0; s < q1 - q0; ++s) heaps[static_cast<std::size_t>(s)].clear(), candidates[static_cast<std::size_t>(s)].clear();
    scan_gallery_blocks(scorer, q0, q1, gb, buffer, threads, [&](std::int64_t s, const float* row, std::int64_t g0, std::int64_t g1) {
      auto& heap = heaps[static_cast<std::size_t>(s)];
      auto& cand = candidates[static_cast<std::size_t>(s)];
      const double band = 2 * scorer.tolerance(q0 + s);
      for (std::int64_t j = g0; j < g1; ++j) {
        const Item item{row[j - g0], j};
        push_top(heap, kk, item);
        if (heap.size() < kk || double(item.first) <= double(heap.front().first) + band) cand.push_back(item);
      }
      if (cand.size() > 8 * kk + 1024) {  // prune to the current band
        const double limit = double(heap.front().first) + band;
        cand.erase(std::remove_if(cand.begin(), cand.end(), [&](const Item& c) { return double(c.first) > limit; }),
                   cand.end());
      }
    });
    arena_for(q1 - q0, threads, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t s = b; s < e; ++s) {
        const std::int64_t q = q0 + s;
        const auto& heap = heaps[static_cast<std::size_t>(s)];
        const double limit = double(heap.front().first) + 2 * scorer.tolerance(q);
        std::vector<std::pair<double, std::int64_t>> exact;
        for (const Item& c : candidates[static_cast<std::size_t>(s)])
          if (double(c.first) <= limit) exact.emplace_back(scorer.exact(q, c.second), c.second);
        std::sort(exact.begin(), exact.end());
        for (std::size_t r = 0; r < kk && r < exact.size(); ++r) {
          out.index[static_cast<std::size_t>(q) * kk + r] = exact[r].second;
          out.score[static_cast<std::size_t>(q) * kk + r] = exact[r].first;
        }
      }
    });
  }
  return out;
}

std::int64_t knn_vote(const std::int64_t* labels, const double* values, std::int64_t k, KnnWeights weights, bool kernel,
                      KnnTieRule tie_rule) {
  std::vector<double> w(static_cast<std::size_t>(k), 1.0);
  if (weights == KnnWeights::distance) {
    if (kernel) {
      for (std::int64_t i = 0; i < k; ++i) w[static_cast<std::size_t>(i)] = values[i];
    } else {
      bool zero = false;
      for (std::int64_t i = 0; i < k; ++i) zero = zero || values[i] == 0;
      for (std::int64_t i = 0; i < k; ++i)
        w[static_cast<std::size_t>(i)] = zero ? (values[i] == 0 ? 1.0 : 0.0) : 1.0 / values[i];
    }
  }
  std::map<std::int64_t, double> tally;  // ordered by label: the first maximum is the smallest label
  std::map<std::int64_t, std::int64_t> first_seen;
  for (std::int64_t i = 0; i < k; ++i) {
    tally[labels[i]] += w[static_cast<std::size_t>(i)];
    first_seen.emplace(labels[i], i);
  }
  double best = -1;
  std::int64_t winner = 0;
  for (const auto& [label, total] : tally) {
    if (total > best) {
      best = total, winner = label;
    } else if (total == best && tie_rule == KnnTieRule::nearest && first_seen[label] < first_seen[winner]) {
      winner = label;
    }
  }
  return winner;
}

}  // namespace embedflow::evalcore
