#include "core/split.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include <embedflow/error.hpp>
#include <embedflow/rng.hpp>

namespace embedflow::crowd {

namespace {

// Distinct values ordered by hash(seed, value) (ties, which need a 64-bit collision, by value).
std::vector<std::int64_t> ranked(std::vector<std::int64_t> values, std::uint64_t seed) {
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  std::vector<std::pair<std::uint64_t, std::int64_t>> keyed;
  keyed.reserve(values.size());
  for (std::int64_t v : values) keyed.emplace_back(derive_seed(seed, static_cast<std::uint64_t>(v)), v);
  std::sort(keyed.begin(), keyed.end());
  for (std::size_t i = 0; i < keyed.size(); ++i) values[i] = keyed[i].second;
  return values;
}

// How many of n go to a part of fraction f: rounded, but never empty nor everything when both
// parts can be non-empty (a 0.15 test split of 4 grids still tests on one).
std::size_t part_size(double f, std::size_t n) {
  if (f <= 0 || n == 0) return 0;
  if (f >= 1) return n;
  auto k = static_cast<std::size_t>(std::llround(f * static_cast<double>(n)));
  if (n >= 2) k = std::clamp<std::size_t>(k, 1, n - 1);
  return k;
}

// Separate hash streams for the test ranking, the worker ranking and the train_fraction ranking.
constexpr std::uint64_t kTestGrids = 0x7465737467726964ULL;    // "testgrid"
constexpr std::uint64_t kTestWorkers = 0x7465737477726b72ULL;  // "testwrkr"
constexpr std::uint64_t kTrainKeep = 0x747261696e6b6570ULL;    // "trainkep"

}  // namespace

SplitResult split_annotations(const AnnotationSet& set, const SplitOptions& o) {
  SplitResult r;
  const auto& anns = set.annotations;
  std::vector<std::int64_t> grid_ids, worker_ids;
  for (const Annotation& a : anns) {
    grid_ids.push_back(a.grid);
    worker_ids.push_back(a.worker);
  }
  const std::vector<std::int64_t> grids = ranked(grid_ids, derive_seed(o.seed, kTestGrids));
  const std::vector<std::int64_t> workers = ranked(worker_ids, derive_seed(o.seed, kTestWorkers));
  r.grids = static_cast<std::int64_t>(grids.size());
  r.workers = static_cast<std::int64_t>(workers.size());

  // Per annotation: 0 train, 1 test, 2 neither.
  std::vector<int> part(anns.size(), 0);
  std::unordered_set<std::int64_t> test_grids;
  if (o.by == SplitBy::grid) {
    test_grids.insert(grids.begin(), grids.begin() + static_cast<std::ptrdiff_t>(part_size(o.test_fraction, grids.size())));
    for (std::size_t i = 0; i < anns.size(); ++i) part[i] = test_grids.count(anns[i].grid) ? 1 : 0;
  } else {
    const std::size_t k = part_size(o.test_fraction, workers.size());
    const std::unordered_set<std::int64_t> test_workers(workers.begin(), workers.begin() + static_cast<std::ptrdiff_t>(k));
    r.test_workers = static_cast<std::int64_t>(k);
    for (std::size_t i = 0; i < anns.size(); ++i)
      if (test_workers.count(anns[i].worker)) {
        part[i] = 1;
        test_grids.insert(anns[i].grid);
      }
    for (std::size_t i = 0; i < anns.size(); ++i)
      if (part[i] == 0 && test_grids.count(anns[i].grid)) {
        part[i] = 2;
        ++r.dropped;
      }
  }
  r.test_grids = static_cast<std::int64_t>(test_grids.size());
  std::vector<std::int64_t> train_grid_ids;
  for (std::size_t i = 0; i < anns.size(); ++i)
    if (part[i] == 0) train_grid_ids.push_back(anns[i].grid);
  const std::vector<std::int64_t> train_grids = ranked(train_grid_ids, derive_seed(o.seed, kTrainKeep));
  r.train_grids = static_cast<std::int64_t>(train_grids.size());
  const std::size_t keep = o.train_fraction >= 1 ? train_grids.size() : std::max<std::size_t>(part_size(o.train_fraction, train_grids.size()), train_grids.empty() ? 0 : 1);
  const std::unordered_set<std::int64_t> kept(train_grids.begin(), train_grids.begin() + static_cast<std::ptrdiff_t>(keep));
  r.kept_train_grids = static_cast<std::int64_t>(keep);

  for (std::size_t i = 0; i < anns.size(); ++i) {
    const bool take = o.part == SplitPart::all ||
                      (o.part == SplitPart::test && part[i] == 1) ||
                      (o.part == SplitPart::train && part[i] == 0 && kept.count(anns[i].grid));
    if (take) r.selected.push_back(i);
  }
  return r;
}

std::vector<PairRef> expand_pairs(const AnnotationSet& set, const std::vector<std::size_t>& selected) {
  if (set.grid_size > 65536) throw ConfigError(cat(set.file, ": grids of ", set.grid_size, " images; at most 65536 are supported"));
  if (set.annotations.size() > 0xffffffffULL) throw ConfigError(cat(set.file, ": more than 2^32 annotations"));
  std::vector<PairRef> out;
  const auto s = static_cast<std::size_t>(set.grid_size);
  out.reserve(selected.size() * (s * (s - 1) / 2));
  for (std::size_t a : selected) {
    const Annotation& ann = set.annotations[a];
    for (std::size_t p = 0; p < ann.images.size(); ++p) {
      if (ann.clusters[p] < 0) continue;
      for (std::size_t q = p + 1; q < ann.images.size(); ++q)
        if (ann.clusters[q] >= 0)
          out.push_back(PairRef{static_cast<std::uint32_t>(a), static_cast<std::uint16_t>(p), static_cast<std::uint16_t>(q)});
    }
  }
  return out;
}

}  // namespace embedflow::crowd
