// Train/test splits of crowd annotations and the pair labels they expand to.
//
// Splits are a function of the annotation ids, `seed` and the fractions only, never of file
// order or of a node's seed, so two readers (train and test) given the same split parameters get
// complementary halves. Grids (or workers) are ranked by a hash of (seed, id); the first
// round(test_fraction * count) are the test set. train_fraction keeps the first part of a second
// ranking of the train grids, so smaller fractions keep subsets of larger ones (nested learning
// curves).
#pragma once

#include <cstdint>
#include <vector>

#include "core/annotations.hpp"

namespace embedflow::crowd {

enum class SplitPart { all, train, test };
enum class SplitBy { grid, worker };

struct SplitOptions {
  SplitPart part = SplitPart::all;
  SplitBy by = SplitBy::grid;
  double test_fraction = 0.15;
  double train_fraction = 1.0;  // of the train split's grids; the other parts ignore it
  std::uint64_t seed = 0;
};

struct SplitResult {
  std::vector<std::size_t> selected;  // annotation indices, in file order
  std::int64_t grids = 0, workers = 0;            // distinct, whole file
  std::int64_t test_grids = 0, train_grids = 0;   // grids in each part (train before train_fraction)
  std::int64_t test_workers = 0;                  // split_by worker: workers held out
  std::int64_t kept_train_grids = 0;              // after train_fraction
  std::int64_t dropped = 0;  // split_by worker: annotations by train workers on test grids (in neither part)
};

// split_by grid: the test part holds every annotation of the test grids; train the others.
// split_by worker: the test part holds every annotation by the test workers; train holds the
// other workers' annotations on grids no test worker saw, so test grids stay unseen.
// With a fraction > 0 and at least two grids (workers), each part gets at least one.
SplitResult split_annotations(const AnnotationSet& set, const SplitOptions& options);

// One pair label: positions p < q in annotation `annotation`'s image list.
struct PairRef {
  std::uint32_t annotation;
  std::uint16_t p, q;
};

// All pairs of the selected annotations, annotation by annotation, p < q in listed order,
// skipping pairs with an unassigned image: (S^2 - S) / 2 per fully assigned grid.
// Throws ConfigError above 65536 images per grid or 2^32 annotations.
std::vector<PairRef> expand_pairs(const AnnotationSet& set, const std::vector<std::size_t>& selected);

inline bool same_cluster(const Annotation& a, const PairRef& r) { return a.clusters[r.p] == a.clusters[r.q]; }

}  // namespace embedflow::crowd
