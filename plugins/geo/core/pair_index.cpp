#include "pair_index.hpp"

#include <embedflow/file_kind.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>

#include <tbb/parallel_for.h>
#include <tbb/parallel_sort.h>

#include "embedflow/error.hpp"
#include "embedflow/rng.hpp"
#include "geodesy.hpp"

namespace embedflow::geo {
namespace {

// Sort keys by value, not indices into the columns: the comparisons then stay in cache.
struct Key {
  double lat, lon;
  std::int64_t time;
  std::int32_t user;
  std::uint32_t idx;
};

bool same_place(const Key& a, const Key& b) { return a.lat == b.lat && a.lon == b.lon; }

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

std::vector<Key> keys_in_window(const PhotoSet& photos, const SamplerConfig& c, SamplerStats& stats) {
  std::vector<Key> keys;
  keys.reserve(photos.size());
  for (std::size_t i = 0; i < photos.size(); ++i) {
    if (photos.time[i] >= c.date_from && photos.time[i] < c.date_to)
      keys.push_back({photos.lat[i], photos.lon[i], photos.time[i], photos.user[i], static_cast<std::uint32_t>(i)});
    else
      ++stats.outside_dates;
  }
  return keys;
}

// A photo id twice would pair the photo with itself (a positive at 0 m): refused, whatever
// built the photo stream (the CSV readers already refuse it with the file's lines).
void refuse_repeated_ids(const PhotoSet& photos, const std::vector<Key>& keys) {
  std::vector<std::pair<std::int64_t, std::uint32_t>> by_id(keys.size());
  for (std::size_t r = 0; r < keys.size(); ++r) by_id[r] = {photos.id[keys[r].idx], keys[r].idx};
  tbb::parallel_sort(by_id.begin(), by_id.end());
  for (std::size_t r = 1; r < by_id.size(); ++r)
    if (by_id[r].first == by_id[r - 1].first)
      throw DataError(cat("photo id ", by_id[r].first, " appears twice among the photos (rows ", by_id[r - 1].second,
                          " and ", by_id[r].second, " of the photo stream, counted from 0 within the date window); "
                          "a photo would be paired with itself"));
}

// Duplicates: a burst of the same shot uploaded twice, or re-posted frames. `keys` are sorted by
// (place, user, time).
void drop_repeated_shots(std::vector<Key>& keys, const SamplerConfig& c, SamplerStats& stats) {
  std::size_t w = 0;
  std::int64_t last_time = 0;
  for (std::size_t r = 0; r < keys.size(); ++r) {
    const Key& k = keys[r];
    if (w > 0 && same_place(k, keys[w - 1]) && k.user == keys[w - 1].user && k.time - last_time <= c.duplicate_time_s) {
      ++stats.duplicates;
      continue;
    }
    last_time = k.time;
    keys[w++] = k;
  }
  keys.resize(w);
}

// Identical image files: the earliest row of each stays.
void drop_repeated_files(std::vector<Key>& keys, const PhotoSet& photos, const SamplerConfig& c, SamplerStats& stats) {
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
  std::vector<char> drop(photos.size(), 0);
  for (std::size_t i = 1; i < order.size(); ++i)
    if (hashes[order[i]] == hashes[order[i - 1]]) drop[with_path[order[i]]] = 1;
  std::size_t w = 0;
  for (const Key& k : keys) {
    if (drop[k.idx]) { ++stats.duplicate_files; continue; }
    keys[w++] = k;
  }
  keys.resize(w);
}

// The kept photos, date-windowed, deduplicated and sorted by (place, user, time).
std::vector<Key> kept_keys(const PhotoSet& photos, const SamplerConfig& c, SamplerStats& stats) {
  std::vector<Key> keys = keys_in_window(photos, c, stats);
  refuse_repeated_ids(photos, keys);
  tbb::parallel_sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
    if (a.lat != b.lat) return a.lat < b.lat;
    if (a.lon != b.lon) return a.lon < b.lon;
    if (a.user != b.user) return a.user < b.user;
    if (a.time != b.time) return a.time < b.time;
    return a.idx < b.idx;
  });
  if (c.duplicate_time_s >= 0) drop_repeated_shots(keys, c, stats);
  if (c.duplicate_files && !photos.path.empty()) drop_repeated_files(keys, photos, c, stats);
  stats.kept = static_cast<std::int64_t>(keys.size());
  return keys;
}

// Groups the keys by location (time order within one), builds the KD-tree over the locations and
// renumbers them in the tree's order, so a subtree is a contiguous run of photos. Consumes `keys`.
void group_locations(std::vector<Key>& keys, SamplerIndex& m) {
  LocationGroups by_coords;
  for (std::size_t r = 0; r < keys.size(); ++r)
    if (r == 0 || !same_place(keys[r], keys[r - 1])) {
      by_coords.lat.push_back(keys[r].lat);
      by_coords.lon.push_back(keys[r].lon);
      by_coords.start.push_back(static_cast<std::uint32_t>(r));
    }
  by_coords.start.push_back(static_cast<std::uint32_t>(keys.size()));
  tbb::parallel_for(std::size_t(0), by_coords.size(), [&](std::size_t u) {
    std::sort(keys.begin() + by_coords.start[u], keys.begin() + by_coords.start[u + 1], [](const Key& a, const Key& b) {
      return a.time != b.time ? a.time < b.time : a.idx < b.idx;
    });
  });
  by_coords.order.resize(keys.size());
  for (std::size_t r = 0; r < keys.size(); ++r) by_coords.order[r] = keys[r].idx;
  std::vector<Key>().swap(keys);
  m.index = std::make_unique<LocationIndex>(by_coords.lat, by_coords.lon);
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

// The columns by position; the input indices are not needed past here.
void gather_columns(const PhotoSet& photos, SamplerIndex& m) {
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
  std::vector<std::uint32_t>().swap(m.groups.order);
}

// Positions by (user, time, position).
struct UserTimeOrder {
  const SamplerIndex& m;
  bool operator()(std::uint32_t a, std::uint32_t b) const {
    if (m.user[a] != m.user[b]) return m.user[a] < m.user[b];
    if (m.time[a] != m.time[b]) return m.time[a] < m.time[b];
    return a < b;
  }
};

// The (user, time) order inside each location; it serves same-user positives only.
void order_by_user(SamplerIndex& m) {
  const std::size_t N = m.time.size();
  m.by_user.resize(N);
  std::iota(m.by_user.begin(), m.by_user.end(), 0u);
  tbb::parallel_for(std::size_t(0), m.groups.size(), [&](std::size_t u) {
    std::sort(m.by_user.begin() + m.groups.start[u], m.by_user.begin() + m.groups.start[u + 1], UserTimeOrder{m});
  });
  m.by_user_inv.resize(N);
  for (std::size_t i = 0; i < N; ++i) m.by_user_inv[m.by_user[i]] = static_cast<std::uint32_t>(i);
}

void order_by_time(SamplerIndex& m) {
  const std::size_t N = m.time.size();
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

// A time-lapse sequence: one user's frames, consecutive ones at most timelapse_gap_s apart and
// within positive_radius_m, at least timelapse_min_frames long.
void find_timelapse_sequences(const SamplerConfig& c, SamplerIndex& m, SamplerStats& stats) {
  const std::size_t N = m.time.size();
  std::vector<std::uint32_t> seq(N);
  std::iota(seq.begin(), seq.end(), 0u);
  tbb::parallel_sort(seq.begin(), seq.end(), UserTimeOrder{m});
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
  stats.timelapse_sequences = static_cast<std::int64_t>(m.seq_start.size() - 1);
  stats.timelapse_frames = static_cast<std::int64_t>(m.seq_members.size());
}

}  // namespace

void build_pair_index(const PhotoSet& photos, const SamplerConfig& c, SamplerIndex& m, SamplerStats& stats) {
  std::vector<Key> keys = kept_keys(photos, c, stats);
  group_locations(keys, m);
  stats.unique_locations = static_cast<std::int64_t>(m.groups.size());
  gather_columns(photos, m);
  if (c.positive_user == UserRule::same) order_by_user(m);
  order_by_time(m);
  if (c.mode == PositiveMode::timelapse) find_timelapse_sequences(c, m, stats);
}

}  // namespace embedflow::geo
