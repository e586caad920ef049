// Mining on a label batch as pytorch-metric-learning (PML) defines it (docs/torch.md, "Miners"):
// the pair relations of a batch's labels, PML's distances and reducers, the indices tuple a miner
// returns and its conversions, and the two interfaces that meet there: Miner (components of kind
// "miner") and LabelBatchLoss (the losses that take a `miner:`, and that torch.cross_batch_memory
// wraps). Includes LibTorch.
//
// An indices tuple holds pairs (a1, p, a2, n: positive pairs (a1[k], p[k]), negative pairs
// (a2[k], n[k])) or triplets (a, p, n). Anchors index the query rows (the batch); positives and
// negatives index the reference rows (the batch itself, or a cross-batch memory).
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "label_batch.hpp"

namespace embedflow::torchfam {

// Pair relations (label_batch.hpp) of n query rows against m reference rows (a memory's):
// equal labels are positive, the rest negative, unlabelled rows in neither; no diagonal is
// removed (the rows are different sets).
LabelMasks label_masks_against(const torch::Tensor& labels, const torch::Tensor& ref_labels);

// PML's distances: "euclidean" is LpDistance(p=2) (torch.cdist, as PML calls it), "cosine" is
// CosineSimilarity (dot products of L2-normalised rows: an inverted distance, larger is closer).
// Both normalise the rows first unless normalize_embeddings is false (cosine always does), and
// raise the matrix to `power`.
class MiningDistance {
 public:
  explicit MiningDistance(const Params& p);
  bool inverted() const { return cosine_; }
  torch::Tensor matrix(const torch::Tensor& query, const torch::Tensor& reference) const;
  // How far x is past y in the closer direction: x - y, or y - x for a similarity.
  torch::Tensor margin(const torch::Tensor& x, const torch::Tensor& y) const { return cosine_ ? y - x : x - y; }
  torch::Tensor margin(const torch::Tensor& x, double y) const { return cosine_ ? y - x : x - y; }
  torch::Tensor margin(double x, const torch::Tensor& y) const { return cosine_ ? y - x : x - y; }
  // The closer of two distances elementwise.
  torch::Tensor smallest(const torch::Tensor& x, const torch::Tensor& y) const {
    return cosine_ ? torch::max(x, y) : torch::min(x, y);
  }

 private:
  bool cosine_ = false, normalize_ = true;
  double power_ = 1;
};

// The parameters MiningDistance reads: distance (default `default_distance`),
// normalize_embeddings, power.
std::vector<ParamSpec> distance_params(const char* default_distance);
// Load-time check of those parameters: cosine with normalize_embeddings false is an error.
void check_distance(ContractContext& c);

struct IndicesTuple {
  bool triplets = false;
  torch::Tensor a1, p, a2, n;  // triplets: a1 holds the anchors, a2 is unset

  std::int64_t size(const torch::Tensor& t) const { return t.defined() ? t.size(0) : 0; }
};

// Every positive and every negative pair, row-major (PML's get_all_pairs_indices).
IndicesTuple all_pairs(const LabelMasks& m);
// Every (anchor, positive, negative), row-major over [anchor, positive, negative] (PML's
// get_all_triplets_indices).
IndicesTuple all_triplets(const LabelMasks& m);
// PML's convert_to_pairs: triplets (a, p, n) become pairs (a, p, a, n).
IndicesTuple as_pairs(const IndicesTuple& t);
// PML's convert_to_triplets: pairs become every (a, p, n) whose positive pair and negative pair
// share the anchor, ordered by positive pair, then negative pair.
IndicesTuple as_triplets(const IndicesTuple& t);
// The tuple without the pairs or triplets whose positive is the anchor's own row of the
// reference: `slots` [n] is the reference row each query row was written to (PML's
// remove_self_comparisons for a cross-batch memory).
IndicesTuple without_self_pairs(const IndicesTuple& t, const torch::Tensor& slots);

// PML's reducers of per-pair or per-triplet terms: AvgNonZeroReducer (the mean of the terms
// above 0), MeanReducer, SumReducer. No term (or, for avg_non_zero, no term above 0) reduces
// to 0 with the embeddings' graph (PML's zero_loss: sum(embeddings * 0)).
enum class Reduction { avg_non_zero, mean, sum };
ParamSpec reducer_param();
Reduction reduction_of(const Params& p);
torch::Tensor reduce(const torch::Tensor& terms, Reduction r, const torch::Tensor& embeddings);

// What a miner and a label-batch loss compute on: the batch's embeddings (the query rows, with
// their autograd graph), the reference rows they are compared with (the same tensor, or a
// memory of detached embeddings) and the relations between the two.
struct MiningInput {
  torch::Tensor query;
  torch::Tensor reference;
  LabelMasks relation;
};

class Miner : public Component {
 public:
  ~Miner() override;
  // The indices tuple of `in`, computed without gradients (as PML's BaseMiner.forward).
  IndicesTuple mine(const MiningInput& in);

 protected:
  virtual IndicesTuple mine_indices(const MiningInput& in) = 0;
};

// A loss over the pairs or triplets of a label batch (image with label or pair_labels), PML's
// BaseMetricLossFunction: by default over every pair or triplet of the batch, or over those its
// `miner` returns; torch.cross_batch_memory calls compute_tuple with a memory as the reference.
class LabelBatchLoss : public Loss {
 public:
  // Reads the optional `miner` component, the distance parameters and `reducer`. `name` and
  // `pairs`: how the loss takes a pair batch (label_batch.hpp), named in its errors.
  LabelBatchLoss(const ComponentContext& c, std::string name, PairBatches pairs);
  ~LabelBatchLoss() override;
  // Over the miner's tuple, or a pair batch's explicit pairs (label_batch.hpp; with a miner, it
  // mines among those pairs), or the loss's default tuple.
  torch::Tensor compute(StepInputs& in) override;
  // The loss of `in` over `mined`, or over the loss's own default tuple (every pair or triplet
  // of in.relation) when it is null.
  virtual torch::Tensor compute_tuple(const MiningInput& in, const IndicesTuple* mined) = 0;
  // A loss whose terms index reference rows as query rows (a triplet loss's swap) needs the
  // batch as its own reference.
  virtual bool needs_batch_reference() const { return false; }
  bool has_miner() const { return miner_ != nullptr; }

 protected:
  std::unique_ptr<Miner> miner_;
  std::string name_;
  PairBatches pairs_;
  MiningDistance distance_;
  Reduction reduction_;
};

// The declaration every label-batch loss that takes a miner shares: what it reads (image with label or
// pair_labels, the image embeddings, and a `reference` when torch.cross_batch_memory drives it),
// the optional `miner`, the distance parameters (default euclidean) and `reducer`.
ComponentTypeBuilder label_batch_loss_with_miner(const std::string& name, PairBatches pairs = PairBatches::no);

// The declaration every miner shares: the image embeddings it reads, the tuple kind it
// produces (pairs: a1, p, a2, n; triplets: a, p, n, as i64 index fields) and the distance
// parameters.
ComponentTypeBuilder miner_type(const std::string& name, bool triplets, const char* default_distance);

}  // namespace embedflow::torchfam
