// What the losses over a label batch (image, and label or pair_labels [B,B]) share: the pair
// relations of the batch, the zero loss that keeps the autograd graph, and their declaration.
// A label < 0 is unlabelled and in no pair; pair_labels: 1 similar, 0 dissimilar, < 0 or NaN
// unknown. Includes LibTorch.
//
// The pair-based ones also read a pair batch (a_image, b_image, pair_label [B]: the photo
// experiment's), the way pytorch-metric-learning (PML) takes one: the B pairs become 2B
// embeddings (rows 0..B-1 the a members, B..2B-1 the b members) with an explicit indices tuple,
// positive pairs (k, B+k) and (B+k, k) where pair_label[k] is 1, negative pairs where it is 0,
// and nothing between members of different pairs: the pair labels are all that is known (weak
// labels, such as geotags, say nothing about two photos of different pairs, which may show the
// same place). PML's pair-based losses given that tuple as `indices_tuple` compute the same.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "loss.hpp"

namespace embedflow::torchfam {

// A zero that still depends on x (a batch without any pair trains nothing, but backward runs).
inline torch::Tensor zero_like_graph(const torch::Tensor& x) { return x.sum() * 0.0; }

struct LabelMasks {
  torch::Tensor positive;  // [n,n] a similar pair, not the anchor itself
  torch::Tensor negative;  // [n,n] a dissimilar pair
  torch::Tensor labelled;  // [n] rows whose relations are known (label >= 0; every row with pair_labels)
};

// The batch's `label` as i64 [n]; DataError naming the field when it is missing, floating point
// or of another length.
inline torch::Tensor batch_labels(StepInputs& in, std::int64_t n) {
  torch::Tensor y = in.field("label").flatten();
  if (y.size(0) != n) throw DataError(cat("label has ", y.size(0), " entries for ", n, " images"));
  if (y.is_floating_point()) throw DataError("label must be an integer field (i64 or i32)");
  return y.to(torch::kInt64);
}

// Pair relations of a label batch of n embeddings: from pair_labels [n,n] when the batch has it,
// else from label [n] (equal labels are similar). The diagonal is in neither, as
// pytorch-metric-learning's get_matches_and_diffs leaves it when the reference is the batch.
inline LabelMasks label_masks(StepInputs& in, std::int64_t n) {
  torch::Tensor eye = torch::eye(n, torch::TensorOptions().dtype(torch::kBool).device(in.field("image").device()));
  if (in.has("pair_labels")) {
    torch::Tensor p = in.field("pair_labels").to(torch::kFloat32);
    if (p.dim() != 2 || p.size(0) != n || p.size(1) != n)
      throw DataError(cat("pair_labels must be [", n, ",", n, "] for ", n, " images, got ", p.sizes()));
    return {(p == 1) & ~eye, (p == 0) & ~eye, torch::ones({n}, eye.options())};
  }
  torch::Tensor y = batch_labels(in, n);
  torch::Tensor labelled = y >= 0;
  torch::Tensor both = labelled.unsqueeze(0) & labelled.unsqueeze(1);
  torch::Tensor same = y.unsqueeze(0) == y.unsqueeze(1);
  return {same & both & ~eye, ~same & both, labelled};
}

// A pair batch: a_image, b_image and pair_label, and no image field.
inline bool is_pair_batch(const StepInputs& in) {
  return !in.has("image") && in.has("a_image") && in.has("b_image") && in.has("pair_label");
}
inline bool is_pair_batch(const PortSchema& batch) {
  return !batch.is_any() && !batch.find("image") && batch.find("a_image") && batch.find("b_image") &&
         batch.find("pair_label");
}

// The explicit indices tuple of a pair batch (PML's (a1, p, a2, n)) from its pair_label [B]: i64
// on pair_label's device. Labels other than 1 and 0 (NaN, < 0: unknown) are in no pair.
struct PairBatchIndices {
  torch::Tensor a1, p, a2, n;
};
inline PairBatchIndices pair_batch_indices(const torch::Tensor& pair_label) {
  torch::Tensor z = pair_label.flatten().to(torch::kFloat32);
  const std::int64_t b = z.size(0);
  torch::Tensor similar = (z == 1).nonzero().flatten(), dissimilar = (z == 0).nonzero().flatten();
  return {torch::cat({similar, similar + b}), torch::cat({similar + b, similar}), torch::cat({dissimilar, dissimilar + b}),
          torch::cat({dissimilar + b, dissimilar})};
}

// The relations of the 2B rows that a tuple names (PML's mat-based losses build these masks from
// the indices tuple). Every row counts as labelled: PML's reducers average over all rows of the
// matrix when an indices tuple is given.
inline LabelMasks masks_of_pairs(const PairBatchIndices& t, std::int64_t rows, const torch::Device& device) {
  auto opts = torch::TensorOptions().dtype(torch::kBool).device(device);
  torch::Tensor pos = torch::zeros({rows, rows}, opts), neg = torch::zeros({rows, rows}, opts);
  torch::Tensor yes = torch::ones({}, opts);
  pos.index_put_({t.a1.to(device), t.p.to(device)}, yes);
  neg.index_put_({t.a2.to(device), t.n.to(device)}, yes);
  return {pos, neg, torch::ones({rows}, opts)};
}

// What a loss over labelled rows computes on: the embeddings (with their graph) and their
// relations; from a label batch (image with label or pair_labels), or from a pair batch as above
// (x = [f(a); f(b)], one forward pass, and `pairs` its explicit tuple).
struct LabelView {
  torch::Tensor x;
  LabelMasks m;
  std::optional<PairBatchIndices> pairs;
};

// Why a pair batch gives nothing to a loss whose every anchor needs a positive and a negative:
// each of its rows has one partner. For the errors at load time and at run time.
inline std::string one_partner_reason(const std::string& loss) {
  return cat(loss, " on a pair batch (a_image, b_image, pair_label): each of its 2B embeddings has one partner, similar or "
                   "dissimilar, so no anchor has both a positive and a negative and the loss is 0 (as pytorch-metric-learning's "
                   "with that indices_tuple) and trains nothing; give it a label batch (image, label), or use a pair-based "
                   "loss (torch.multi_similarity, torch.lifted_structure, torch.generalized_lifted_structure, "
                   "torch.batch_contrastive, torch.contrastive)");
}

// What a loss that needs class labels says of a pair batch.
inline std::string needs_class_labels_reason(const std::string& loss, const std::string& needs) {
  return cat(loss, " needs ", needs, "; a pair batch (a_image, b_image, pair_label) says only whether two images are "
                   "similar, not their classes; use a pair-based loss (torch.multi_similarity, torch.lifted_structure, "
                   "torch.generalized_lifted_structure, torch.batch_contrastive, torch.contrastive) or feed it a label batch");
}

// How a label-batch loss takes a pair batch.
enum class PairBatches {
  no,        // not at all (its declaration asks for image and label)
  train,     // as 2B embeddings with the pairs' explicit indices tuple
  one_sided  // a loss that needs a positive and a negative per anchor: an error naming why
};

// The label view of the batch `in` for `loss` (named in errors).
inline LabelView label_view(StepInputs& in, const std::string& loss, PairBatches pairs = PairBatches::train) {
  if (pairs != PairBatches::no && is_pair_batch(in)) {
    if (pairs == PairBatches::one_sided) throw DataError(one_partner_reason(loss));
    std::vector<torch::Tensor> e = in.embed({"a_image", "b_image"});
    torch::Tensor z = in.field("pair_label");
    if (z.numel() != e[0].size(0))
      throw DataError(cat(loss, ": pair_label has ", z.numel(), " entries for ", e[0].size(0), " pairs"));
    torch::Tensor x = torch::cat({e[0], e[1]}, 0);
    PairBatchIndices t = pair_batch_indices(z);
    LabelMasks m = masks_of_pairs(t, x.size(0), x.device());
    return {x, m, t};
  }
  torch::Tensor x = in.embed_one("image");
  return {x, label_masks(in, x.size(0)), std::nullopt};
}

// The declaration of a loss `name` over a label batch: it reads the batch's images with their
// labels (or pair_labels, for a batch whose pairs carry their own relation) and the embeddings of
// those images. With `pairs` other than no, a pair batch (a_image, b_image, pair_label) is read
// instead when that is what the loss is fed (train), or refused at load with the reason
// (one_sided).
inline ComponentTypeBuilder label_batch_loss(const std::string& name, PairBatches pairs = PairBatches::no) {
  ComponentTypeBuilder b(name, "loss");
  b.consumes("batch", "image: any[N,...]")
      .consumes_one_of("batch", "label: any[N] | pair_labels: f32[N,N]")
      .consumes("outputs", "embedding: f32[N,D]");
  if (pairs != PairBatches::no)
    b.check([name, pairs](ContractContext& c) {
      if (!is_pair_batch(c.input("batch"))) return;
      c.contract().one_of.erase("batch");
      c.contract().consumes["batch"] = PortSchema::parse("a_image: any[P,...], b_image: any[P,...], pair_label: any[P]");
      if (pairs == PairBatches::one_sided) c.error(one_partner_reason(name));
    });
  return b;
}

// A pair batch at load time for a loss that needs class labels: one error saying what it needs.
inline ComponentTypeBuilder& rejects_pair_batches(ComponentTypeBuilder& b, const std::string& name, const std::string& needs) {
  b.check([name, needs](ContractContext& c) {
    if (!is_pair_batch(c.input("batch"))) return;
    c.contract().consumes.erase("batch");
    c.contract().one_of.erase("batch");
    c.error(needs_class_labels_reason(name, needs));
  });
  return b;
}

}  // namespace embedflow::torchfam
