// Label relations, PML's distances, indices tuples and reducers, and the Miner and
// LabelBatchLoss bases (mining.hpp).
#include "mining.hpp"
#include "pml_formulas.hpp"

namespace embedflow::torchfam {

LabelMasks label_masks_against(const torch::Tensor& labels, const torch::Tensor& ref_labels) {
  torch::Tensor both = (labels >= 0).unsqueeze(1) & (ref_labels >= 0).unsqueeze(0);
  torch::Tensor same = labels.unsqueeze(1) == ref_labels.unsqueeze(0);
  return {same & both, ~same & both, labels >= 0};
}

MiningDistance::MiningDistance(const Params& p)
    : cosine_(p.string("distance") == "cosine"), normalize_(p.boolean("normalize_embeddings")), power_(p.number("power")) {}

torch::Tensor MiningDistance::matrix(const torch::Tensor& query, const torch::Tensor& reference) const {
  // PML's LpDistance calls torch.cdist with its default compute mode (the matrix-product
  // shortcut above 25 rows), so the distances, and what is mined from them, agree bit for bit.
  torch::Tensor mat = cosine_      ? cosine_matrix(query, reference)
                      : normalize_ ? unit_l2_matrix(query, reference)
                                   : torch::cdist(query, reference, 2.0);
  return power_ != 1 ? mat.pow(power_) : mat;
}

std::vector<ParamSpec> distance_params(const char* default_distance) {
  return {Param::choice("distance", {"euclidean", "cosine"}).default_value(default_distance).doc(
              "euclidean: PML's LpDistance(p=2); cosine: PML's CosineSimilarity (a similarity: larger is closer)"),
          Param::boolean("normalize_embeddings").default_value(true).doc(
              "L2-normalise the embeddings before the distance (PML's default; cosine always does)"),
          Param::number("power").default_value(1.0).doc("raise the distance matrix to this power (PML's `power`)")};
}

void check_distance(ContractContext& c) {
  if (c.params().string("distance") == "cosine" && !c.params().boolean("normalize_embeddings"))
    c.error("distance cosine always normalises the embeddings (PML's CosineSimilarity); normalize_embeddings: false "
            "asks for a plain dot product, which is not offered");
}

namespace {

torch::Tensor empty_index(const torch::Tensor& like) {
  return torch::empty({0}, torch::TensorOptions().dtype(torch::kLong).device(like.device()));
}

}  // namespace

IndicesTuple all_pairs(const LabelMasks& m) {
  torch::Tensor pos = m.positive.nonzero(), neg = m.negative.nonzero();
  return {false, pos.select(1, 0), pos.select(1, 1), neg.select(1, 0), neg.select(1, 1)};
}

IndicesTuple all_triplets(const LabelMasks& m) {
  torch::Tensor t = (m.positive.unsqueeze(2) & m.negative.unsqueeze(1)).nonzero();
  return {true, t.select(1, 0), t.select(1, 1), torch::Tensor(), t.select(1, 2)};
}

IndicesTuple as_pairs(const IndicesTuple& t) {
  if (!t.triplets) return t;
  return {false, t.a1, t.p, t.a1, t.n};
}

IndicesTuple as_triplets(const IndicesTuple& t) {
  if (t.triplets) return t;
  if (t.size(t.a1) == 0 || t.size(t.a2) == 0) return {true, empty_index(t.a1), empty_index(t.a1), torch::Tensor(), empty_index(t.a1)};
  torch::Tensor shared = (t.a1.unsqueeze(1) == t.a2.unsqueeze(0)).nonzero();
  torch::Tensor pos = shared.select(1, 0), neg = shared.select(1, 1);
  return {true, t.a1.index({pos}), t.p.index({pos}), torch::Tensor(), t.n.index({neg})};
}

IndicesTuple without_self_pairs(const IndicesTuple& t, const torch::Tensor& slots) {
  torch::Tensor keep = t.p != slots.index({t.a1});
  IndicesTuple out = t;
  out.a1 = t.a1.masked_select(keep);
  out.p = t.p.masked_select(keep);
  if (t.triplets) out.n = t.n.masked_select(keep);
  return out;
}

ParamSpec reducer_param() {
  return Param::choice("reducer", {"avg_non_zero", "mean", "sum"}).default_value("avg_non_zero").doc(
      "how terms become the loss: avg_non_zero, the mean of the terms above 0 (PML's AvgNonZeroReducer, its "
      "default here); mean (MeanReducer); sum (SumReducer)");
}

Reduction reduction_of(const Params& p) {
  const std::string& r = p.string("reducer");
  return r == "mean" ? Reduction::mean : r == "sum" ? Reduction::sum : Reduction::avg_non_zero;
}

torch::Tensor reduce(const torch::Tensor& terms, Reduction r, const torch::Tensor& embeddings) {
  torch::Tensor kept = r == Reduction::avg_non_zero ? terms.masked_select(terms > 0) : terms;
  if (kept.numel() == 0) return (embeddings * 0).sum();
  return r == Reduction::sum ? kept.sum() : kept.mean();
}

Miner::~Miner() = default;

IndicesTuple Miner::mine(const MiningInput& in) {
  torch::NoGradGuard no_grad;
  return mine_indices({in.query.detach(), in.reference.detach(), in.relation});
}

LabelBatchLoss::LabelBatchLoss(const ComponentContext& c, std::string name, PairBatches pairs)
    : miner_(c.params().has("miner") ? c.component<Miner>("miner") : nullptr), name_(std::move(name)), pairs_(pairs),
      distance_(c.params()),
      reduction_(reduction_of(c.params())) {}

LabelBatchLoss::~LabelBatchLoss() = default;

torch::Tensor LabelBatchLoss::compute(StepInputs& in) {
  LabelView v = label_view(in, name_, pairs_);
  MiningInput batch{v.x, v.x, v.m};
  if (miner_) {
    const IndicesTuple mined = miner_->mine(batch);
    return compute_tuple(batch, &mined);
  }
  if (v.pairs) {
    // PML's loss(embeddings, indices_tuple=...): the pair batch's explicit pairs, in their order.
    const IndicesTuple explicit_pairs{false, v.pairs->a1, v.pairs->p, v.pairs->a2, v.pairs->n};
    return compute_tuple(batch, &explicit_pairs);
  }
  return compute_tuple(batch, nullptr);
}

ComponentTypeBuilder label_batch_loss_with_miner(const std::string& name, PairBatches pairs) {
  ComponentTypeBuilder b = label_batch_loss(name, pairs);
  // What torch.cross_batch_memory feeds a loss it wraps; a loss used alone is not fed it.
  b.consumes("reference", "embedding: f32[M,D], label: i64[M]")
      .param(Param::component("miner", "miner").optional().doc(
          "a miner (torch.batch_hard_miner, torch.triplet_margin_miner, ...): the loss runs over the pairs or "
          "triplets it returns; unset: over every pair or triplet of the batch"))
      .params(distance_params("euclidean"))
      .param(reducer_param())
      .check([](ContractContext& c) {
        check_distance(c);
        c.part("miner");
      });
  return b;
}

ComponentTypeBuilder miner_type(const std::string& name, bool triplets, const char* default_distance) {
  ComponentTypeBuilder b(name, "miner");
  b.consumes("outputs", "embedding: f32[N,D]")
      .produces(triplets ? "a: i64[T], p: i64[T], n: i64[T]" : "a1: i64[P], p: i64[P], a2: i64[Q], n: i64[Q]")
      .params(distance_params(default_distance))
      .check(check_distance);
  return b;
}

}  // namespace embedflow::torchfam
