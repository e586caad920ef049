// What the losses ported from pytorch-metric-learning (PML) share, written as PML computes it so
// that values and gradients agree with PML's to float rounding: its distances (embeddings L2
// normalised first, as PML's distances do by default), its masked logsumexp, its reducers' rules,
// the labels of the proxy and classification losses, and their learnable tensors. Includes LibTorch.
#pragma once

#include <ATen/CPUGeneratorImpl.h>

#include <limits>

#include "label_batch.hpp"

namespace embedflow::torchfam {

// F.normalize(x, p=2, dim=1): rows of unit length (eps 1e-12).
inline torch::Tensor unit_rows(const torch::Tensor& x) {
  namespace F = torch::nn::functional;
  return F::normalize(x, F::NormalizeFuncOptions().p(2).dim(1));
}

// PML's CosineSimilarity (and DotProductSimilarity, which normalises by default too): [n,m].
inline torch::Tensor cosine_matrix(const torch::Tensor& query, const torch::Tensor& ref) {
  return torch::matmul(unit_rows(query), unit_rows(ref).t());
}

// PML's LpDistance(p=2): cdist between the normalised rows, with cdist's default compute mode
// (the matrix-product form above 25 rows), as PML calls it.
inline torch::Tensor unit_l2_matrix(const torch::Tensor& query, const torch::Tensor& ref) {
  return torch::cdist(unit_rows(query), unit_rows(ref), 2.0);
}

// torch.finfo(dtype).min, PML's "negative infinity" for masked entries.
inline double lowest_of(const torch::Tensor& x) {
  return x.scalar_type() == torch::kFloat64 ? std::numeric_limits<double>::lowest()
                                            : static_cast<double>(std::numeric_limits<float>::lowest());
}

// torch.finfo(dtype).tiny, PML's guard against log(0) and division by zero.
inline double tiny_of(const torch::Tensor& x) {
  return x.scalar_type() == torch::kFloat64 ? std::numeric_limits<double>::min()
                                            : static_cast<double>(std::numeric_limits<float>::min());
}

// PML's lmu.logsumexp over `dim` of a 2-D x: entries outside `keep` left out, a 0 logit added when
// add_one (log(1 + sum exp)), and 0 where nothing is kept. Keeps the reduced dimension.
inline torch::Tensor pml_logsumexp(torch::Tensor x, const torch::Tensor& keep, bool add_one, std::int64_t dim) {
  x = x.masked_fill(~keep, lowest_of(x));
  if (add_one) {
    std::vector<std::int64_t> shape = x.sizes().vec();
    shape[static_cast<std::size_t>(dim)] = 1;
    x = torch::cat({x, torch::zeros(shape, x.options())}, dim);
  }
  return torch::logsumexp(x, {dim}, true).masked_fill(~keep.any(dim, true), 0.0);
}

// PML's pair losses train nothing when the batch has at most one similar and one dissimilar pair.
inline bool too_few_pairs(const LabelMasks& m) {
  return m.positive.sum().item<std::int64_t>() <= 1 && m.negative.sum().item<std::int64_t>() <= 1;
}

// PML's AvgNonZeroReducer: the mean of the terms above 0 (zero when none is).
inline torch::Tensor mean_of_positive(const torch::Tensor& terms, const torch::Tensor& x) {
  torch::Tensor kept = terms.masked_select(terms > 0);
  return kept.numel() > 0 ? kept.mean() : zero_like_graph(x);
}

// The mean of per-row terms over the labelled rows (PML's MeanReducer; unlabelled rows, which PML
// does not know, are left out).
inline torch::Tensor mean_over_labelled(const torch::Tensor& terms, const LabelMasks& m, const torch::Tensor& x) {
  torch::Tensor kept = terms.flatten().masked_select(m.labelled);
  return kept.numel() > 0 ? kept.mean() : zero_like_graph(x);
}

// The labelled rows of a batch for a loss over `num_classes` classes: their indices and labels.
// A label >= num_classes is a DataError naming the loss, the label and its row.
struct ClassLabels {
  torch::Tensor rows;    // i64 [k] indices of the rows with label >= 0
  torch::Tensor labels;  // i64 [k] their labels
};
inline ClassLabels class_labels(StepInputs& in, std::int64_t n, std::int64_t num_classes, const std::string& loss) {
  torch::Tensor y = in.field("label").flatten();
  if (y.size(0) != n) throw DataError(cat(loss, ": label has ", y.size(0), " entries for ", n, " embeddings"));
  if (y.is_floating_point()) throw DataError(cat(loss, ": label must be an integer field (i64 or i32), got ", y.scalar_type()));
  y = y.to(torch::kInt64);
  torch::Tensor over = (y >= num_classes).nonzero();
  if (over.size(0) > 0) {
    const std::int64_t row = over[0][0].item<std::int64_t>();
    throw DataError(cat(loss, ": label ", y[row].item<std::int64_t>(), " (batch row ", row, ") is not below num_classes ",
                        num_classes, "; give the loss num_classes above the largest label"));
  }
  torch::Tensor rows = (y >= 0).nonzero().flatten();
  return {rows, y.index_select(0, rows)};
}

// The embeddings a loss with class parameters reads, checked against its embedding_size; a pair
// batch has no class labels, an error saying so.
inline torch::Tensor sized_embeddings(StepInputs& in, std::int64_t embedding_size, const std::string& loss) {
  if (is_pair_batch(in)) throw DataError(needs_class_labels_reason(loss, "images with class labels (image, label)"));
  torch::Tensor x = in.embed_one("image");
  if (x.dim() != 2 || x.size(1) != embedding_size)
    throw DataError(cat(loss, ": the embeddings are ", x.sizes(), " but embedding_size is ", embedding_size,
                        " (set it to the model's embedding_dim)"));
  return x;
}

// A learnable tensor drawn from N(0, std^2) with a generator of its own, seeded from the graph
// seed, so creating a loss leaves LibTorch's global generator (the model's initialisation,
// dropout) untouched.
inline torch::Tensor normal_parameter(std::vector<std::int64_t> shape, double std, std::uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  torch::Tensor t = torch::empty(shape, torch::kFloat32);
  t.normal_(0.0, std, gen);
  return t.requires_grad_(true);
}

// The same leaf on another device (a new leaf that requires grad).
inline void move_parameter(torch::Tensor& t, const torch::Device& device) {
  if (t.device() != device) t = t.detach().to(device).requires_grad_(true);
}

inline Param num_classes_param() {
  return Param::integer("num_classes").min(1).doc("number of classes; every label must be below it (labels < 0 are unlabelled)");
}
inline Param embedding_size_param() {
  return Param::integer("embedding_size").min(1).doc("embedding size D, the model's embedding_dim");
}

// The declaration of a loss with one learnable row per class: it reads images with labels and
// embeddings of embedding_size (checked against the model's when the graph loads).
inline ComponentTypeBuilder class_parameter_loss(const std::string& name) {
  ComponentTypeBuilder b(name, "loss");
  b.consumes("batch", "image: any[N,...], label: any[N]").consumes("outputs", "embedding: f32[N,$embedding_size]");
  b.param(num_classes_param()).param(embedding_size_param());
  return rejects_pair_batches(b, name, "images with class labels (image, label)");
}

}  // namespace embedflow::torchfam
