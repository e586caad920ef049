#include "retrieval.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <unordered_map>

#include "embedflow/error.hpp"
#include "embedflow/rng.hpp"
#include "block_scan.hpp"
#include "parallel.hpp"
#include "top_k.hpp"

namespace embedflow::evalcore {

namespace {

using Item = ScoredItem;

struct Positive {
  double threshold;  // BlockScorer::exact, before the scan
  std::int64_t index;
  float score;       // what the blocked scan saw
  bool seen;
};

// Per-query scan state; lives only while its query block is being scanned.
struct QueryState {
  QueryOutcome::Status status = QueryOutcome::Status::ok;
  std::int64_t label = 0, camera = 0, group = 0;
  std::vector<Positive> positives;                     // sorted by (threshold, index)
  std::vector<double> thresholds;                      // positives[].threshold, for lower_bound
  std::vector<std::pair<std::int64_t, int>> slot_of;   // (gallery index, slot), sorted
  double eps = 0, skip_above = -std::numeric_limits<double>::infinity();
  std::vector<std::int64_t> counts;                    // (repeats + 1) x (P + 1) bucket counts
  std::vector<Item> near;                              // negatives too close to a positive to bucket
  std::vector<double> near_exact;                      // their BlockScorer::exact scores
  std::vector<Item> heap;                              // top-k, max-heap on (score, index)
};

// std::lower_bound's index, without data-dependent branches: with ~1000 positives per query the
// bucket search runs for every scanned negative, and a mispredicted branch per halving cost more
// than the comparisons.
inline std::size_t branchless_lower_bound(const std::vector<double>& sorted, double value) {
  const double* base = sorted.data();
  std::size_t n = sorted.size();
  if (n == 0) return 0;
  while (n > 1) {
    const std::size_t half = n / 2;
    base = base[half - 1] < value ? base + half : base;
    n -= half;
  }
  return static_cast<std::size_t>(base - sorted.data()) + (*base < value ? 1 : 0);
}

// lower_bound over a query's sorted positive thresholds in about one step: a table over their
// range holds, per cell, where the thresholds of that cell begin, and the search runs only
// inside the value's cell. The dense pass looks up every negative ranked before the last
// positive (most of the gallery), where a binary search's ten dependent loads dominated.
class ThresholdCells {
 public:
  void build(const std::vector<double>& sorted) {
    sorted_ = &sorted;
    start_.clear();
    if (sorted.empty()) return;
    lo_ = sorted.front();
    const double span = sorted.back() - lo_;
    const std::size_t cells = std::max<std::size_t>(1, 2 * sorted.size());
    scale_ = span > 0 ? static_cast<double>(cells) / span : 0.0;
    // start_[c] = first threshold whose cell is >= c, by the same formula as lookups, so every
    // value's lower_bound lies in [start_[c], start_[c + 1]] of its cell c.
    start_.assign(cells + 2, sorted.size());
    std::size_t c = 0;
    for (std::size_t k = 0; k < sorted.size(); ++k)
      for (const std::size_t ck = cell(sorted[k]); c <= ck; ++c) start_[c] = k;
  }
  // Number of thresholds < value, for lo <= value <= the largest threshold.
  std::size_t lower_bound(double value) const {
    if (value <= lo_) return 0;
    const std::size_t c = cell(value);
    const auto first = sorted_->begin();
    return static_cast<std::size_t>(std::lower_bound(first + static_cast<std::ptrdiff_t>(start_[c]),
                                                     first + static_cast<std::ptrdiff_t>(start_[c + 1]), value) -
                                    first);
  }

 private:
  std::size_t cell(double value) const {
    return std::min(start_.size() - 2, static_cast<std::size_t>((value - lo_) * scale_));
  }
  const std::vector<double>* sorted_ = nullptr;
  double lo_ = 0, scale_ = 0;
  std::vector<std::size_t> start_;
};

using Exact = std::pair<double, std::int64_t>;  // (BlockScorer::exact, gallery index)

std::int64_t count_below(const std::vector<Exact>& sorted, Exact item) {
  return std::lower_bound(sorted.begin(), sorted.end(), item) - sorted.begin();
}

}  // namespace

QueryOutcome outcome_from_ranks(const std::vector<std::int64_t>& ranks) {
  QueryOutcome o;
  const auto n = static_cast<std::int64_t>(ranks.size());
  o.positives = n;
  if (n == 0) {
    o.status = QueryOutcome::Status::no_match;
    return o;
  }
  o.first_rank = ranks[0];
  o.reciprocal_rank = 1.0 / static_cast<double>(ranks[0]);
  for (std::int64_t i = 0; i < n; ++i) {
    const double r = static_cast<double>(ranks[static_cast<std::size_t>(i)]);
    const double precision = static_cast<double>(i + 1) / r;
    const double precision_before = r == 1 ? 1.0 : static_cast<double>(i) / (r - 1);
    o.ap += precision;
    o.ap_trapezoid += (precision_before + precision) / 2;
    if (ranks[static_cast<std::size_t>(i)] <= n) {
      o.r_precision += 1;
      o.map_at_r += precision;
    }
  }
  o.ap /= static_cast<double>(n);
  o.ap_trapezoid /= static_cast<double>(n);
  o.r_precision /= static_cast<double>(n);
  o.map_at_r /= static_cast<double>(n);
  return o;
}

RetrievalResult evaluate_retrieval(const BlockScorer& scorer, const RetrievalLabels& labels,
                                   const RetrievalOptions& opt) {
  const MatrixView Q = scorer.query(), G = scorer.gallery();
  if (!labels.query_label || !labels.gallery_label) throw DataError("retrieval needs query and gallery labels");
  if (opt.exclude_self && Q.rows != G.rows)
    throw DataError(cat("self-retrieval needs the query set to be the gallery, got ", Q.rows, " queries and ",
                        G.rows, " gallery items"));
  if (opt.query_block < 1 || opt.gallery_block < 1) throw ConfigError("block sizes must be >= 1");
  if (opt.max_rank < 1) throw ConfigError("max_rank must be >= 1");
  const bool cameras = opt.exclude_same_camera && labels.query_camera && labels.gallery_camera;
  const bool groups = labels.query_group && labels.gallery_group;
  const double group_offset = groups ? 2 * scorer.score_bound() + 2 : 0;
  const int repeats = std::max(0, opt.single_shot_repeats);
  const std::size_t keep = static_cast<std::size_t>(std::max(0, opt.keep_top));
  const auto* ql = labels.query_label;
  const auto* gl = labels.gallery_label;

  auto junk = [&](std::int64_t label) { return opt.drop_junk && label == opt.junk_label; };

  std::unordered_map<std::int64_t, std::vector<std::int64_t>> by_label;
  for (std::int64_t j = 0; j < G.rows; ++j)
    if (!junk(gl[j])) by_label[gl[j]].push_back(j);

  // Single-gallery-shot: per repeat, one gallery item per identity (CUHK03 protocol). Only the
  // negatives' masks matter; each query draws its own positive among its valid ones.
  std::vector<std::vector<std::uint8_t>> shot_mask(static_cast<std::size_t>(repeats));
  for (int r = 0; r < repeats; ++r) {
    auto& mask = shot_mask[static_cast<std::size_t>(r)];
    mask.assign(static_cast<std::size_t>(G.rows), 0);
    Rng rng(derive_seed(opt.seed, cat("single_shot/", r)));
    std::vector<std::int64_t> ids;
    for (const auto& kv : by_label) ids.push_back(kv.first);
    std::sort(ids.begin(), ids.end());  // hash-map order must not leak into the random stream
    for (auto id : ids) {
      const auto& members = by_label[id];
      std::uniform_int_distribution<std::size_t> pick(0, members.size() - 1);
      mask[static_cast<std::size_t>(members[pick(rng)])] = 1;
    }
  }

  // Dense positives (class retrieval) put most negatives within the float tolerance of some
  // positive, and rescoring them pair by pair costs more than scoring every pair in double.
  bool dense = false;
  if (opt.exact_pass == RetrievalOptions::ExactPass::dense) {
    if (!scorer.has_exact_blocks())
      throw ConfigError(cat("the dense exact pass scores euclidean, sqeuclidean or cosine distances, not ",
                            distance_name(scorer.spec().kind)));
    dense = true;
  } else if (opt.exact_pass == RetrievalOptions::ExactPass::automatic && scorer.has_exact_blocks()) {
    double positive_pairs = 0;
    for (std::int64_t q = 0; q < Q.rows; ++q)
      if (auto it = by_label.find(ql[q]); !junk(ql[q]) && it != by_label.end())
        positive_pairs += static_cast<double>(it->second.size());
    dense = positive_pairs >= RetrievalOptions::kDensePositives * static_cast<double>(Q.rows) * static_cast<double>(G.rows);
  }

  RetrievalResult result;
  result.queries.resize(static_cast<std::size_t>(Q.rows));
  if (keep) {
    result.top_index.assign(static_cast<std::size_t>(Q.rows) * keep, -1);
    result.top_score.assign(static_cast<std::size_t>(Q.rows) * keep, std::numeric_limits<float>::quiet_NaN());
  }
  std::vector<std::int64_t> violations(static_cast<std::size_t>(Q.rows), 0);
  std::vector<std::int64_t> near_counts(static_cast<std::size_t>(Q.rows), 0);

  // The dense pass holds whole gallery rows of the block's queries in double: at most
  // kDenseBlockBytes of them.
  constexpr std::int64_t kDenseBlockBytes = std::int64_t{32} << 20;
  const std::int64_t dense_rows =
      std::max<std::int64_t>(1, kDenseBlockBytes / (std::int64_t{8} * std::max<std::int64_t>(G.rows, 1)));
  const std::int64_t qb = std::min<std::int64_t>(dense ? std::min(opt.query_block, dense_rows) : opt.query_block,
                                                 std::max<std::int64_t>(Q.rows, 1));
  const std::int64_t gb = std::min<std::int64_t>(opt.gallery_block, std::max<std::int64_t>(G.rows, 1));
  std::vector<float> buffer(dense ? 0 : static_cast<std::size_t>(qb * gb));
  std::vector<double> exact_rows(dense ? static_cast<std::size_t>(qb * G.rows) : 0);
  std::vector<QueryState> states(static_cast<std::size_t>(qb));

  for (std::int64_t q0 = 0; q0 < Q.rows; q0 += qb) {
    const std::int64_t q1 = std::min(Q.rows, q0 + qb);
    // Positives and their scores before the scan. Where positives are dense (class retrieval:
    // every query of a label shares that label's gallery items), scoring them query by query
    // streams each query's ~1000 gallery rows from memory once per query. Instead the block's
    // queries are grouped by label and scored gallery row by gallery row, a tile of kTile
    // queries at a time, so a gallery row is read once per tile and the tile's query rows stay
    // in cache. The values are the same: BlockScorer::exact depends only on the two rows.
    parallel_for(q1 - q0, opt.threads, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t s = b; s < e; ++s) {
        const std::int64_t q = q0 + s;
        QueryState& st = states[static_cast<std::size_t>(s)];
        // Cleared, not replaced: the vectors keep their capacity from the previous query block,
        // which saves the page faults of growing them again.
        st.status = QueryOutcome::Status::ok;
        st.positives.clear(), st.thresholds.clear(), st.slot_of.clear(), st.counts.clear();
        st.near.clear(), st.heap.clear();
        st.skip_above = -std::numeric_limits<double>::infinity();
        st.label = ql[q];
        st.camera = cameras ? labels.query_camera[q] : 0;
        st.group = groups ? labels.query_group[q] : 0;
        st.eps = scorer.tolerance(q) + group_offset * 1e-6;
        if (keep) st.heap.reserve(keep);
        if (junk(st.label)) {
          st.status = QueryOutcome::Status::junk_query;
          continue;
        }
        auto it = by_label.find(st.label);
        if (it != by_label.end()) st.positives.resize(it->second.size(), Positive{0.0, -1, 0.0f, false});
      }
    });
    if (dense) {
      scorer.compute_exact(q0, q1, 0, G.rows, exact_rows.data(), G.rows);
      parallel_for(q1 - q0, opt.threads, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t s = b; s < e; ++s) {
          const std::int64_t q = q0 + s;
          QueryState& st = states[static_cast<std::size_t>(s)];
          if (st.status == QueryOutcome::Status::junk_query) continue;
          const double* row = exact_rows.data() + s * G.rows;
          auto score = [&](std::int64_t j) {
            return groups && labels.gallery_group[j] != st.group ? row[j] + group_offset : row[j];
          };
          st.positives.clear();
          if (auto it = by_label.find(st.label); it != by_label.end())
            for (std::int64_t j : it->second)
              if (!(opt.exclude_self && j == q) && !(cameras && labels.gallery_camera[j] == st.camera))
                st.positives.push_back(Positive{score(j), j, 0.0f, false});
          const std::size_t P = st.positives.size();
          if (P == 0) st.status = QueryOutcome::Status::no_match;
          std::sort(st.positives.begin(), st.positives.end(), [](const Positive& x, const Positive& y) {
            return x.threshold != y.threshold ? x.threshold < y.threshold : x.index < y.index;
          });
          for (const Positive& p : st.positives) st.thresholds.push_back(p.threshold);
          st.counts.assign(static_cast<std::size_t>(repeats + 1) * (P + 1), 0);
          const double last = P ? st.thresholds.back() : -std::numeric_limits<double>::infinity();
          ThresholdCells cells;
          cells.build(st.thresholds);
          for (std::int64_t j = 0; j < G.rows; ++j) {
            const bool excluded = junk(gl[j]) || (opt.exclude_self && j == q);
            if (keep && !excluded && !(cameras && gl[j] == st.label && labels.gallery_camera[j] == st.camera))
              push_top(st.heap, keep, {static_cast<float>(score(j)), j});
            if (excluded || gl[j] == st.label) continue;  // a positive, or excluded with its camera
            const double d = score(j);
            if (d > last) continue;  // ranks after every positive: changes no metric
            // Positives ranked before this negative: (score, index) order, ties by index.
            std::size_t bucket = cells.lower_bound(d);
            while (bucket < P && st.thresholds[bucket] == d && st.positives[bucket].index < j) ++bucket;
            st.counts[bucket] += 1;
            for (int r = 0; r < repeats; ++r)
              if (shot_mask[static_cast<std::size_t>(r)][static_cast<std::size_t>(j)])
                st.counts[static_cast<std::size_t>(r + 1) * (P + 1) + bucket] += 1;
          }
        }
      });
    } else {
      std::map<std::int64_t, std::vector<std::int64_t>> block_queries_of_label;  // label -> block slots
      for (std::int64_t s = 0; s < q1 - q0; ++s) {
        const QueryState& st = states[static_cast<std::size_t>(s)];
        if (st.status == QueryOutcome::Status::ok && !st.positives.empty()) block_queries_of_label[st.label].push_back(s);
      }
      constexpr std::size_t kTile = 32;
      for (const auto& [label, slots] : block_queries_of_label) {
        const std::vector<std::int64_t>& members = by_label.at(label);
        for (std::size_t t0 = 0; t0 < slots.size(); t0 += kTile) {
          const std::size_t t1 = std::min(slots.size(), t0 + kTile);
          parallel_for(static_cast<std::int64_t>(members.size()), opt.threads, [&](std::int64_t b, std::int64_t e) {
            for (std::int64_t m = b; m < e; ++m) {
              const std::int64_t j = members[static_cast<std::size_t>(m)];
              for (std::size_t t = t0; t < t1; ++t) {
                const std::int64_t s = slots[t], q = q0 + s;
                QueryState& st = states[static_cast<std::size_t>(s)];
                if (opt.exclude_self && j == q) continue;
                if (cameras && labels.gallery_camera[j] == st.camera) continue;
                double v = scorer.exact(q, j);
                if (groups && labels.gallery_group[j] != st.group) v += group_offset;
                st.positives[static_cast<std::size_t>(m)] = Positive{v, j, 0.0f, false};
              }
            }
          });
        }
      }
      parallel_for(q1 - q0, opt.threads, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t s = b; s < e; ++s) {
          QueryState& st = states[static_cast<std::size_t>(s)];
          if (st.status != QueryOutcome::Status::ok) continue;
          // Drop the excluded gallery items (still marked -1).
          st.positives.erase(std::remove_if(st.positives.begin(), st.positives.end(),
                                            [](const Positive& p) { return p.index < 0; }),
                             st.positives.end());
          if (st.positives.empty()) {
            st.status = QueryOutcome::Status::no_match;
            continue;
          }
          std::sort(st.positives.begin(), st.positives.end(), [](const Positive& a, const Positive& b) {
            return a.threshold != b.threshold ? a.threshold < b.threshold : a.index < b.index;
          });
          const std::size_t P = st.positives.size();
          for (std::size_t k = 0; k < P; ++k) {
            st.thresholds.push_back(st.positives[k].threshold);
            st.slot_of.emplace_back(st.positives[k].index, static_cast<int>(k));
          }
          std::sort(st.slot_of.begin(), st.slot_of.end());
          st.skip_above = st.thresholds.back() + st.eps;
          st.counts.assign(static_cast<std::size_t>(repeats + 1) * (P + 1), 0);
        }
      });

      scan_gallery_blocks(scorer, q0, q1, gb, buffer, opt.threads,
                          [&](std::int64_t s, const float* row, std::int64_t g0, std::int64_t g1) {
        const std::int64_t q = q0 + s;
        QueryState& st = states[static_cast<std::size_t>(s)];
        if (st.status == QueryOutcome::Status::junk_query) return;
        const std::size_t P = st.positives.size();
        for (std::int64_t j = g0; j < g1; ++j) {
          float d = row[j - g0];
          if (groups && labels.gallery_group[j] != st.group) d += static_cast<float>(group_offset);
          if (keep && !(junk(gl[j]) || (opt.exclude_self && j == q) ||
                        (cameras && gl[j] == st.label && labels.gallery_camera[j] == st.camera)))
            push_top(st.heap, keep, {d, j});
          if (d > st.skip_above) continue;  // ranks after every positive: changes no metric
          if (junk(gl[j]) || (opt.exclude_self && j == q)) continue;
          if (gl[j] == st.label) {
            if (cameras && labels.gallery_camera[j] == st.camera) continue;
            auto it = std::lower_bound(st.slot_of.begin(), st.slot_of.end(), std::make_pair(j, -1));
            Positive& p = st.positives[static_cast<std::size_t>(it->second)];
            p.score = d;
            p.seen = true;
            continue;
          }
          const std::size_t bucket = branchless_lower_bound(st.thresholds, double(d));
          if ((bucket < P && st.thresholds[bucket] - d <= st.eps) ||
              (bucket > 0 && d - st.thresholds[bucket - 1] <= st.eps)) {
            st.near.emplace_back(d, j);
            continue;
          }
          st.counts[bucket] += 1;
          for (int r = 0; r < repeats; ++r)
            if (shot_mask[static_cast<std::size_t>(r)][static_cast<std::size_t>(j)])
              st.counts[static_cast<std::size_t>(r + 1) * (P + 1) + bucket] += 1;
        }
      });

      // Exact scores of the near negatives, in an order that reuses rows: tiles of kNearTile
      // queries (whose rows stay in cache), and inside a tile by gallery index (each gallery row
      // read once per tile). Where positives are dense, most negatives ranked before the last
      // positive are near one, so this pass is as large as the positives' one.
      {
        constexpr std::int64_t kNearTile = 256;
        struct NearPair {
          std::int64_t tile, j, s;
          std::size_t i;
          bool operator<(const NearPair& o) const {
            return tile != o.tile ? tile < o.tile : j != o.j ? j < o.j : s < o.s;
          }
        };
        std::vector<NearPair> pairs;
        for (std::int64_t s = 0; s < q1 - q0; ++s) {
          QueryState& st = states[static_cast<std::size_t>(s)];
          st.near_exact.assign(st.near.size(), 0.0);
          for (std::size_t i = 0; i < st.near.size(); ++i) pairs.push_back({s / kNearTile, st.near[i].second, s, i});
        }
        std::sort(pairs.begin(), pairs.end());
        parallel_for(static_cast<std::int64_t>(pairs.size()), opt.threads, [&](std::int64_t b, std::int64_t e) {
          for (std::int64_t k = b; k < e; ++k) {
            const NearPair& np = pairs[static_cast<std::size_t>(k)];
            QueryState& st = states[static_cast<std::size_t>(np.s)];
            double v = scorer.exact(q0 + np.s, np.j);
            if (groups && labels.gallery_group[np.j] != st.group) v += group_offset;
            st.near_exact[np.i] = v;
          }
        });
      }

    }

    parallel_for(q1 - q0, opt.threads, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t s = b; s < e; ++s) {
        const std::int64_t q = q0 + s;
        QueryState& st = states[static_cast<std::size_t>(s)];
        if (keep) {
          std::sort(st.heap.begin(), st.heap.end());
          for (std::size_t r = 0; r < st.heap.size(); ++r) {
            result.top_index[static_cast<std::size_t>(q) * keep + r] = st.heap[r].second;
            result.top_score[static_cast<std::size_t>(q) * keep + r] = st.heap[r].first;
          }
        }
        QueryOutcome& out = result.queries[static_cast<std::size_t>(q)];
        if (st.status != QueryOutcome::Status::ok) {
          out.status = st.status;
          out.label = st.label;
          continue;
        }
        const std::size_t P = st.positives.size();
        // Near-ties are settled in double: positives by their exact threshold, negatives
        // that fell within the float tolerance of one by an exact score of their own, so the
        // ranking equals a stable argsort of double-precision scores.
        std::vector<Exact> pos_items(P);
        for (std::size_t k = 0; k < P; ++k) {
          const Positive& p = st.positives[k];
          if (p.seen && std::fabs(double(p.score) - p.threshold) > st.eps) violations[static_cast<std::size_t>(q)] += 1;
          pos_items[k] = {p.threshold, p.index};
        }
        std::vector<Exact> near(st.near.size());
        near_counts[static_cast<std::size_t>(q)] = static_cast<std::int64_t>(near.size());
        for (std::size_t i = 0; i < near.size(); ++i) near[i] = {st.near_exact[i], st.near[i].second};
        std::sort(near.begin(), near.end());
        // pos_items is already in (threshold, index) order.
        std::vector<std::int64_t> ranks(P);
        std::int64_t below = 0;
        for (std::size_t k = 0; k < P; ++k) {
          below += st.counts[k];
          ranks[k] = 1 + below + count_below(near, pos_items[k]) + static_cast<std::int64_t>(k);
        }
        out = outcome_from_ranks(ranks);
        out.label = st.label;
        for (int r = 0; r < repeats; ++r) {
          Rng rng(derive_seed(derive_seed(opt.seed, static_cast<std::uint64_t>(q)), cat("shot/", r)));
          const std::size_t k = std::uniform_int_distribution<std::size_t>(0, P - 1)(rng);
          const auto* counts = st.counts.data() + static_cast<std::size_t>(r + 1) * (P + 1);
          std::int64_t rank = 1;
          for (std::size_t b2 = 0; b2 <= k; ++b2) rank += counts[b2];
          const auto& mask = shot_mask[static_cast<std::size_t>(r)];
          for (const Exact& it : near) {
            if (!(it < pos_items[k])) break;
            rank += mask[static_cast<std::size_t>(it.second)];
          }
          out.single_shot_ranks.push_back(rank);
        }
      }
    });
  }

  result.summary = summarize(result.queries, opt);
  result.summary.dense_exact = dense;
  for (auto v : violations) result.summary.tolerance_violations += v;
  for (auto v : near_counts) result.summary.exact_negatives += v;
  for (const auto& o : result.queries) result.summary.exact_positives += o.positives;
  return result;
}

RetrievalSummary summarize(const std::vector<QueryOutcome>& queries, const RetrievalOptions& opt) {
  RetrievalSummary s;
  s.queries = static_cast<std::int64_t>(queries.size());
  std::vector<const QueryOutcome*> ok;
  for (const auto& q : queries) {
    if (q.status == QueryOutcome::Status::junk_query) s.junk_queries++;
    else if (q.status == QueryOutcome::Status::no_match) s.no_match++;
    else ok.push_back(&q);
  }
  s.evaluated = static_cast<std::int64_t>(ok.size());
  s.cmc.assign(static_cast<std::size_t>(opt.max_rank), 0.0);
  const bool shots = !ok.empty() && !ok.front()->single_shot_ranks.empty();
  if (shots) s.single_shot_cmc.assign(static_cast<std::size_t>(opt.max_rank), 0.0);
  if (ok.empty()) return s;
  const double n = static_cast<double>(ok.size());
  for (const auto* q : ok) {
    for (std::int64_t k = q->first_rank; k <= opt.max_rank; ++k) s.cmc[static_cast<std::size_t>(k - 1)] += 1;
    for (auto r : q->single_shot_ranks)
      for (std::int64_t k = r; k <= opt.max_rank; ++k)
        s.single_shot_cmc[static_cast<std::size_t>(k - 1)] += 1.0 / static_cast<double>(q->single_shot_ranks.size());
    s.map += q->ap;
    s.map_trapezoid += q->ap_trapezoid;
    s.p_at_1 += q->first_rank == 1;
    s.r_precision += q->r_precision;
    s.map_at_r += q->map_at_r;
    s.mrr += q->reciprocal_rank;
  }
  for (auto& v : s.cmc) v /= n;
  for (auto& v : s.single_shot_cmc) v /= n;
  s.map /= n;
  s.map_trapezoid /= n;
  s.p_at_1 /= n;
  s.r_precision /= n;
  s.map_at_r /= n;
  s.mrr /= n;

  // Per label, then their mean (macro): a label's weight no longer grows with its query count.
  for (const auto* q : ok) {
    auto& m = s.per_label[q->label];
    m["queries"] += 1;
    for (int k : opt.ranks) m[cat("rank-", k)] += q->first_rank <= k ? 1.0 : 0.0;
    m["mAP"] += q->ap;
    m["mAP_trapezoid"] += q->ap_trapezoid;
    m["P@1"] += q->first_rank == 1 ? 1.0 : 0.0;
    m["R-precision"] += q->r_precision;
    m["MAP@R"] += q->map_at_r;
    m["MRR"] += q->reciprocal_rank;
  }
  for (auto& [label, m] : s.per_label) {
    const double count = m["queries"];
    for (auto& [name, v] : m)
      if (name != "queries") v /= count;
    for (const auto& [name, v] : m)
      if (name != "queries") s.macro[name] += v / static_cast<double>(s.per_label.size());
  }

  if (opt.bootstrap > 0) {
    // Percentile bootstrap over queries: resample the evaluated queries with replacement.
    std::vector<std::string> names;
    std::vector<std::vector<double>> values;  // metric x query
    for (int k : opt.ranks) {
      names.push_back(cat("rank-", k));
      std::vector<double> v;
      for (const auto* q : ok) v.push_back(q->first_rank <= k ? 1.0 : 0.0);
      values.push_back(std::move(v));
    }
    auto add = [&](const char* name, double QueryOutcome::*field) {
      names.push_back(name);
      std::vector<double> v;
      for (const auto* q : ok) v.push_back(q->*field);
      values.push_back(std::move(v));
    };
    add("mAP", &QueryOutcome::ap);
    add("mAP_trapezoid", &QueryOutcome::ap_trapezoid);
    add("MRR", &QueryOutcome::reciprocal_rank);
    add("R-precision", &QueryOutcome::r_precision);
    add("MAP@R", &QueryOutcome::map_at_r);
    std::vector<std::vector<double>> means(names.size(), std::vector<double>(static_cast<std::size_t>(opt.bootstrap)));
    Rng rng(derive_seed(opt.seed, "bootstrap"));
    std::uniform_int_distribution<std::size_t> pick(0, ok.size() - 1);
    std::vector<std::size_t> draw(ok.size());
    for (int b = 0; b < opt.bootstrap; ++b) {
      for (auto& d : draw) d = pick(rng);
      for (std::size_t m = 0; m < names.size(); ++m) {
        double sum = 0;
        for (auto d : draw) sum += values[m][d];
        means[m][static_cast<std::size_t>(b)] = sum / n;
      }
    }
    const double alpha = (1 - opt.ci_level) / 2;
    for (std::size_t m = 0; m < names.size(); ++m) {
      auto& v = means[m];
      std::sort(v.begin(), v.end());
      auto at = [&](double p) {
        const double pos = p * static_cast<double>(v.size() - 1);
        const auto lo = static_cast<std::size_t>(std::floor(pos));
        const auto hi = std::min(v.size() - 1, lo + 1);
        return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
      };
      s.ci[names[m]] = {at(alpha), at(1 - alpha)};
    }
  }
  return s;
}

void knn_search(const BlockScorer& scorer, int k, bool exclude_self, std::int64_t query_block,
                std::int64_t gallery_block, int threads, std::vector<std::int64_t>& index, std::vector<float>& score) {
  const MatrixView Q = scorer.query(), G = scorer.gallery();
  if (k < 1) throw ConfigError(cat("k must be >= 1, got ", k));
  const auto kk = static_cast<std::size_t>(k);
  index.assign(static_cast<std::size_t>(Q.rows) * kk, -1);
  score.assign(static_cast<std::size_t>(Q.rows) * kk, std::numeric_limits<float>::quiet_NaN());
  const std::int64_t qb = std::max<std::int64_t>(1, std::min(query_block, Q.rows));
  const std::int64_t gb = std::max<std::int64_t>(1, std::min(gallery_block, G.rows));
  std::vector<float> buffer(static_cast<std::size_t>(qb * gb));
  std::vector<std::vector<Item>> heaps(static_cast<std::size_t>(qb));
  for (std::int64_t q0 = 0; q0 < Q.rows; q0 += qb) {
    const std::int64_t q1 = std::min(Q.rows, q0 + qb);
    for (auto& h : heaps) h.clear();
    scan_gallery_blocks(scorer, q0, q1, gb, buffer, threads, [&](std::int64_t s, const float* row, std::int64_t g0, std::int64_t g1) {
      auto& heap = heaps[static_cast<std::size_t>(s)];
      for (std::int64_t j = g0; j < g1; ++j) {
        if (exclude_self && j == q0 + s) continue;
        push_top(heap, kk, {row[j - g0], j});
      }
    });
    for (std::int64_t s = 0; s < q1 - q0; ++s) {
      auto& heap = heaps[static_cast<std::size_t>(s)];
      std::sort(heap.begin(), heap.end());
      for (std::size_t r = 0; r < heap.size(); ++r) {
        index[static_cast<std::size_t>(q0 + s) * kk + r] = heap[r].second;
        score[static_cast<std::size_t>(q0 + s) * kk + r] = heap[r].first;
      }
    }
  }
}

}  // namespace embedflow::evalcore
