// PairSampler's two phases live beside it: pair_index.cpp builds the index once per photo set,
// anchor_sampling.cpp draws each anchor's partners; this file checks the settings and runs the
// blocks in waves on the sampler's own thread arena.
#include "pair_sampler.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include "anchor_sampling.hpp"
#include "embedflow/error.hpp"
#include "pair_index.hpp"

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

void check_config(const SamplerConfig& c) {
  if (c.positive_radius_m < 0) throw ConfigError(cat("positive_radius_m ", c.positive_radius_m, " must be >= 0"));
  if (c.negative_max_m > 0 && c.negative_max_m < c.negative_min_m)
    throw ConfigError(cat("negative_max_m ", c.negative_max_m, " is below negative_min_m ", c.negative_min_m));
  if (c.negative_min_m <= c.positive_radius_m)
    throw ConfigError(cat("negative_min_m ", c.negative_min_m, " must exceed positive_radius_m ", c.positive_radius_m,
                          ", or a photo could be both a positive and a negative"));
}

// The locations [u_begin, u_end) whose anchors are `place`'s share: those whose first photo
// position lies in rank_rows(photos, place). Locations are whole (a ball query serves all its
// photos), contiguous (the ranks' outputs concatenate to the unsharded order), and each belongs
// to exactly one rank, since every location starts at one position.
std::pair<std::uint32_t, std::uint32_t> rank_locations(const LocationGroups& groups, const ParallelPlace& place) {
  const std::size_t U = groups.size();
  const RowRange mine = rank_rows(static_cast<std::int64_t>(groups.start[U]), place);
  auto first_at = [&](std::int64_t position) {
    return static_cast<std::uint32_t>(
        std::lower_bound(groups.start.begin(), groups.start.begin() + static_cast<std::ptrdiff_t>(U), position) -
        groups.start.begin());
  };
  return {first_at(mine.first), first_at(mine.last)};
}

// Blocks of whole locations in [u_begin, u_end) holding about block_anchors photos each, so each
// ball query is shared by the location's photos: block b is locations [start[b], start[b + 1]).
std::vector<std::uint32_t> location_blocks(const LocationGroups& groups, std::uint32_t u_begin, std::uint32_t u_end,
                                           std::size_t block_anchors) {
  std::vector<std::uint32_t> block_start{u_begin};
  std::size_t acc = 0;
  for (std::uint32_t u = u_begin; u < u_end; ++u) {
    acc += groups.count(u);
    if (acc >= block_anchors) { block_start.push_back(u + 1); acc = 0; }
  }
  if (block_start.back() != u_end) block_start.push_back(u_end);
  return block_start;
}

}  // namespace

struct PairSampler::Impl : SamplerIndex {};

PairSampler::PairSampler(const PhotoSet& photos, SamplerConfig config)
    : impl_(std::make_unique<Impl>()), config_(std::move(config)) {
  const auto t0 = std::chrono::steady_clock::now();
  check_config(config_);
  // The place comes resolved from the node; a hand-built one is checked here all the same.
  config_.place = resolve_parallel_place(config_.place.world_size, config_.place.rank);
  const std::size_t n = photos.size();
  if (photos.lat.size() != n || photos.lon.size() != n || photos.time.size() != n || photos.user.size() != n)
    throw ConfigError("PairSampler: photo columns differ in length");
  stats_.input = static_cast<std::int64_t>(n);
  tbb::task_arena arena(config_.threads > 0 ? config_.threads : tbb::task_arena::automatic);
  arena.execute([&] { build_pair_index(photos, config_, *impl_, stats_); });
  stats_.build_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

PairSampler::~PairSampler() = default;

void PairSampler::run(const std::function<void(PairRows&&)>& sink, const std::function<bool()>& stop) {
  const auto t0 = std::chrono::steady_clock::now();
  const SamplerConfig& c = config_;
  const SamplerIndex& m = *impl_;
  const auto [u_begin, u_end] = rank_locations(m.groups, c.place);
  const std::vector<std::uint32_t> block_start = location_blocks(m.groups, u_begin, u_end, c.block_anchors);
  const std::size_t n_blocks = block_start.size() - 1;
  // Pair rows drawn so far, by every thread; past c.max_rows the blocks stop drawing.
  std::atomic<std::uint64_t> drawn{0};
  auto over_budget = [&] { return c.max_rows > 0 && drawn.load(std::memory_order_relaxed) > c.max_rows; };

  tbb::task_arena arena(c.threads > 0 ? c.threads : tbb::task_arena::automatic);
  const std::size_t wave = static_cast<std::size_t>(std::max(1, arena.max_concurrency())) * 4;
  for (std::size_t w0 = 0; w0 < n_blocks; w0 += wave) {
    if (stop && stop()) break;
    const std::size_t w1 = std::min(n_blocks, w0 + wave);
    std::vector<BlockOut> outs(w1 - w0);
    arena.execute([&] {
      tbb::parallel_for(w0, w1, [&](std::size_t b) {
        sample_location_block(c, m, block_start[b], block_start[b + 1], drawn, outs[b - w0]);
      });
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
