#include "pair_sampler.hpp"
#include <embedflow/file_kind.hpp>

#include <algorithm>
#include <atomic>
#include <unordered_set>
#include <chrono>
#include <cmath>
#include <fstream>
#include <numeric>

#include <tbb/parallel_for.h>
#include <tbb/parallel_sort.h>
#include <tbb/task_arena.h>

#include "embedflow/error.hpp"
#include "embedflow/rng.hpp"
#include "geodesy.hpp"
#include "spatial_index.hpp"

namespace embedflow::geo {

std::int32_t UserInterner::intern(const std::string& name) {
  auto [it, inserted] = ids_.try_emplace(name, static_cast<std::int32_t>(ids_.size()));
  return it->second;
}

TripletRows to_triplets(const PairRows& rows) {
  TripletRows t;
  std::size_t i = 0;
  while (i < rows.size()) {
    std::size_t j = i;
    while (j < rows.size() && rows.anchor[j] == rows.anchor[i] && rows.label[j] == 1) ++j;
    std::size_t k = j;
    while (k < rows.size() && rows.anchor[k] == rows.anchor[i] && rows.label[k] == 0) ++k;
    const std::size_t n = std::min(j - i, k - j);
    for (std::size_t m = 0; m < n; ++m) {
      t.anchor.push_back(rows.anchor[i]);
      t.positive.push_back(rows.other[i + m]);
      t.negative.push_back(rows.other[j + m]);
      t.positive_m.push_back(rows.distance_m[i + m]);
      t.negative_m.push_back(rows.distance_m[j + m]);
    }
    i = k > i ? k : i + 1;
  }
  return t;
}

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

std::uint64_t hash_file(const std::string& path, std::int64_t id, std::uint64_t& size) {
  if (const std::string kind = special_file_kind(path); !kind.empty())
    throw DataError(cat(path, " (photo id ", id, "): is a ", kind, ", not an image file"));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(cat(path, " (photo id ", id, "): cannot read image file for duplicate detection"));
  std::uint64_t h = 0xcbf29ce484222325ULL;
  std::vector<char> buf(1 << 16);
  size = 0;
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto got = static_cast<std::size_t>(in.gcount());
    size += got;
    for (std::size_t i = 0; i < got; ++i) {
      h ^= static_cast<unsigned char>(buf[i]);
      h *= 0x100000001b3ULL;
    }
  }
  return mix64(h ^ size);
}

}  // namespace

struct PairSampler::Impl {
  LocationGroups groups;  // kept photos by (location, time)
  std::unique_ptr<LocationIndex> index;
  // Per position p in groups.order:
  std::vector<std::int64_t> time, id;
  std::vector<std::int32_t> user;
  std::vector<std::uint32_t> loc;
  // Within each location, positions by (user, time).
  std::vector<std::uint32_t> by_user, by_user_inv;
  // All photos by time, for open-ended negative pools: what a draw needs sits in one cache line,
  // since these draws land anywhere in memory.
  struct NegEntry {
    double lat, lon, cos_lat;  // radians
    std::int64_t id;
  };
  std::vector<NegEntry> by_time;
  std::vector<std::int64_t> by_time_t;
  // Time-lapse sequences: members by (sequence, time); seq_of[p] = -1 outside any.
  std::vector<std::int32_t> seq_of;
  std::vector<std::uint32_t> seq_members, seq_start;
};

PairSampler::PairSampler(const PhotoSet& photos, SamplerConfig config)
    : impl_(std::make_unique<Impl>()), config_(std::move(config)) {
  const auto t0 = std::chrono::steady_clock::now();
  const SamplerConfig& c = config_;
  if (c.positive_radius_m < 0) throw ConfigError(cat("positive_radius_m ", c.positive_radius_m, " must be >= 0"));
  if (c.negative_max_m > 0 && c.negative_max_m < c.negative_min_m)
    throw ConfigError(cat("negative_max_m ", c.negative_max_m, " is below negative_min_m ", c.negative_min_m));
  if (c.negative_min_m <= c.positive_radius_m)
    throw ConfigError(cat("negative_min_m ", c.negative_min_m, " must exceed positive_radius_m ", c.positive_radius_m,
                          ", or a photo could be both a positive and a negative"));
  const std::size_t n = photos.size();
  if (photos.lat.size() != n || photos.lon.size() != n || photos.time.size() != n || photos.user.size() != n)
    throw ConfigError("PairSampler: photo columns differ in length");
  Impl& m = *impl_;
  stats_.input = static_cast<std::int64_t>(n);

  tbb::task_arena arena(c.threads > 0 ? c.threads : tbb::task_arena::automatic);
  arena.execute([&] {
    // Sort keys by value, not indices into the columns: the comparisons then stay in cache.
    struct Key {
      double lat, lon;
      std::int64_t time;
      std::int32_t user;
      std::uint32_t idx;
    };
    std::vector<Key> keys;
    keys.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      if (photos.time[i] >= c.date_from && photos.time[i] < c.date_to)
        keys.push_back({photos.lat[i], photos.lon[i], photos.time[i], photos.user[i], static_cast<std::uint32_t>(i)});
      else
        ++stats_.outside_dates;
    }
    {
      // A photo id twice would pair the photo with itself (a positive at 0 m): refused, whatever
      // built the photo stream (the CSV readers already refuse it with the file's lines).
      std::vector<std::pair<std::int64_t, std::uint32_t>> by_id(keys.size());
      for (std::size_t r = 0; r < keys.size(); ++r) by_id[r] = {photos.id[keys[r].idx], keys[r].idx};
      tbb::parallel_sort(by_id.begin(), by_id.end());
      for (std::size_t r = 1; r < by_id.size(); ++r)
        if (by_id[r].first == by_id[r - 1].first)
          throw DataError(cat("photo id ", by_id[r].first, " appears twice among the photos (rows ", by_id[r - 1].second,
                              " and ", by_id[r].second, " of the photo stream, counted from 0 within the date window); "
                              "a photo would be paired with itself"));
    }
    tbb::parallel_sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
      if (a.lat != b.lat) return a.lat < b.lat;
      if (a.lon != b.lon) return a.lon < b.lon;
      if (a.user != b.user) return a.user < b.user;
      if (a.time != b.time) return a.time < b.time;
      return a.idx < b.idx;
    });
    auto same_place = [](const Key& a, const Key& b) { return a.lat == b.lat && a.lon == b.lon; };
    // Duplicates: a burst of the same shot uploaded twice, or re-posted frames.
    if (c.duplicate_time_s >= 0) {
      std::size_t w = 0;
      std::int64_t last_time = 0;
      for (std::size_t r = 0; r < keys.size(); ++r) {
        const Key& k = keys[r];
        if (w > 0 && same_place(k, keys[w - 1]) && k.user == keys[w - 1].user && k.time - last_time <= c.duplicate_time_s) {
          ++stats_.duplicates;
          continue;
        }
        last_time = k.time;
        keys[w++] = k;
      }
      keys.resize(w);
    }
    if (c.duplicate_files && !photos.path.empty()) {
      std::vector<std::uint32_t> with_path;
      for (const Key& k : keys)
        if (!photos.path[k.idx].empty()) with_path.push_back(k.idx);
      std::vector<std::pair<std::uint64_t, std::uint64_t>> hashes(with_path.size());
      tbb::parallel_for(std::size_t(0), with_path.size(), [&](std::size_t i) {
        const std::string& rel = photos.path[with_path[i]];
        const std::string full = (!c.image_root.empty() && rel.front() != '/') ? c.image_root + "/" + rel : rel;
        std::uint64_t size = 0;
        hashes[i].first = hash_file(full, photos.id[with_path[i]], size);
        hashes[i].second = size;
      });
      std::vector<std::uint32_t> order(with_path.size());
      std::iota(order.begin(), order.end(), 0u);
      std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
        return hashes[a] != hashes[b] ? hashes[a] < hashes[b] : with_path[a] < with_path[b];
      });
      // The earliest row of each identical file stays.
      std::vector<char> drop(n, 0);
      for (std::size_t i = 1; i < order.size(); ++i)
        if (hashes[order[i]] == hashes[order[i - 1]]) drop[with_path[order[i]]] = 1;
      std::size_t w = 0;
      for (const Key& k : keys) {
        if (drop[k.idx]) { ++stats_.duplicate_files; continue; }
        keys[w++] = k;
      }
      keys.resize(w);
    }
    stats_.kept = static_cast<std::int64_t>(keys.size());

    {
      LocationGroups by_coords;
      for (std::size_t r = 0; r < keys.size(); ++r)
        if (r == 0 || !same_place(keys[r], keys[r - 1])) {
          by_coords.lat.push_back(keys[r].lat);
          by_coords.lon.push_back(keys[r].lon);
          by_coords.start.push_back(static_cast<std::uint32_t>(r));
        }
      by_coords.start.push_back(static_cast<std::uint32_t>(keys.size()));
      // Within a location, photos go by time.
      tbb::parallel_for(std::size_t(0), by_coords.size(), [&](std::size_t u) {
        std::sort(keys.begin() + by_coords.start[u], keys.begin() + by_coords.start[u + 1], [](const Key& a, const Key& b) {
          return a.time != b.time ? a.time < b.time : a.idx < b.idx;
        });
      });
      by_coords.order.resize(keys.size());
      for (std::size_t r = 0; r < keys.size(); ++r) by_coords.order[r] = keys[r].idx;
      std::vector<Key>().swap(keys);
      m.index = std::make_unique<LocationIndex>(by_coords.lat, by_coords.lon);
      // Locations take the tree's numbering, so a subtree is a contiguous run of photos.
      const auto& ord = m.index->order();
      const std::size_t U = ord.size();
      m.groups.lat.resize(U); m.groups.lon.resize(U); m.groups.start.resize(U + 1);
      m.groups.order.resize(by_coords.order.size());
      std::uint32_t w = 0;
      for (std::size_t t = 0; t < U; ++t) {
        const std::uint32_t u = ord[t];
        m.groups.lat[t] = by_coords.lat[u];
        m.groups.lon[t] = by_coords.lon[u];
        m.groups.start[t] = w;
        for (std::uint32_t i = by_coords.start[u]; i < by_coords.start[u + 1]; ++i) m.groups.order[w++] = by_coords.order[i];
      }
      m.groups.start[U] = w;
    }
    stats_.unique_locations = static_cast<std::int64_t>(m.groups.size());
    const std::size_t N = m.groups.order.size();
    m.time.resize(N); m.id.resize(N); m.user.resize(N); m.loc.resize(N);
    for (std::size_t u = 0; u < m.groups.size(); ++u)
      for (std::uint32_t p = m.groups.start[u]; p < m.groups.start[u + 1]; ++p) {
        const std::uint32_t i = m.groups.order[p];
        m.time[p] = photos.time[i];
        m.id[p] = photos.id[i];
        m.user[p] = photos.user[i];
        m.loc[p] = static_cast<std::uint32_t>(u);
      }
    std::vector<std::uint32_t>().swap(m.groups.order);  // input indices are not needed past here
    auto user_time = [&](std::uint32_t a, std::uint32_t b) {
      if (m.user[a] != m.user[b]) return m.user[a] < m.user[b];
      if (m.time[a] != m.time[b]) return m.time[a] < m.time[b];
      return a < b;
    };
    // The (user, time) order inside each location serves same-user positives only.
    if (c.positive_user == UserRule::same) {
      m.by_user.resize(N);
      std::iota(m.by_user.begin(), m.by_user.end(), 0u);
      tbb::parallel_for(std::size_t(0), m.groups.size(), [&](std::size_t u) {
        std::sort(m.by_user.begin() + m.groups.start[u], m.by_user.begin() + m.groups.start[u + 1], user_time);
      });
      m.by_user_inv.resize(N);
      for (std::size_t i = 0; i < N; ++i) m.by_user_inv[m.by_user[i]] = static_cast<std::uint32_t>(i);
    }
    {
      std::vector<std::uint32_t> by_time(N);
      std::iota(by_time.begin(), by_time.end(), 0u);
      tbb::parallel_sort(by_time.begin(), by_time.end(), [&](std::uint32_t a, std::uint32_t b) {
        return m.time[a] != m.time[b] ? m.time[a] < m.time[b] : a < b;
      });
      m.by_time_t.resize(N);
      m.by_time.resize(N);
      tbb::parallel_for(std::size_t(0), N, [&](std::size_t i) {
        const std::uint32_t p = by_time[i];
        const double la = m.groups.lat[m.loc[p]] * kDegToRad;
        m.by_time_t[i] = m.time[p];
        m.by_time[i] = {la, m.groups.lon[m.loc[p]] * kDegToRad, std::cos(la), m.id[p]};
      });
    }

    if (c.mode == PositiveMode::timelapse) {
      std::vector<std::uint32_t> seq(N);
      std::iota(seq.begin(), seq.end(), 0u);
      tbb::parallel_sort(seq.begin(), seq.end(), user_time);
      m.seq_of.assign(N, -1);
      std::size_t i = 0;
      while (i < N) {
        std::size_t j = i + 1;
        while (j < N && m.user[seq[j]] == m.user[seq[i]] && m.time[seq[j]] - m.time[seq[j - 1]] <= c.timelapse_gap_s &&
               m.index->distance_m(m.loc[seq[j]], m.loc[seq[j - 1]]) <= c.positive_radius_m)
          ++j;
        if (static_cast<int>(j - i) >= c.timelapse_min_frames) {
          const auto s = static_cast<std::int32_t>(m.seq_start.size());
          m.seq_start.push_back(static_cast<std::uint32_t>(m.seq_members.size()));
          for (std::size_t k = i; k < j; ++k) {
            m.seq_of[seq[k]] = s;
            m.seq_members.push_back(seq[k]);
          }
        }
        i = j;
      }
      m.seq_start.push_back(static_cast<std::uint32_t>(m.seq_members.size()));
      stats_.timelapse_sequences = static_cast<std::int64_t>(m.seq_start.size() - 1);
      stats_.timelapse_frames = static_cast<std::int64_t>(m.seq_members.size());
    }
  });
  stats_.build_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

PairSampler::~PairSampler() = default;

void PairSampler::run(const std::function<void(PairRows&&)>& sink, const std::function<bool()>& stop) {
  const auto t0 = std::chrono::steady_clock::now();
  const SamplerConfig& c = config_;
  const Impl& m = *impl_;
  const std::size_t U = m.groups.size();
  const bool ring = c.negative_max_m > 0;
  const bool windowed = c.same_month || c.same_year || c.max_time_gap_s > 0;

  // Blocks of whole locations, so each ball query is shared by the location's photos.
  std::vector<std::uint32_t> block_start{0};
  {
    std::size_t acc = 0;
    for (std::size_t u = 0; u < U; ++u) {
      acc += m.groups.count(u);
      if (acc >= c.block_anchors) { block_start.push_back(static_cast<std::uint32_t>(u + 1)); acc = 0; }
    }
    if (block_start.back() != U) block_start.push_back(static_cast<std::uint32_t>(U));
  }
  const std::size_t n_blocks = block_start.size() - 1;

  struct BlockOut {
    PairRows rows;
    std::int64_t anchors = 0, with_pos = 0, pos = 0, neg = 0, fallbacks = 0;
  };

  // Without time windows or user rules every photo of a location sees the same candidates, so
  // they are gathered once per location as runs of the tree, never point by point.
  const bool shared_positives = c.mode == PositiveMode::radius && !windowed && c.positive_user == UserRule::any;
  const double hav_negative = hav_of_distance(c.negative_min_m);

  // Open-ended negatives: uniform over the time window [lo, hi) of by_time, at least
  // negative_min_m away (the anchor itself, at distance 0, never qualifies). Rejection first;
  // exact enumeration when nearly every photo lies within negative_min_m.
  auto draw_far = [&](std::uint32_t lo, std::uint32_t hi, double la, double lo_rad, int k, AnchorRng& rng,
                      std::vector<std::pair<std::uint32_t, double>>& picks, std::vector<std::uint32_t>& pool) {
    const double cl = std::cos(la);
    const std::uint64_t n = hi - lo;
    k = static_cast<int>(bounded_k(k, n));
    if (n == 0 || k <= 0) return false;
    auto hav_to = [&](std::uint32_t i) {
      const auto& e = m.by_time[i];
      return haversine_term(la, lo_rad, cl, e.lat, e.lon, e.cos_lat);
    };
    auto taken = [&](std::uint32_t i) {
      return std::any_of(picks.begin(), picks.end(), [&](const auto& p) { return p.first == i; });
    };
    if (static_cast<std::uint64_t>(k) <= kRejectionMaxK) {
      const int attempts = 8 * k + 32;
      for (int t = 0; t < attempts && static_cast<int>(picks.size()) < k; ++t) {
        const auto i = static_cast<std::uint32_t>(lo + rng.below(n));
        const double h = hav_to(i);
        if (h >= hav_negative && !taken(i)) picks.emplace_back(i, h);
      }
      if (static_cast<int>(picks.size()) >= k) return false;
    }
    picks.clear();
    pool.clear();
    for (std::uint32_t i = lo; i < hi; ++i)
      if (hav_to(i) >= hav_negative) pool.push_back(i);
    const std::uint64_t avail = pool.size();
    const std::uint64_t want = bounded_k(k, avail);
    TakenSet chosen(want);
    for (std::uint64_t j = avail - want; j < avail; ++j) {
      const std::uint32_t i = pool[rng.below(j + 1)];
      const std::uint32_t pick = chosen.insert(i) ? i : pool[j];
      if (pick == pool[j]) chosen.insert(pool[j]);
      picks.emplace_back(pick, hav_to(pick));
    }
    return true;
  };

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
  auto fill = [&](Region& g, std::uint32_t u) {
    g.cand.clear();
    std::size_t j = 0;
    for (const auto& [t0, t1] : g.runs) {
      while (j < g.unsure.size() && g.unsure[j].first < t0) {
        g.cand.add_positions(m.groups.start[g.unsure[j].first], m.groups.start[g.unsure[j].second], true);
        ++j;
      }
      g.cand.add_positions(m.groups.start[t0], m.groups.start[t1]);
    }
    for (; j < g.unsure.size(); ++j)
      g.cand.add_positions(m.groups.start[g.unsure[j].first], m.groups.start[g.unsure[j].second], true);
    g.cand.finish();
    g.exact = g.unsure.empty();
    g.own_base = g.exact ? g.cand.rank_of(m.groups.start[u]) : UINT64_MAX;
  };
  auto prepare = [&](Region& g, std::uint32_t u, double r_min, double r_max) {
    g.r_min = r_min;
    g.r_max = r_max;
    g.h_min = r_min > 0 ? hav_of_distance(r_min) : -1.0;
    g.h_max = hav_of_distance(r_max);
    m.index->query_runs(m.groups.lat[u], m.groups.lon[u], r_min, r_max, g.runs, &g.unsure);
    std::uint64_t sure = 0, unsure = 0;
    for (const auto& [t0, t1] : g.runs) sure += m.groups.start[t1] - m.groups.start[t0];
    for (const auto& [t0, t1] : g.unsure) unsure += m.groups.start[t1] - m.groups.start[t0];
    if (unsure > 0 && static_cast<double>(unsure) > c.unsure_fraction * static_cast<double>(sure + unsure))
      m.index->resolve(m.groups.lat[u], m.groups.lon[u], r_min, r_max, g.runs, g.unsure);
    fill(g, u);
  };
  // Up to k distinct members other than `self` (a photo position of location u, or UINT32_MAX).
  auto draw_region = [&](Region& g, std::uint32_t u, std::uint32_t self, int k, AnchorRng& rng,
                         std::vector<std::uint32_t>& out) {
    k = static_cast<int>(bounded_k(k, g.cand.total()));
    if (!g.exact && static_cast<std::uint64_t>(k) > kRejectionMaxK) {
      m.index->resolve(m.groups.lat[u], m.groups.lon[u], g.r_min, g.r_max, g.runs, g.unsure);
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
        if (g.cand.ranges[r].unsure && !m.index->within(u, m.loc[e], g.h_min, g.h_max)) continue;
        out.push_back(e);
      }
      if (static_cast<int>(out.size() - first) >= k) return;
      // Too few accepted to tell whether more exist: settle the region exactly from here on.
      out.resize(first);
      m.index->resolve(m.groups.lat[u], m.groups.lon[u], g.r_min, g.r_max, g.runs, g.unsure);
      fill(g, u);
    }
    const std::uint64_t skip =
        self != UINT32_MAX && g.own_base != UINT64_MAX ? g.own_base + (self - m.groups.start[u]) : UINT64_MAX;
    draw_exact(g.cand, skip, k, rng, out);
  };

  // Pair rows drawn so far, by every thread; past c.max_rows the blocks stop drawing.
  std::atomic<std::uint64_t> drawn{0};
  auto over_budget = [&] { return c.max_rows > 0 && drawn.load(std::memory_order_relaxed) > c.max_rows; };

  auto sample_block = [&](std::size_t b, BlockOut& out) {
    Region pos_region, ring_region;
    std::vector<std::pair<std::uint32_t, std::uint32_t>> runs;
    std::vector<std::uint32_t> ball, chosen, pool;
    std::vector<std::pair<std::uint32_t, double>> far;  // open-ended negatives: (by_time slot, hav)
    Candidates pos, neg;
    for (std::uint32_t u = block_start[b]; u < block_start[b + 1]; ++u) {
      const std::uint32_t loc_begin = m.groups.start[u], loc_end = m.groups.start[u + 1];
      if (c.mode == PositiveMode::timelapse) {
        bool any = false;
        for (std::uint32_t p = loc_begin; p < loc_end && !any; ++p) any = m.seq_of[p] >= 0;
        if (!any) continue;
      }
      if (shared_positives) {
        prepare(pos_region, u, 0, c.positive_radius_m);
        if (pos_region.cand.total() <= 1) {  // only the location's single photo: no positives
          out.anchors += loc_end - loc_begin;
          continue;
        }
      } else if (c.mode == PositiveMode::radius) {
        m.index->query(m.groups.lat[u], m.groups.lon[u], 0, c.positive_radius_m, ball);
      }
      if (ring && !windowed) {
        prepare(ring_region, u, c.negative_min_m, c.negative_max_m);
      } else if (ring) {
        m.index->query_runs(m.groups.lat[u], m.groups.lon[u], c.negative_min_m, c.negative_max_m, runs);
      }

      for (std::uint32_t a = loc_begin; a < loc_end; ++a) {
        if (over_budget()) return;
        if (c.mode == PositiveMode::timelapse && m.seq_of[a] < 0) continue;
        ++out.anchors;
        AnchorRng rng(derive_seed(c.seed, static_cast<std::uint64_t>(m.id[a])));
        Window w;
        if (c.same_month) { const auto i = month_of(m.time[a]); w.clip(i.begin, i.end); }
        if (c.same_year) { const auto i = year_of(m.time[a]); w.clip(i.begin, i.end); }
        if (c.max_time_gap_s > 0) w.clip(m.time[a] - c.max_time_gap_s, m.time[a] + c.max_time_gap_s + 1);
        auto time_range = [&](std::uint32_t b0, std::uint32_t b1, Candidates& into) {
          // Positions in [b0, b1) are one location's photos, sorted by time.
          const auto lo = std::lower_bound(m.time.begin() + b0, m.time.begin() + b1, w.begin) - m.time.begin();
          const auto hi = std::lower_bound(m.time.begin() + lo, m.time.begin() + b1, w.end) - m.time.begin();
          into.add_positions(static_cast<std::uint32_t>(lo), static_cast<std::uint32_t>(hi));
        };

        chosen.clear();
        far.clear();
        if (shared_positives) {
          draw_region(pos_region, u, a, c.k_pos, rng, chosen);
        } else if (c.mode == PositiveMode::timelapse) {
          const std::int32_t s = m.seq_of[a];
          const std::uint32_t s0 = m.seq_start[s], s1 = m.seq_start[s + 1];
          Window fw = w;
          fw.clip(m.time[a] - c.timelapse_gap_s, m.time[a] + c.timelapse_gap_s + 1);
          auto t_of = [&](std::uint32_t i) { return m.time[m.seq_members[i]]; };
          std::uint32_t lo = s0, hi = s1;
          while (lo < s1 && t_of(lo) < fw.begin) ++lo;  // sequences are short; linear is fine
          while (hi > lo && t_of(hi - 1) >= fw.end) --hi;
          pos.clear();
          pos.ranges.push_back(Range{lo, hi, m.seq_members.data()});
          pos.finish();
          const std::uint32_t la = m.loc[a];
          draw_filtered(pos, a, c.k_pos, rng,
                        [&](std::uint32_t e) { return m.index->distance_m(la, m.loc[e]) <= c.positive_radius_m; },
                        chosen, pool);
        } else {
          pos.clear();
          for (std::uint32_t v : ball) {
            const std::uint32_t b0 = m.groups.start[v], b1 = m.groups.start[v + 1];
            if (c.positive_user == UserRule::same) {
              // by_user is sorted by (user, time) inside the location.
              auto first = m.by_user.begin() + b0, last = m.by_user.begin() + b1;
              const std::int32_t ua = m.user[a];
              auto lo = std::partition_point(first, last, [&](std::uint32_t e) {
                return m.user[e] < ua || (m.user[e] == ua && m.time[e] < w.begin);
              });
              auto hi = std::partition_point(lo, last, [&](std::uint32_t e) {
                return m.user[e] == ua && m.time[e] < w.end;
              });
              if (hi > lo)
                pos.ranges.push_back(Range{static_cast<std::uint32_t>(lo - m.by_user.begin()),
                                           static_cast<std::uint32_t>(hi - m.by_user.begin()), m.by_user.data(),
                                           m.by_user_inv.data()});
            } else {
              time_range(b0, b1, pos);
            }
          }
          pos.finish();
          if (c.positive_user == UserRule::different) {
            const std::int32_t ua = m.user[a];
            draw_filtered(pos, a, c.k_pos, rng, [&](std::uint32_t e) { return m.user[e] != ua; }, chosen, pool);
          } else {
            draw_exact(pos, pos.rank_of(a), c.k_pos, rng, chosen);
          }
        }
        if (chosen.empty()) continue;
        const std::size_t n_pos = chosen.size();

        bool fallback = false;
        if (ring) {
          if (windowed) {
            neg.clear();
            for (auto [t0, t1] : runs)
              for (std::uint32_t v = t0; v < t1; ++v) time_range(m.groups.start[v], m.groups.start[v + 1], neg);
            neg.finish();
          }
          if (windowed) draw_exact(neg, UINT64_MAX, c.k_neg, rng, chosen);
          else draw_region(ring_region, u, UINT32_MAX, c.k_neg, rng, chosen);
        } else {
          std::uint32_t lo = 0, hi = static_cast<std::uint32_t>(m.by_time.size());
          if (windowed) {
            lo = static_cast<std::uint32_t>(std::lower_bound(m.by_time_t.begin(), m.by_time_t.end(), w.begin) - m.by_time_t.begin());
            hi = static_cast<std::uint32_t>(std::lower_bound(m.by_time_t.begin() + lo, m.by_time_t.end(), w.end) - m.by_time_t.begin());
          }
          fallback = draw_far(lo, hi, m.groups.lat[m.loc[a]] * kDegToRad, m.groups.lon[m.loc[a]] * kDegToRad, c.k_neg,
                              rng, far, pool);
        }
        out.fallbacks += fallback;
        ++out.with_pos;
        out.pos += static_cast<std::int64_t>(n_pos);
        out.neg += static_cast<std::int64_t>(chosen.size() - n_pos + far.size());
        for (std::size_t i = 0; i < chosen.size(); ++i) {
          const std::uint32_t e = chosen[i];
          out.rows.anchor.push_back(m.id[a]);
          out.rows.other.push_back(m.id[e]);
          out.rows.label.push_back(i < n_pos ? 1 : 0);
          out.rows.distance_m.push_back(m.index->distance_m(m.loc[a], m.loc[e]));
        }
        for (const auto& [i, h] : far) {
          out.rows.anchor.push_back(m.id[a]);
          out.rows.other.push_back(m.by_time[i].id);
          out.rows.label.push_back(0);
          out.rows.distance_m.push_back(distance_of_hav(h));
        }
        drawn.fetch_add(chosen.size() + far.size(), std::memory_order_relaxed);
      }
    }
  };

  tbb::task_arena arena(c.threads > 0 ? c.threads : tbb::task_arena::automatic);
  const std::size_t wave = static_cast<std::size_t>(std::max(1, arena.max_concurrency())) * 4;
  for (std::size_t w0 = 0; w0 < n_blocks; w0 += wave) {
    if (stop && stop()) break;
    const std::size_t w1 = std::min(n_blocks, w0 + wave);
    std::vector<BlockOut> outs(w1 - w0);
    arena.execute([&] {
      tbb::parallel_for(w0, w1, [&](std::size_t b) { sample_block(b, outs[b - w0]); });
    });
    if (over_budget()) {
      // The waves before this one were handed to the sink whole; this one is dropped.
      std::int64_t anchors = stats_.anchors;
      for (const BlockOut& o : outs) anchors += o.anchors;
      throw DataError(cat("more than max_pairs = ", c.max_rows, " pair rows: ", drawn.load(), " drawn for the first ",
                          anchors, " of ", m.id.size(), " photos as anchors (k_pos = ", c.k_pos, ", k_neg = ", c.k_neg,
                          "); lower k_pos or k_neg, or raise max_pairs (rows are held in memory, 32 bytes each)"));
    }
    for (BlockOut& o : outs) {
      stats_.anchors += o.anchors;
      stats_.anchors_with_positive += o.with_pos;
      stats_.positives += o.pos;
      stats_.negatives += o.neg;
      stats_.negative_fallbacks += o.fallbacks;
      if (o.rows.size() > 0) sink(std::move(o.rows));
    }
  }
  stats_.sample_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace embedflow::geo
