#include "anchor_sampling.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_set>
#include <utility>
#include <vector>

#include "embedflow/rng.hpp"
#include "geodesy.hpp"
#include "spatial_index.hpp"

namespace embedflow::geo {
namespace {

// A small counter-based generator: seeding it per anchor costs one multiply, where seeding a
// mt19937_64 per anchor would dominate the run.
class AnchorRng {
 public:
  explicit AnchorRng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() { return mix64(state_ += 0x9e3779b97f4a7c15ULL); }
  // Uniform in [0, n) (Lemire's multiply-shift; bias below 2^-40 for our n).
  std::uint64_t below(std::uint64_t n) {
    return static_cast<std::uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
  }

 private:
  std::uint64_t state_;
};

// A run of candidates: elements map[i] (or i itself when map is null) for i in [begin, end).
// `inverse` (map's inverse permutation) finds an element's slot without scanning.
struct Range {
  std::uint32_t begin, end;
  const std::uint32_t* map;
  const std::uint32_t* inverse = nullptr;
  bool unsure = false;  // a KD-tree leaf only partly in the region: members need the exact test
  std::uint32_t at(std::uint64_t i) const { return map ? map[begin + i] : static_cast<std::uint32_t>(begin + i); }
  std::uint32_t size() const { return end - begin; }
  // Offset of element e in this range, or -1.
  std::int64_t find(std::uint32_t e) const {
    const std::uint32_t slot = map ? (inverse ? inverse[e] : UINT32_MAX) : e;
    return slot >= begin && slot < end ? static_cast<std::int64_t>(slot - begin) : -1;
  }
};

struct Window {
  std::int64_t begin = INT64_MIN, end = INT64_MAX;  // [begin, end)
  void clip(std::int64_t b, std::int64_t e) { begin = std::max(begin, b); end = std::min(end, e); }
};

// Candidates as a union of ranges with prefix sums, so rank -> element is a binary search.
struct Candidates {
  std::vector<Range> ranges;
  std::vector<std::uint64_t> prefix;
  void clear() { ranges.clear(); }
  // Appends positions [b, e), merging with the previous range when adjacent.
  void add_positions(std::uint32_t b, std::uint32_t e, bool unsure = false) {
    if (b == e) return;
    if (!ranges.empty() && !ranges.back().map && ranges.back().end == b && ranges.back().unsure == unsure)
      ranges.back().end = e;
    else
      ranges.push_back(Range{b, e, nullptr, nullptr, unsure});
  }
  std::size_t range_of(std::uint64_t rank) const {
    return static_cast<std::size_t>(std::upper_bound(prefix.begin(), prefix.end(), rank) - prefix.begin()) - 1;
  }
  void finish() {
    prefix.resize(ranges.size() + 1);
    prefix[0] = 0;
    for (std::size_t r = 0; r < ranges.size(); ++r) prefix[r + 1] = prefix[r] + ranges[r].size();
  }
  std::uint64_t total() const { return prefix.back(); }
  std::uint32_t element(std::uint64_t rank) const {
    const std::size_t r = static_cast<std::size_t>(std::upper_bound(prefix.begin(), prefix.end(), rank) - prefix.begin()) - 1;
    return ranges[r].at(rank - prefix[r]);
  }
  std::uint64_t rank_of(std::uint32_t e) const {
    for (std::size_t r = 0; r < ranges.size(); ++r) {
      const std::int64_t off = ranges[r].find(e);
      if (off >= 0) return prefix[r] + static_cast<std::uint64_t>(off);
    }
    return UINT64_MAX;
  }
};

// Draws of more than this many partners skip rejection sampling (whose duplicate checks cost
// O(k) each) and enumerate the candidates instead, so a draw costs O(candidates) whatever k asks:
// k_neg = 10^9 on 200 photos takes all of them at once.
constexpr std::uint64_t kRejectionMaxK = 64;

// k bounded by what the candidates can supply (k may be anything the user wrote).
std::uint64_t bounded_k(std::int64_t k, std::uint64_t available) {
  return k <= 0 ? 0 : std::min<std::uint64_t>(static_cast<std::uint64_t>(k), available);
}

// Remembers which values a draw has taken: a scan of the few taken so far for small draws (the
// usual k of 1-10), a hash set for large ones, so Floyd's algorithm stays O(k) either way.
class TakenSet {
 public:
  explicit TakenSet(std::uint64_t expected) : hashed_(expected > kRejectionMaxK) {}
  // True when v was not taken yet (and takes it).
  bool insert(std::uint64_t v) {
    if (hashed_) return set_.insert(v).second;
    if (std::find(small_.begin(), small_.end(), v) != small_.end()) return false;
    small_.push_back(v);
    return true;
  }

 private:
  bool hashed_;
  std::vector<std::uint64_t> small_;
  std::unordered_set<std::uint64_t> set_;
};

// Floyd's sampling of min(k, n) distinct ranks out of the candidates with rank `skip` (the
// anchor itself, or UINT64_MAX) cut out. Appends elements to `out`.
void draw_exact(const Candidates& c, std::uint64_t skip, int k, AnchorRng& rng, std::vector<std::uint32_t>& out) {
  const std::uint64_t n = c.total() - (skip != UINT64_MAX);
  const std::uint64_t want = bounded_k(k, n);
  thread_local std::vector<std::uint64_t> ranks;
  ranks.clear();
  TakenSet taken(want);
  for (std::uint64_t j = n - want; j < n; ++j) {
    const std::uint64_t t = rng.below(j + 1);
    const std::uint64_t r = taken.insert(t) ? t : j;
    if (r == j) taken.insert(j);
    ranks.push_back(r);
  }
  for (std::uint64_t r : ranks) out.push_back(c.element(r >= skip ? r + 1 : r));
}

// Up to k distinct elements passing `accept` (never `self`), uniformly: rejection first, which
// is cheap whenever most candidates pass; exact enumeration when nearly all are rejected.
// Appends to `out`; returns true when enumeration was needed.
template <class Accept>
bool draw_filtered(const Candidates& c, std::uint32_t self, int k, AnchorRng& rng, Accept&& accept,
                   std::vector<std::uint32_t>& out, std::vector<std::uint32_t>& pool) {
  const std::uint64_t total = c.total();
  k = static_cast<int>(bounded_k(k, total));
  if (total == 0 || k <= 0) return false;
  const std::size_t first = out.size();
  auto chosen = [&](std::uint32_t e) { return std::find(out.begin() + first, out.end(), e) != out.end(); };
  if (static_cast<std::uint64_t>(k) <= kRejectionMaxK) {
    const int attempts = 8 * k + 32;
    for (int a = 0; a < attempts && static_cast<int>(out.size() - first) < k; ++a) {
      const std::uint32_t e = c.element(rng.below(total));
      if (e != self && !chosen(e) && accept(e)) out.push_back(e);
    }
    if (static_cast<int>(out.size() - first) >= k) return false;
  }
  out.resize(first);
  pool.clear();
  for (const Range& r : c.ranges)
    for (std::uint32_t i = 0; i < r.size(); ++i) {
      const std::uint32_t e = r.at(i);
      if (e != self && accept(e)) pool.push_back(e);
    }
  const std::uint64_t n = pool.size();
  const std::uint64_t want = bounded_k(k, n);
  TakenSet taken(want);
  for (std::uint64_t j = n - want; j < n; ++j) {
    const std::uint64_t t = rng.below(j + 1);
    const std::uint64_t pick = taken.insert(pool[t]) ? t : j;
    if (pick == j) taken.insert(pool[j]);
    out.push_back(pool[pick]);
  }
  return true;
}

// A region (ball or ring) around one location, shared by its photos. A query leaves leaves
// that straddle the boundary unresolved; when they hold few of the candidates, draws come from
// the superset and straddling members get the exact test (rejection keeps the draw uniform);
// otherwise, or when rejection runs out of attempts, the leaves are resolved point by point.
struct Region {
  double r_min = 0, r_max = 0, h_min = -1, h_max = 0;
  LocationIndex::Runs runs, unsure;
  Candidates cand;
  bool exact = true;
  std::uint64_t own_base = UINT64_MAX;  // rank of the location's first photo when it is inside
};

// One block's sampling: the scratch buffers its anchors reuse, and the draws of each kind.
class BlockSampler {
 public:
  BlockSampler(const SamplerConfig& c, const SamplerIndex& m, std::atomic<std::uint64_t>& drawn)
      : c_(c), m_(m), drawn_(drawn), ring_(c.negative_max_m > 0),
        windowed_(c.same_month || c.same_year || c.max_time_gap_s > 0),
        // Without time windows or user rules every photo of a location sees the same candidates,
        // so they are gathered once per location as runs of the tree, never point by point.
        shared_positives_(c.mode == PositiveMode::radius && !windowed_ && c.positive_user == UserRule::any),
        hav_negative_(hav_of_distance(c.negative_min_m)) {}

  // False when the row budget ran out (the block stops there).
  bool sample_location(std::uint32_t u, BlockOut& out);

 private:
  bool over_budget() const { return c_.max_rows > 0 && drawn_.load(std::memory_order_relaxed) > c_.max_rows; }
  void sample_anchor(std::uint32_t u, std::uint32_t a, BlockOut& out);
  Window window_of(std::uint32_t a) const;
  // Positions in [b0, b1) are one location's photos, sorted by time: those inside `w`.
  void add_time_range(std::uint32_t b0, std::uint32_t b1, const Window& w, Candidates& into) const;
  void draw_positives(std::uint32_t u, std::uint32_t a, const Window& w, AnchorRng& rng);
  void draw_timelapse_positives(std::uint32_t a, const Window& w, AnchorRng& rng);
  void gather_ball_positives(std::uint32_t a, const Window& w);
  // Returns true when open-ended negatives needed exact enumeration.
  bool draw_negatives(std::uint32_t u, std::uint32_t a, const Window& w, AnchorRng& rng);
  bool draw_far(std::uint32_t lo, std::uint32_t hi, double la, double lo_rad, int k, AnchorRng& rng);
  void fill(Region& g, std::uint32_t u) const;
  void prepare(Region& g, std::uint32_t u, double r_min, double r_max) const;
  void draw_region(Region& g, std::uint32_t u, std::uint32_t self, int k, AnchorRng& rng);
  void append_rows(std::uint32_t a, std::size_t n_pos, BlockOut& out) const;

  const SamplerConfig& c_;
  const SamplerIndex& m_;
  std::atomic<std::uint64_t>& drawn_;  // pair rows drawn so far, by every thread
  const bool ring_, windowed_, shared_positives_;
  const double hav_negative_;
  Region pos_region_, ring_region_;
  LocationIndex::Runs runs_;
  std::vector<std::uint32_t> ball_, chosen_, pool_;
  std::vector<std::pair<std::uint32_t, double>> far_;  // open-ended negatives: (by_time slot, hav)
  Candidates pos_, neg_;
};

bool BlockSampler::sample_location(std::uint32_t u, BlockOut& out) {
  const std::uint32_t loc_begin = m_.groups.start[u], loc_end = m_.groups.start[u + 1];
  if (c_.mode == PositiveMode::timelapse) {
    bool any = false;
    for (std::uint32_t p = loc_begin; p < loc_end && !any; ++p) any = m_.seq_of[p] >= 0;
    if (!any) return true;
  }
  if (shared_positives_) {
    prepare(pos_region_, u, 0, c_.positive_radius_m);
    if (pos_region_.cand.total() <= 1) {  // only the location's single photo: no positives
      out.anchors += loc_end - loc_begin;
      return true;
    }
  } else if (c_.mode == PositiveMode::radius) {
    m_.index->query(m_.groups.lat[u], m_.groups.lon[u], 0, c_.positive_radius_m, ball_);
  }
  if (ring_ && !windowed_) {
    prepare(ring_region_, u, c_.negative_min_m, c_.negative_max_m);
  } else if (ring_) {
    m_.index->query_runs(m_.groups.lat[u], m_.groups.lon[u], c_.negative_min_m, c_.negative_max_m, runs_);
  }
  for (std::uint32_t a = loc_begin; a < loc_end; ++a) {
    if (over_budget()) return false;
    if (c_.mode == PositiveMode::timelapse && m_.seq_of[a] < 0) continue;
    sample_anchor(u, a, out);
  }
  return true;
}

// Each anchor draws from its own generator, so the rows do not depend on the thread count.
void BlockSampler::sample_anchor(std::uint32_t u, std::uint32_t a, BlockOut& out) {
  ++out.anchors;
  AnchorRng rng(derive_seed(c_.seed, static_cast<std::uint64_t>(m_.id[a])));
  const Window w = window_of(a);
  chosen_.clear();
  far_.clear();
  draw_positives(u, a, w, rng);
  if (chosen_.empty()) return;
  const std::size_t n_pos = chosen_.size();
  const bool fallback = draw_negatives(u, a, w, rng);
  out.fallbacks += fallback;
  ++out.with_pos;
  out.pos += static_cast<std::int64_t>(n_pos);
  out.neg += static_cast<std::int64_t>(chosen_.size() - n_pos + far_.size());
  append_rows(a, n_pos, out);
  drawn_.fetch_add(chosen_.size() + far_.size(), std::memory_order_relaxed);
}

Window BlockSampler::window_of(std::uint32_t a) const {
  Window w;
  if (c_.same_month) { const auto i = month_of(m_.time[a]); w.clip(i.begin, i.end); }
  if (c_.same_year) { const auto i = year_of(m_.time[a]); w.clip(i.begin, i.end); }
  if (c_.max_time_gap_s > 0) w.clip(m_.time[a] - c_.max_time_gap_s, m_.time[a] + c_.max_time_gap_s + 1);
  return w;
}

void BlockSampler::add_time_range(std::uint32_t b0, std::uint32_t b1, const Window& w, Candidates& into) const {
  const auto lo = std::lower_bound(m_.time.begin() + b0, m_.time.begin() + b1, w.begin) - m_.time.begin();
  const auto hi = std::lower_bound(m_.time.begin() + lo, m_.time.begin() + b1, w.end) - m_.time.begin();
  into.add_positions(static_cast<std::uint32_t>(lo), static_cast<std::uint32_t>(hi));
}

void BlockSampler::draw_positives(std::uint32_t u, std::uint32_t a, const Window& w, AnchorRng& rng) {
  if (shared_positives_) {
    draw_region(pos_region_, u, a, c_.k_pos, rng);
  } else if (c_.mode == PositiveMode::timelapse) {
    draw_timelapse_positives(a, w, rng);
  } else {
    gather_ball_positives(a, w);
    if (c_.positive_user == UserRule::different) {
      const std::int32_t ua = m_.user[a];
      draw_filtered(pos_, a, c_.k_pos, rng, [&](std::uint32_t e) { return m_.user[e] != ua; }, chosen_, pool_);
    } else {
      draw_exact(pos_, pos_.rank_of(a), c_.k_pos, rng, chosen_);
    }
  }
}

void BlockSampler::draw_timelapse_positives(std::uint32_t a, const Window& w, AnchorRng& rng) {
  const std::int32_t s = m_.seq_of[a];
  const std::uint32_t s0 = m_.seq_start[s], s1 = m_.seq_start[s + 1];
  Window fw = w;
  fw.clip(m_.time[a] - c_.timelapse_gap_s, m_.time[a] + c_.timelapse_gap_s + 1);
  auto t_of = [&](std::uint32_t i) { return m_.time[m_.seq_members[i]]; };
  std::uint32_t lo = s0, hi = s1;
  while (lo < s1 && t_of(lo) < fw.begin) ++lo;  // sequences are short; linear is fine
  while (hi > lo && t_of(hi - 1) >= fw.end) --hi;
  pos_.clear();
  pos_.ranges.push_back(Range{lo, hi, m_.seq_members.data()});
  pos_.finish();
  const std::uint32_t la = m_.loc[a];
  draw_filtered(pos_, a, c_.k_pos, rng,
                [&](std::uint32_t e) { return m_.index->distance_m(la, m_.loc[e]) <= c_.positive_radius_m; }, chosen_,
                pool_);
}

// The ball's photos inside the anchor's window (and of its user, for same-user positives).
void BlockSampler::gather_ball_positives(std::uint32_t a, const Window& w) {
  pos_.clear();
  for (std::uint32_t v : ball_) {
    const std::uint32_t b0 = m_.groups.start[v], b1 = m_.groups.start[v + 1];
    if (c_.positive_user == UserRule::same) {
      // by_user is sorted by (user, time) inside the location.
      auto first = m_.by_user.begin() + b0, last = m_.by_user.begin() + b1;
      const std::int32_t ua = m_.user[a];
      auto lo = std::partition_point(first, last, [&](std::uint32_t e) {
        return m_.user[e] < ua || (m_.user[e] == ua && m_.time[e] < w.begin);
      });
      auto hi = std::partition_point(lo, last, [&](std::uint32_t e) { return m_.user[e] == ua && m_.time[e] < w.end; });
      if (hi > lo)
        pos_.ranges.push_back(Range{static_cast<std::uint32_t>(lo - m_.by_user.begin()),
                                    static_cast<std::uint32_t>(hi - m_.by_user.begin()), m_.by_user.data(),
                                    m_.by_user_inv.data()});
    } else {
      add_time_range(b0, b1, w, pos_);
    }
  }
  pos_.finish();
}

bool BlockSampler::draw_negatives(std::uint32_t u, std::uint32_t a, const Window& w, AnchorRng& rng) {
  if (ring_) {
    if (windowed_) {
      neg_.clear();
      for (auto [t0, t1] : runs_)
        for (std::uint32_t v = t0; v < t1; ++v) add_time_range(m_.groups.start[v], m_.groups.start[v + 1], w, neg_);
      neg_.finish();
      draw_exact(neg_, UINT64_MAX, c_.k_neg, rng, chosen_);
    } else {
      draw_region(ring_region_, u, UINT32_MAX, c_.k_neg, rng);
    }
    return false;
  }
  std::uint32_t lo = 0, hi = static_cast<std::uint32_t>(m_.by_time.size());
  if (windowed_) {
    lo = static_cast<std::uint32_t>(std::lower_bound(m_.by_time_t.begin(), m_.by_time_t.end(), w.begin) -
                                    m_.by_time_t.begin());
    hi = static_cast<std::uint32_t>(std::lower_bound(m_.by_time_t.begin() + lo, m_.by_time_t.end(), w.end) -
                                    m_.by_time_t.begin());
  }
  return draw_far(lo, hi, m_.groups.lat[m_.loc[a]] * kDegToRad, m_.groups.lon[m_.loc[a]] * kDegToRad, c_.k_neg, rng);
}

// Open-ended negatives: uniform over the time window [lo, hi) of by_time, at least
// negative_min_m away (the anchor itself, at distance 0, never qualifies). Rejection first;
// exact enumeration when nearly every photo lies within negative_min_m.
bool BlockSampler::draw_far(std::uint32_t lo, std::uint32_t hi, double la, double lo_rad, int k, AnchorRng& rng) {
  const double cl = std::cos(la);
  const std::uint64_t n = hi - lo;
  k = static_cast<int>(bounded_k(k, n));
  if (n == 0 || k <= 0) return false;
  auto hav_to = [&](std::uint32_t i) {
    const auto& e = m_.by_time[i];
    return haversine_term(la, lo_rad, cl, e.lat, e.lon, e.cos_lat);
  };
  auto taken = [&](std::uint32_t i) {
    return std::any_of(far_.begin(), far_.end(), [&](const auto& p) { return p.first == i; });
  };
  if (static_cast<std::uint64_t>(k) <= kRejectionMaxK) {
    const int attempts = 8 * k + 32;
    for (int t = 0; t < attempts && static_cast<int>(far_.size()) < k; ++t) {
      const auto i = static_cast<std::uint32_t>(lo + rng.below(n));
      const double h = hav_to(i);
      if (h >= hav_negative_ && !taken(i)) far_.emplace_back(i, h);
    }
    if (static_cast<int>(far_.size()) >= k) return false;
  }
  far_.clear();
  pool_.clear();
  for (std::uint32_t i = lo; i < hi; ++i)
    if (hav_to(i) >= hav_negative_) pool_.push_back(i);
  const std::uint64_t avail = pool_.size();
  const std::uint64_t want = bounded_k(k, avail);
  TakenSet chosen(want);
  for (std::uint64_t j = avail - want; j < avail; ++j) {
    const std::uint32_t i = pool_[rng.below(j + 1)];
    const std::uint32_t pick = chosen.insert(i) ? i : pool_[j];
    if (pick == pool_[j]) chosen.insert(pool_[j]);
    far_.emplace_back(pick, hav_to(pick));
  }
  return true;
}

void BlockSampler::fill(Region& g, std::uint32_t u) const {
  g.cand.clear();
  std::size_t j = 0;
  for (const auto& [t0, t1] : g.runs) {
    while (j < g.unsure.size() && g.unsure[j].first < t0) {
      g.cand.add_positions(m_.groups.start[g.unsure[j].first], m_.groups.start[g.unsure[j].second], true);
      ++j;
    }
    g.cand.add_positions(m_.groups.start[t0], m_.groups.start[t1]);
  }
  for (; j < g.unsure.size(); ++j)
    g.cand.add_positions(m_.groups.start[g.unsure[j].first], m_.groups.start[g.unsure[j].second], true);
  g.cand.finish();
  g.exact = g.unsure.empty();
  g.own_base = g.exact ? g.cand.rank_of(m_.groups.start[u]) : UINT64_MAX;
}

void BlockSampler::prepare(Region& g, std::uint32_t u, double r_min, double r_max) const {
  g.r_min = r_min;
  g.r_max = r_max;
  g.h_min = r_min > 0 ? hav_of_distance(r_min) : -1.0;
  g.h_max = hav_of_distance(r_max);
  m_.index->query_runs(m_.groups.lat[u], m_.groups.lon[u], r_min, r_max, g.runs, &g.unsure);
  std::uint64_t sure = 0, unsure = 0;
  for (const auto& [t0, t1] : g.runs) sure += m_.groups.start[t1] - m_.groups.start[t0];
  for (const auto& [t0, t1] : g.unsure) unsure += m_.groups.start[t1] - m_.groups.start[t0];
  if (unsure > 0 && static_cast<double>(unsure) > c_.unsure_fraction * static_cast<double>(sure + unsure))
    m_.index->resolve(m_.groups.lat[u], m_.groups.lon[u], r_min, r_max, g.runs, g.unsure);
  fill(g, u);
}

// Up to k distinct members other than `self` (a photo position of location u, or UINT32_MAX),
// appended to chosen_.
void BlockSampler::draw_region(Region& g, std::uint32_t u, std::uint32_t self, int k, AnchorRng& rng) {
  std::vector<std::uint32_t>& out = chosen_;
  k = static_cast<int>(bounded_k(k, g.cand.total()));
  if (!g.exact && static_cast<std::uint64_t>(k) > kRejectionMaxK) {
    m_.index->resolve(m_.groups.lat[u], m_.groups.lon[u], g.r_min, g.r_max, g.runs, g.unsure);
    fill(g, u);
  }
  if (!g.exact) {
    const std::size_t first = out.size();
    const std::uint64_t total = g.cand.total();
    const int attempts = 8 * k + 32;
    for (int t = 0; t < attempts && static_cast<int>(out.size() - first) < k; ++t) {
      const std::uint64_t rank = rng.below(total);
      const std::size_t r = g.cand.range_of(rank);
      const std::uint32_t e = g.cand.ranges[r].at(rank - g.cand.prefix[r]);
      if (e == self || std::find(out.begin() + first, out.end(), e) != out.end()) continue;
      if (g.cand.ranges[r].unsure && !m_.index->within(u, m_.loc[e], g.h_min, g.h_max)) continue;
      out.push_back(e);
    }
    if (static_cast<int>(out.size() - first) >= k) return;
    // Too few accepted to tell whether more exist: settle the region exactly from here on.
    out.resize(first);
    m_.index->resolve(m_.groups.lat[u], m_.groups.lon[u], g.r_min, g.r_max, g.runs, g.unsure);
    fill(g, u);
  }
  const std::uint64_t skip =
      self != UINT32_MAX && g.own_base != UINT64_MAX ? g.own_base + (self - m_.groups.start[u]) : UINT64_MAX;
  draw_exact(g.cand, skip, k, rng, out);
}

// The anchor's rows: its positives, then its negatives from regions, then its open-ended ones.
void BlockSampler::append_rows(std::uint32_t a, std::size_t n_pos, BlockOut& out) const {
  for (std::size_t i = 0; i < chosen_.size(); ++i) {
    const std::uint32_t e = chosen_[i];
    out.rows.anchor.push_back(m_.id[a]);
    out.rows.other.push_back(m_.id[e]);
    out.rows.label.push_back(i < n_pos ? 1 : 0);
    out.rows.distance_m.push_back(m_.index->distance_m(m_.loc[a], m_.loc[e]));
  }
  for (const auto& [i, h] : far_) {
    out.rows.anchor.push_back(m_.id[a]);
    out.rows.other.push_back(m_.by_time[i].id);
    out.rows.label.push_back(0);
    out.rows.distance_m.push_back(distance_of_hav(h));
  }
}

}  // namespace

void sample_location_block(const SamplerConfig& c, const SamplerIndex& m, std::uint32_t u_begin, std::uint32_t u_end,
                           std::atomic<std::uint64_t>& drawn, BlockOut& out) {
  BlockSampler sampler(c, m, drawn);
  for (std::uint32_t u = u_begin; u < u_end; ++u)
    if (!sampler.sample_location(u, out)) return;
}

}  // namespace embedflow::geo
