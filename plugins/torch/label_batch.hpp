// What the losses over a label batch (image, and label or pair_labels [B,B]) share: the pair
// relations of the batch, the zero loss that keeps the autograd graph, and their declaration.
// A label < 0 is unlabelled and in no pair; pair_labels: 1 similar, 0 dissimilar, < 0 or NaN
// unknown. Includes LibTorch.
#pragma once

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

// The declaration of a loss `name` over a label batch: it reads the batch's images with their
// labels (or pair_labels, for a batch whose pairs carry their own relation) and the embeddings of
// those images.
inline ComponentTypeBuilder label_batch_loss(const std::string& name) {
  ComponentTypeBuilder b(name, "loss");
  b.consumes("batch", "image: any[N,...]")
      .consumes_one_of("batch", "label: any[N] | pair_labels: f32[N,N]")
      .consumes("outputs", "embedding: f32[N,D]");
  return b;
}

}  // namespace embedflow::torchfam
