// Human similarity judgements and how well an embedding agrees with them:
//   triplets  (query, positive, negative): the embedding agrees when d(q, pos) < d(q, neg).
//             Read from Wang et al.'s format (four lines per triplet: query text, query,
//             positive, negative; blank lines ignored) or a CSV of ids (query,positive,negative).
//   pairs     (a, b, similar 0/1): predicted similar when d(a, b) <= threshold; the threshold is
//             fixed or calibrated to maximise accuracy on validation pairs.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "distance.hpp"

namespace embedflow::evalcore {

struct Triplet {
  std::string query, positive, negative;
  int line = 0;  // where it starts in its file
};
struct Pair {
  std::string a, b;
  bool similar = false;
  int line = 0;
};

// Throw embedflow::DataError naming the file and line on malformed input, or a missing file.
std::vector<Triplet> read_wang_triplets(const std::string& path);
std::vector<Triplet> read_triplet_csv(const std::string& path);
std::vector<Pair> read_pair_csv(const std::string& path);

// The distance judgements use, in the measure's own units (euclidean is the plain L2 norm, not
// its square, so a fixed threshold means what it says); kernels give 1 - k(x, y), which is half
// the squared distance between x and y in the kernel's feature space.
double judgement_distance(const DistanceSpec& spec, const float* x, const float* y, std::int64_t dim);

// id -> row of `features` (rows x dim).
using IdIndex = std::unordered_map<std::string, std::int64_t>;
// Throws DataError when an id repeats.
IdIndex index_ids(const std::vector<std::string>& ids);

struct TripletScore {
  std::int64_t total = 0, evaluated = 0, agree = 0, ties = 0, missing = 0;
  std::string first_missing;  // an id not found, for the message
  double accuracy() const { return evaluated ? static_cast<double>(agree) / static_cast<double>(evaluated) : 0.0; }
};
TripletScore score_triplets(const std::vector<Triplet>& triplets, const IdIndex& ids, MatrixView features,
                            const DistanceSpec& spec);

struct PairDistances {
  std::vector<double> distance;  // score of each pair found
  std::vector<bool> similar;
  std::int64_t missing = 0;
  std::string first_missing;
};
PairDistances pair_distances(const std::vector<Pair>& pairs, const IdIndex& ids, MatrixView features,
                             const DistanceSpec& spec);

// Threshold maximising accuracy of "similar iff distance <= t" (midpoint between neighbouring
// distances; ties in accuracy go to the smaller threshold).
double calibrate_threshold(const PairDistances& p);

struct PairScore {
  std::int64_t n = 0, tp = 0, tn = 0, fp = 0, fn = 0;
  double accuracy() const { return n ? static_cast<double>(tp + tn) / static_cast<double>(n) : 0.0; }
};
PairScore score_pairs(const PairDistances& p, double threshold);

}  // namespace embedflow::evalcore
