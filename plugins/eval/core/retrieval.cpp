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
#include "arena_loop.hpp"
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

void check_inputs(const BlockScorer& scorer, const RetrievalLabels& labels, const RetrievalOptions& opt) {
  const MatrixView Q = scorer.query(), G = scorer.gallery();
  if (!labels.query_label || !labels.gallery_label) throw DataError("retrieval needs query and gallery labels");
  if (opt.exclude_self && Q.rows != G.rows)
    throw DataError(cat("self-retrieval needs the query set to be the gallery, got ", Q.rows, " queries and ",
                        G.rows, " gallery items"));
  if (opt.query_block < 1 || opt.gallery_block < 1) throw ConfigError("block sizes must be >= 1");
  if (opt.max_rank < 1) throw ConfigError("max_rank must be >= 1");
}

// One evaluation, block of queries by block: reset the block's states, score its positives
// (dense: every pair in double; otherwise the positives, then the gallery scan counts negatives
// into buckets and keeps the near ones, which are rescored), then rank each query.
class RetrievalScan {
 public:
  RetrievalScan(const BlockScorer& scorer, const RetrievalLabels& labels, const RetrievalOptions& opt);
  RetrievalResult run();

 private:
  bool junk(std::int64_t label) const { return opt_.drop_junk && label == opt_.junk_label; }
  void draw_single_shot_masks();
  bool choose_dense_pass() const;
  void start_block(std::int64_t q0, std::int64_t q1);
  void score_block_dense(std::int64_t q0, std::int64_t q1);
  void score_query_dense(std::int64_t s, std::int64_t q);
  void score_positives(std::int64_t q0, std::int64_t q1);
  void order_positives(std::int64_t q0, std::int64_t q1);
  void scan_negatives(std::int64_t q0, std::int64_t q1);
  void scan_row(std::int64_t s, std::int64_t q, const float* row, std::int64_t g0, std::int64_t g1);
  void rescore_near(std::int64_t q0, std::int64_t q1);
  void rank_query(std::int64_t s, std::int64_t q);

  const BlockScorer& scorer_;
  const RetrievalLabels& labels_;
  const RetrievalOptions& opt_;
  const MatrixView Q_, G_;
  const bool cameras_, groups_;
  const double group_offset_;
  const int repeats_;
  const std::size_t keep_;
  const std::int64_t* ql_;
  const std::int64_t* gl_;
  std::unordered_map<std::int64_t, std::vector<std::int64_t>> by_label_;
  std::vector<std::vector<std::uint8_t>> shot_mask_;
  bool dense_ = false;
  RetrievalResult result_;
  std::vector<std::int64_t> violations_, near_counts_;
  std::int64_t qb_ = 1, gb_ = 1;
  std::vector<float> buffer_;
  std::vector<double> exact_rows_;
  std::vector<QueryState> states_;
};

RetrievalScan::RetrievalScan(const BlockScorer& scorer, const RetrievalLabels& labels, const RetrievalOptions& opt)
    : scorer_(scorer), labels_(labels), opt_(opt), Q_(scorer.query()), G_(scorer.gallery()),
      cameras_(opt.exclude_same_camera && labels.query_camera && labels.gallery_camera),
      groups_(labels.query_group && labels.gallery_group),
      group_offset_(groups_ ? 2 * scorer.score_bound() + 2 : 0), repeats_(std::max(0, opt.single_shot_repeats)),
      keep_(static_cast<std::size_t>(std::max(0, opt.keep_top))), ql_(labels.query_label), gl_(labels.gallery_label) {
  for (std::int64_t j = 0; j < G_.rows; ++j)
    if (!junk(gl_[j])) by_label_[gl_[j]].push_back(j);
  draw_single_shot_masks();
  dense_ = choose_dense_pass();
  result_.queries.resize(static_cast<std::size_t>(Q_.rows));
  if (keep_) {
    result_.top_index.assign(static_cast<std::size_t>(Q_.rows) * keep_, -1);
    result_.top_score.assign(static_cast<std::size_t>(Q_.rows) * keep_, std::numeric_limits<float>::quiet_NaN());
  }
  violations_.assign(static_cast<std::size_t>(Q_.rows), 0);
  near_counts_.assign(static_cast<std::size_t>(Q_.rows), 0);
  // The dense pass holds whole gallery rows of the block's queries in double: at most
  // kDenseBlockBytes of them.
  constexpr std::int64_t kDenseBlockBytes = std::int64_t{32} << 20;
  const std::int64_t dense_rows =
      std::max<std::int64_t>(1, kDenseBlockBytes / (std::int64_t{8} * std::max<std::int64_t>(G_.rows, 1)));
  qb_ = std::min<std::int64_t>(dense_ ? std::min(opt.query_block, dense_rows) : opt.query_block,
                               std::max<std::int64_t>(Q_.rows, 1));
  gb_ = std::min<std::int64_t>(opt.gallery_block, std::max<std::int64_t>(G_.rows, 1));
  buffer_.resize(dense_ ? 0 : static_cast<std::size_t>(qb_ * gb_));
  exact_rows_.resize(dense_ ? static_cast<std::size_t>(qb_ * G_.rows) : 0);
  states_.resize(static_cast<std::size_t>(qb_));
}

// Single-gallery-shot: per repeat, one gallery item per identity (CUHK03 protocol). Only the
// negatives' masks matter; each query draws its own positive among its valid ones.
void RetrievalScan::draw_single_shot_masks() {
  shot_mask_.resize(static_cast<std::size_t>(repeats_));
  for (int r = 0; r < repeats_; ++r) {
    auto& mask = shot_mask_[static_cast<std::size_t>(r)];
    mask.assign(static_cast<std::size_t>(G_.rows), 0);
    Rng rng(derive_seed(opt_.seed, cat("single_shot/", r)));
    std::vector<std::int64_t> ids;
    for (const auto& kv : by_label_) ids.push_back(kv.first);
    std::sort(ids.begin(), ids.end());  // hash-map order must not leak into the random stream
    for (auto id : ids) {
      const auto& members = by_label_[id];
      std::uniform_int_distribution<std::size_t> pick(0, members.size() - 1);
      mask[static_cast<std::size_t>(members[pick(rng)])] = 1;
    }
  }
}

// Dense positives (class retrieval) put most negatives within the float tolerance of some
// positive, and rescoring them pair by pair costs more than scoring every pair in double.
bool RetrievalScan::choose_dense_pass() const {
  if (opt_.exact_pass == RetrievalOptions::ExactPass::dense) {
    if (!scorer_.has_exact_blocks())
      throw ConfigError(cat("the dense exact pass scores euclidean, sqeuclidean or cosine distances, not ",
                            distance_name(scorer_.spec().kind)));
    return true;
  }
  if (opt_.exact_pass != RetrievalOptions::ExactPass::automatic || !scorer_.has_exact_blocks()) return false;
  double positive_pairs = 0;
  for (std::int64_t q = 0; q < Q_.rows; ++q)
    if (auto it = by_label_.find(ql_[q]); !junk(ql_[q]) && it != by_label_.end())
      positive_pairs += static_cast<double>(it->second.size());
  return positive_pairs >= RetrievalOptions::kDensePositives * static_cast<double>(Q_.rows) * static_cast<double>(G_.rows);
}

RetrievalResult RetrievalScan::run() {
  for (std::int64_t q0 = 0; q0 < Q_.rows; q0 += qb_) {
    const std::int64_t q1 = std::min(Q_.rows, q0 + qb_);
    start_block(q0, q1);
    if (dense_) {
      score_block_dense(q0, q1);
    } else {
      score_positives(q0, q1);
      order_positives(q0, q1);
      scan_negatives(q0, q1);
      rescore_near(q0, q1);
    }
    arena_for(q1 - q0, opt_.threads, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t s = b; s < e; ++s) rank_query(s, q0 + s);
    });
  }
  result_.summary = summarize(result_.queries, opt_);
  result_.summary.dense_exact = dense_;
  for (auto v : violations_) result_.summary.tolerance_violations += v;
  for (auto v : near_counts_) result_.summary.exact_negatives += v;
  for (const auto& o : result_.queries) result_.summary.exact_positives += o.positives;
  return std::move(result_);
}

void RetrievalScan::start_block(std::int64_t q0, std::int64_t q1) {
  arena_for(q1 - q0, opt_.threads, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t s = b; s < e; ++s) {
      const std::int64_t q = q0 + s;
      QueryState& st = states_[static_cast<std::size_t>(s)];
      // Cleared, not replaced: the vectors keep their capacity from the previous query block,
      // which saves the page faults of growing them again.
      st.status = QueryOutcome::Status::ok;
      st.positives.clear(), st.thresholds.clear(), st.slot_of.clear(), st.counts.clear();
      st.near.clear(), st.heap.clear();
      st.skip_above = -std::numeric_limits<double>::infinity();
      st.label = ql_[q];
      st.camera = cameras_ ? labels_.query_camera[q] : 0;
      st.group = groups_ ? labels_.query_group[q] : 0;
      st.eps = scorer_.tolerance(q) + group_offset_ * 1e-6;
      if (keep_) st.heap.reserve(keep_);
      if (junk(st.label)) {
        st.status = QueryOutcome::Status::junk_query;
        continue;
      }
      auto it = by_label_.find(st.label);
      if (it != by_label_.end()) st.positives.resize(it->second.size(), Positive{0.0, -1, 0.0f, false});
    }
  });
}

void RetrievalScan::score_block_dense(std::int64_t q0, std::int64_t q1) {
  scorer_.compute_exact(q0, q1, 0, G_.rows, exact_rows_.data(), G_.rows);
  arena_for(q1 - q0, opt_.threads, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t s = b; s < e; ++s) score_query_dense(s, q0 + s);
  });
}

// Every gallery score of query q in double: positives become thresholds, negatives ranked
// before the last positive are counted into the bucket between two of them.
void RetrievalScan::score_query_dense(std::int64_t s, std::int64_t q) {
  QueryState& st = states_[static_cast<std::size_t>(s)];
  if (st.status == QueryOutcome::Status::junk_query) return;
  const double* row = exact_rows_.data() + s * G_.rows;
  auto score = [&](std::int64_t j) {
    return groups_ && labels_.gallery_group[j] != st.group ? row[j] + group_offset_ : row[j];
  };
  st.positives.clear();
  if (auto it = by_label_.find(st.label); it != by_label_.end())
    for (std::int64_t j : it->second)
      if (!(opt_.exclude_self && j == q) && !(cameras_ && labels_.gallery_camera[j] == st.camera))
        st.positives.push_back(Positive{score(j), j, 0.0f, false});
  const std::size_t P = st.positives.size();
  if (P == 0) st.status = QueryOutcome::Status::no_match;
  std::sort(st.positives.begin(), st.positives.end(), [](const Positive& x, const Positive& y) {
    return x.threshold != y.threshold ? x.threshold < y.threshold : x.index < y.index;
  });
  for (const Positive& p : st.positives) st.thresholds.push_back(p.threshold);
  st.counts.assign(static_cast<std::size_t>(repeats_ + 1) * (P + 1), 0);
  const double last = P ? st.thresholds.back() : -std::numeric_limits<double>::infinity();
  ThresholdCells cells;
  cells.build(st.thresholds);
  for (std::int64_t j = 0; j < G_.rows; ++j) {
    const bool excluded = junk(gl_[j]) || (opt_.exclude_self && j == q);
    if (keep_ && !excluded && !(cameras_ && gl_[j] == st.label && labels_.gallery_camera[j] == st.camera))
      push_top(st.heap, keep_, {static_cast<float>(score(j)), j});
    if (excluded || gl_[j] == st.label) continue;  // a positive, or excluded with its camera
    const double d = score(j);
    if (d > last) continue;  // ranks after every positive: changes no metric
    // Positives ranked before this negative: (score, index) order, ties by index.
    std::size_t bucket = cells.lower_bound(d);
    while (bucket < P && st.thresholds[bucket] == d && st.positives[bucket].index < j) ++bucket;
    st.counts[bucket] += 1;
    for (int r = 0; r < repeats_; ++r)
      if (shot_mask_[static_cast<std::size_t>(r)][static_cast<std::size_t>(j)])
        st.counts[static_cast<std::size_t>(r + 1) * (P + 1) + bucket] += 1;
  }
}

// Positives and their scores before the scan. Where positives are dense (class retrieval: every
// query of a label shares that label's gallery items), scoring them query by query streams each
// query's ~1000 gallery rows from memory once per query. Instead the block's queries are grouped
// by label and scored gallery row by gallery row, a tile of kTile queries at a time, so a gallery
// row is read once per tile and the tile's query rows stay in cache. The values are the same:
// BlockScorer::exact depends only on the two rows.
void RetrievalScan::score_positives(std::int64_t q0, std::int64_t q1) {
  std::map<std::int64_t, std::vector<std::int64_t>> block_queries_of_label;  // label -> block slots
  for (std::int64_t s = 0; s < q1 - q0; ++s) {
    const QueryState& st = states_[static_cast<std::size_t>(s)];
    if (st.status == QueryOutcome::Status::ok && !st.positives.empty()) block_queries_of_label[st.label].push_back(s);
  }
  constexpr std::size_t kTile = 32;
  for (const auto& [label, slots] : block_queries_of_label) {
    const std::vector<std::int64_t>& members = by_label_.at(label);
    for (std::size_t t0 = 0; t0 < slots.size(); t0 += kTile) {
      const std::size_t t1 = std::min(slots.size(), t0 + kTile);
      arena_for(static_cast<std::int64_t>(members.size()), opt_.threads, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t m = b; m < e; ++m) {
          const std::int64_t j = members[static_cast<std::size_t>(m)];
          for (std::size_t t = t0; t < t1; ++t) {
            const std::int64_t s = slots[t], q = q0 + s;
            QueryState& st = states_[static_cast<std::size_t>(s)];
            if (opt_.exclude_self && j == q) continue;
            if (cameras_ && labels_.gallery_camera[j] == st.camera) continue;
            double v = scorer_.exact(q, j);
            if (groups_ && labels_.gallery_group[j] != st.group) v += group_offset_;
            st.positives[static_cast<std::size_t>(m)] = Positive{v, j, 0.0f, false};
          }
        }
      });
    }
  }
}

// Each query's valid positives by (threshold, index), with the lookups the scan needs.
void RetrievalScan::order_positives(std::int64_t q0, std::int64_t q1) {
  arena_for(q1 - q0, opt_.threads, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t s = b; s < e; ++s) {
      QueryState& st = states_[static_cast<std::size_t>(s)];
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
      st.counts.assign(static_cast<std::size_t>(repeats_ + 1) * (P + 1), 0);
    }
  });
}

void RetrievalScan::scan_negatives(std::int64_t q0, std::int64_t q1) {
  scan_gallery_blocks(scorer_, q0, q1, gb_, buffer_, opt_.threads,
                      [&](std::int64_t s, const float* row, std::int64_t g0, std::int64_t g1) {
                        scan_row(s, q0 + s, row, g0, g1);
                      });
}

// One query against gallery items [g0, g1): its top-k, the float scores of its positives, and
// each negative counted into its bucket or kept as near a positive.
void RetrievalScan::scan_row(std::int64_t s, std::int64_t q, const float* row, std::int64_t g0, std::int64_t g1) {
  QueryState& st = states_[static_cast<std::size_t>(s)];
  if (st.status == QueryOutcome::Status::junk_query) return;
  const std::size_t P = st.positives.size();
  for (std::int64_t j = g0; j < g1; ++j) {
    float d = row[j - g0];
    if (groups_ && labels_.gallery_group[j] != st.group) d += static_cast<float>(group_offset_);
    if (keep_ && !(junk(gl_[j]) || (opt_.exclude_self && j == q) ||
                   (cameras_ && gl_[j] == st.label && labels_.gallery_camera[j] == st.camera)))
      push_top(st.heap, keep_, {d, j});
    if (d > st.skip_above) continue;  // ranks after every positive: changes no metric
    if (junk(gl_[j]) || (opt_.exclude_self && j == q)) continue;
    if (gl_[j] == st.label) {
      if (cameras_ && labels_.gallery_camera[j] == st.camera) continue;
      auto it = std::lower_bound(st.slot_of.begin(), st.slot_of.end(), std::make_pair(j, -1));
      Positive& p = st.positives[static_cast<std::size_t>(it->second)];
      p.score = d;
      p.seen = true;
      continue;
    }
    const std::size_t bucket = branchless_lower_bound(st.thresholds, double(d));
    if ((bucket < P && st.thresholds[bucket] - d <= st.eps) || (bucket > 0 && d - st.thresholds[bucket - 1] <= st.eps)) {
      st.near.emplace_back(d, j);
      continue;
    }
    st.counts[bucket] += 1;
    for (int r = 0; r < repeats_; ++r)
      if (shot_mask_[static_cast<std::size_t>(r)][static_cast<std::size_t>(j)])
        st.counts[static_cast<std::size_t>(r + 1) * (P + 1) + bucket] += 1;
  }
}

// Exact scores of the near negatives, in an order that reuses rows: tiles of kNearTile queries
// (whose rows stay in cache), and inside a tile by gallery index (each gallery row read once per
// tile). Where positives are dense, most negatives ranked before the last positive are near one,
// so this pass is as large as the positives' one.
void RetrievalScan::rescore_near(std::int64_t q0, std::int64_t q1) {
  constexpr std::int64_t kNearTile = 256;
  struct NearPair {
    std::int64_t tile, j, s;
    std::size_t i;
    bool operator<(const NearPair& o) const { return tile != o.tile ? tile < o.tile : j != o.j ? j < o.j : s < o.s; }
  };
  std::vector<NearPair> pairs;
  for (std::int64_t s = 0; s < q1 - q0; ++s) {
    QueryState& st = states_[static_cast<std::size_t>(s)];
    st.near_exact.assign(st.near.size(), 0.0);
    for (std::size_t i = 0; i < st.near.size(); ++i) pairs.push_back({s / kNearTile, st.near[i].second, s, i});
  }
  std::sort(pairs.begin(), pairs.end());
  arena_for(static_cast<std::int64_t>(pairs.size()), opt_.threads, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t k = b; k < e; ++k) {
      const NearPair& np = pairs[static_cast<std::size_t>(k)];
      QueryState& st = states_[static_cast<std::size_t>(np.s)];
      double v = scorer_.exact(q0 + np.s, np.j);
      if (groups_ && labels_.gallery_group[np.j] != st.group) v += group_offset_;
      st.near_exact[np.i] = v;
    }
  });
}

// Query q's top-k list and outcome. Near-ties are settled in double: positives by their exact
// threshold, negatives that fell within the float tolerance of one by an exact score of their
// own, so the ranking equals a stable argsort of double-precision scores.
void RetrievalScan::rank_query(std::int64_t s, std::int64_t q) {
  QueryState& st = states_[static_cast<std::size_t>(s)];
  if (keep_) {
    std::sort(st.heap.begin(), st.heap.end());
    for (std::size_t r = 0; r < st.heap.size(); ++r) {
      result_.top_index[static_cast<std::size_t>(q) * keep_ + r] = st.heap[r].second;
      result_.top_score[static_cast<std::size_t>(q) * keep_ + r] = st.heap[r].first;
    }
  }
  QueryOutcome& out = result_.queries[static_cast<std::size_t>(q)];
  if (st.status != QueryOutcome::Status::ok) {
    out.status = st.status;
    out.label = st.label;
    return;
  }
  const std::size_t P = st.positives.size();
  std::vector<Exact> pos_items(P);
  for (std::size_t k = 0; k < P; ++k) {
    const Positive& p = st.positives[k];
    if (p.seen && std::fabs(double(p.score) - p.threshold) > st.eps) violations_[static_cast<std::size_t>(q)] += 1;
    pos_items[k] = {p.threshold, p.index};
  }
  std::vector<Exact> near(st.near.size());
  near_counts_[static_cast<std::size_t>(q)] = static_cast<std::int64_t>(near.size());
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
  for (int r = 0; r < repeats_; ++r) {
    Rng rng(derive_seed(derive_seed(opt_.seed, static_cast<std::uint64_t>(q)), cat("shot/", r)));
    const std::size_t k = std::uniform_int_distribution<std::size_t>(0, P - 1)(rng);
    const auto* counts = st.counts.data() + static_cast<std::size_t>(r + 1) * (P + 1);
    std::int64_t rank = 1;
    for (std::size_t b2 = 0; b2 <= k; ++b2) rank += counts[b2];
    const auto& mask = shot_mask_[static_cast<std::size_t>(r)];
    for (const Exact& it : near) {
      if (!(it < pos_items[k])) break;
      rank += mask[static_cast<std::size_t>(it.second)];
    }
    out.single_shot_ranks.push_back(rank);
  }
}

}  // namespace

RetrievalResult evaluate_retrieval(const BlockScorer& scorer, const RetrievalLabels& labels,
                                   const RetrievalOptions& opt) {
  check_inputs(scorer, labels, opt);
  return RetrievalScan(scorer, labels, opt).run();
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
