// Loss components (kind "loss") and the batch view they compute on.
//
// Distances are Euclidean. Pair and triplet losses use PyTorch's pairwise_distance (eps 1e-6,
// as F.triplet_margin_loss does); the mining losses over all pairs of a label batch use cdist
// without the matrix-product shortcut (exact for near-duplicates, zero gradient at zero
// distance); torch.all_pairs_contrastive uses the Gram matrix and an analytic backward pass (see
// AllPairsFunction). Every loss is the mean over its terms. Fields consumed (catalog.hpp):
//   pairs   a_image, b_image, pair_label (1 similar, 0 dissimilar)
//           torch.contrastive, torch.dual_margin_contrastive
//   triplet anchor_image, positive_image, negative_image        torch.triplet_margin
//   labels  image, and label (label < 0: unlabelled, in no pair) or pair_labels [B,B] (1 similar,
//           0 dissimilar, < 0 or NaN unknown; image.batch_pairs' matrix mode)
//           torch.batch_hard_triplet, torch.semi_hard_triplet, torch.all_pairs_contrastive
//   any     torch.l2_embedding (every image field of the batch); torch.sum (its terms')
#include <algorithm>
#include <limits>

#include "bridge.hpp"
#include "catalog.hpp"
#include "loss.hpp"
#include "torch_family.hpp"

namespace embedflow::torchfam {

namespace F = torch::nn::functional;

torch::Tensor image_input(const torch::Tensor& t) {
  if (t.scalar_type() == torch::kUInt8) {
    torch::Tensor x = t.dim() == 3 ? t.unsqueeze(3) : t;  // [N,H,W] grey images
    if (x.dim() == 4) x = x.permute({0, 3, 1, 2});       // HWC (OpenCV) -> CHW
    return x.contiguous().to(torch::kFloat32).div_(255.0);  // a new tensor: the record is untouched
  }
  return t.scalar_type() == torch::kFloat32 ? t : t.to(torch::kFloat32);
}

StepInputs::StepInputs(Model& model, const Record& batch, torch::Device device, std::string loss_name)
    : model_(model), record_(batch), device_(device), loss_name_(std::move(loss_name)) {}

std::int64_t StepInputs::batch_size() const { return record_.batch_size(); }

torch::Tensor StepInputs::field(const std::string& name) {
  auto it = tensors_.find(name);
  if (it != tensors_.end()) return it->second;
  const Array* a = record_.find(name);
  if (!a)
    throw DataError(cat(loss_name_.empty() ? std::string("the loss") : loss_name_, " needs the batch field '", name,
                        "', but the batch is ", record_.describe()));
  torch::Tensor t = to_tensor(*a);
  if (std::find(kImageFields.begin(), kImageFields.end(), name) != kImageFields.end()) t = image_input(t);
  t = t.to(device_);
  tensors_.emplace(name, t);
  return t;
}

void StepInputs::provide(const std::string& name, torch::Tensor t) { tensors_[name] = std::move(t); }

void StepInputs::provide_output(const std::string& field, const std::string& name, torch::Tensor t) {
  if (name == "embedding") embeddings_[field] = t;
  outputs_[field][name] = std::move(t);
}

torch::Tensor StepInputs::output(const std::string& field, const std::string& name) {
  if (!embeddings_.count(field)) embed({field});
  const TensorMap& outs = outputs_[field];
  auto it = outs.find(name);
  if (it == outs.end()) {
    std::string have;
    for (const auto& [n, t] : outs) have += cat(have.empty() ? "" : ", ", n);
    throw DataError(cat(loss_name_.empty() ? std::string("the loss") : loss_name_, " needs the model output '", name,
                        "' of '", field, "', but the model ", model_.owner(), " gives only: ", have,
                        " (reconstruction: torch.conv_ae or torch.conv_vae; mu and logvar: torch.conv_vae)"));
  }
  return it->second;
}

std::vector<torch::Tensor> StepInputs::embed(const std::vector<std::string>& fields) {
  std::vector<std::string> todo;
  for (const auto& f : fields)
    if (!embeddings_.count(f) && std::find(todo.begin(), todo.end(), f) == todo.end()) todo.push_back(f);
  if (!todo.empty()) {
    std::vector<torch::Tensor> xs;
    std::vector<std::int64_t> sizes;
    for (const auto& f : todo) {
      xs.push_back(field(f));
      sizes.push_back(xs.back().size(0));
    }
    torch::Tensor x;
    try {
      x = xs.size() == 1 ? xs.front() : torch::cat(xs, 0);
    } catch (const c10::Error&) {
      std::string shapes;
      for (std::size_t i = 0; i < todo.size(); ++i) shapes += cat(i ? ", " : "", todo[i], " ", xs[i].sizes());
      throw DataError(cat("image fields of one batch must have equal shapes past the batch dim: ", shapes));
    }
    TensorMap outs = model_.forward_all({{"image", x}});
    if (!outs.count("embedding")) throw DataError(cat(model_.owner(), ": the model's forward_all gave no 'embedding'"));
    for (const auto& [name, t] : outs) {
      if (t.dim() == 0 || t.size(0) != x.size(0)) continue;  // not per sample: cannot be split by field
      auto parts = t.split_with_sizes(sizes, 0);
      for (std::size_t i = 0; i < todo.size(); ++i) outputs_[todo[i]][name] = parts[i];
    }
    for (const auto& f : todo) embeddings_[f] = outputs_[f].at("embedding");
  }
  std::vector<torch::Tensor> out;
  for (const auto& f : fields) out.push_back(embeddings_.at(f));
  return out;
}

namespace {

// ---------------------------------------------------------------------------------------------
// Formulas (pure functions of embeddings)

torch::Tensor pair_distance(const torch::Tensor& a, const torch::Tensor& b) {
  return F::pairwise_distance(a, b, F::PairwiseDistanceFuncOptions().p(2).eps(1e-6));
}

torch::Tensor distance_matrix(const torch::Tensor& x) {
  return torch::cdist(x, x, 2.0, /*compute_mode: donot_use_mm_for_euclid_dist*/ 2);
}

torch::Tensor zero_like_graph(const torch::Tensor& x) { return x.sum() * 0.0; }

struct LabelMasks {
  torch::Tensor positive;  // a similar pair, not the anchor itself
  torch::Tensor negative;  // a dissimilar pair
};

// Pair relations of a label batch of n embeddings: from pair_labels [n,n] when the batch has it
// (1 similar, 0 dissimilar, < 0 or NaN unknown), else from label [n] (equal labels are similar;
// a label < 0 is unlabelled and in no pair).
LabelMasks label_masks(StepInputs& in, std::int64_t n) {
  torch::Tensor eye = torch::eye(n, torch::TensorOptions().dtype(torch::kBool).device(in.field("image").device()));
  if (in.has("pair_labels")) {
    torch::Tensor p = in.field("pair_labels").to(torch::kFloat32);
    if (p.dim() != 2 || p.size(0) != n || p.size(1) != n)
      throw DataError(cat("pair_labels must be [", n, ",", n, "] for ", n, " images, got ", p.sizes()));
    return {(p == 1) & ~eye, (p == 0) & ~eye};
  }
  torch::Tensor y = in.field("label").flatten();
  if (y.size(0) != n) throw DataError(cat("label has ", y.size(0), " entries for ", n, " images"));
  if (y.is_floating_point()) throw DataError("label must be an integer field (i64 or i32)");
  y = y.to(torch::kInt64);
  torch::Tensor labelled = y >= 0;
  torch::Tensor both = labelled.unsqueeze(0) & labelled.unsqueeze(1);
  torch::Tensor same = y.unsqueeze(0) == y.unsqueeze(1);
  return {same & both & ~eye, ~same & both};
}

torch::Tensor hinge_or_soft(const torch::Tensor& x, bool soft) { return soft ? F::softplus(x) : torch::clamp_min(x, 0.0); }

// ---------------------------------------------------------------------------------------------
// Components

class Contrastive final : public Loss {
 public:
  explicit Contrastive(const ComponentContext& c)
      : margin_(c.params().number("margin")), squared_(c.params().boolean("squared")) {}
  torch::Tensor compute(StepInputs& in) override {
    auto e = in.embed({"a_image", "b_image"});
    torch::Tensor z = in.field("pair_label").flatten().to(torch::kFloat32);
    torch::Tensor d = pair_distance(e[0], e[1]);
    torch::Tensor neg = torch::clamp_min(margin_ - d, 0.0);
    torch::Tensor l = squared_ ? z * d.pow(2) + (1 - z) * neg.pow(2) : z * d + (1 - z) * neg;
    return l.mean();
  }

 private:
  double margin_;
  bool squared_;
};

class DualMargin final : public Loss {
 public:
  explicit DualMargin(const ComponentContext& c)
      : pos_(c.params().number("positive_margin")), neg_(c.params().number("negative_margin")),
        gamma_(c.params().number("positive_weight")), squared_(c.params().boolean("squared")) {
    if (neg_ < pos_) throw ConfigError(cat(c.owner(), ": negative_margin must be >= positive_margin"));
  }
  torch::Tensor compute(StepInputs& in) override {
    auto e = in.embed({"a_image", "b_image"});
    torch::Tensor z = in.field("pair_label").flatten().to(torch::kFloat32);
    torch::Tensor d = pair_distance(e[0], e[1]);
    torch::Tensor p = torch::clamp_min(d - pos_, 0.0), n = torch::clamp_min(neg_ - d, 0.0);
    if (squared_) {
      p = p.pow(2);
      n = n.pow(2);
    }
    return (gamma_ * z * p + (1 - z) * n).mean();
  }

 private:
  double pos_, neg_, gamma_;
  bool squared_;
};

class TripletMargin final : public Loss {
 public:
  explicit TripletMargin(const ComponentContext& c)
      : margin_(c.params().number("margin")), soft_(c.params().boolean("soft")), swap_(c.params().boolean("swap")) {}
  torch::Tensor compute(StepInputs& in) override {
    auto e = in.embed({"anchor_image", "positive_image", "negative_image"});
    torch::Tensor dap = pair_distance(e[0], e[1]), dan = pair_distance(e[0], e[2]);
    if (swap_) dan = torch::min(dan, pair_distance(e[1], e[2]));
    return hinge_or_soft(dap - dan + margin_, soft_).mean();
  }

 private:
  double margin_;
  bool soft_, swap_;
};

class BatchHard final : public Loss {
 public:
  explicit BatchHard(const ComponentContext& c) : margin_(c.params().number("margin")), soft_(c.params().boolean("soft")) {}
  torch::Tensor compute(StepInputs& in) override {
    torch::Tensor x = in.embed_one("image");
    LabelMasks m = label_masks(in, x.size(0));
    torch::Tensor D = distance_matrix(x);
    const double inf = std::numeric_limits<double>::infinity();
    torch::Tensor hardest_pos = torch::where(m.positive, D, torch::zeros_like(D)).amax(1);
    torch::Tensor hardest_neg = torch::where(m.negative, D, torch::full_like(D, inf)).amin(1);
    torch::Tensor valid = m.positive.any(1) & m.negative.any(1);
    if (!valid.any().item<bool>()) return zero_like_graph(x);
    return hinge_or_soft((hardest_pos - hardest_neg + margin_).masked_select(valid), soft_).mean();
  }

 private:
  double margin_;
  bool soft_;
};

class SemiHard final : public Loss {
 public:
  explicit SemiHard(const ComponentContext& c) : margin_(c.params().number("margin")) {}
  torch::Tensor compute(StepInputs& in) override {
    torch::Tensor x = in.embed_one("image");
    LabelMasks m = label_masks(in, x.size(0));
    torch::Tensor D = distance_matrix(x);
    const double inf = std::numeric_limits<double>::infinity();
    // For anchor a and positive p: the closest negative farther than p (semi-hard); if there is
    // none, the farthest negative (FaceNet; TensorFlow's triplet_semihard_loss).
    torch::Tensor dap = D.unsqueeze(2), dan = D.unsqueeze(1);            // [a,p,1], [a,1,n]
    torch::Tensor outside = m.negative.unsqueeze(1) & (dan > dap);         // [a,p,n]
    torch::Tensor semi = torch::where(outside, dan.expand_as(outside), torch::full({}, inf, D.options())).amin(2);
    torch::Tensor farthest = torch::where(m.negative, D, torch::full_like(D, -inf)).amax(1, true).expand_as(D);
    torch::Tensor chosen = torch::where(outside.any(2), semi, farthest);
    torch::Tensor valid = m.positive & m.negative.any(1, true);
    if (!valid.any().item<bool>()) return zero_like_graph(x);
    return torch::clamp_min((D - chosen + margin_).masked_select(valid), 0.0).mean();
  }

 private:
  double margin_;
};

// The mu-weighted all-pairs contrastive loss with an analytic backward pass. Autograd through
// cdist + triu + masked_select spent most of a step in tiny parallel regions (cdist's forward
// and triu each ~10 ms at batch 64 on 2 loaded cores, against ~1 ms of arithmetic); here the
// forward is one Gram product (BLAS) and O(n^2) elementwise work, and the backward is one more
// product: for a pair term t(d), d t / d x_i = t'(d) (x_i - x_j) / d, so with the symmetric weight
// matrix W_ij = t'(d_ij) / d_ij over the known pairs, grad x = rowsum(W) x - W x. t'/d is 2 mu
// for similar pairs and -(1 - mu) / d for dissimilar pairs closer than the margin (0 at d = 0,
// as cdist's subgradient).
struct AllPairsFunction : public torch::autograd::Function<AllPairsFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& pos,
                               const torch::Tensor& neg, double mu, double margin, double pairs) {
    // Squared distances from the Gram matrix: d_ij^2 = |x_i|^2 + |x_j|^2 - 2 x_i.x_j, clamped at 0
    // (rounding can make it slightly negative for near-duplicates).
    torch::Tensor sq = x.pow(2).sum(1);
    torch::Tensor s = (sq.unsqueeze(1) + sq.unsqueeze(0) - 2 * x.mm(x.t())).clamp_min_(0.0);
    torch::Tensor d = s.sqrt();
    torch::Tensor zero = torch::zeros({}, s.options());
    torch::Tensor terms = torch::where(pos, mu * s, torch::where(neg, (1 - mu) * (margin - d).clamp_min(0.0), zero));
    ctx->save_for_backward({x, d, pos, neg});
    ctx->saved_data["mu"] = mu;
    ctx->saved_data["margin"] = margin;
    ctx->saved_data["pairs"] = pairs;
    return terms.sum() / pairs;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &d = saved[1], &pos = saved[2], &neg = saved[3];
    const double mu = ctx->saved_data["mu"].toDouble(), margin = ctx->saved_data["margin"].toDouble();
    const double pairs = ctx->saved_data["pairs"].toDouble();
    torch::Tensor zero = torch::zeros({}, d.options());
    torch::Tensor pulled = neg & (d < margin) & (d > 0);
    torch::Tensor w = torch::where(pos, torch::full({}, 2 * mu, d.options()), zero) -
                      torch::where(pulled, (1 - mu) / torch::where(pulled, d, torch::ones_like(d)), zero);
    w = (w + w.t()) * (grad[0] / pairs);  // pairs are stored once (i < j); each end gets its gradient
    torch::Tensor gx = w.sum(1, true) * x - w.mm(x);
    return {gx, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

class AllPairs final : public Loss {
 public:
  explicit AllPairs(const ComponentContext& c) : mu_(c.params().number("mu")), margin_(c.params().number("margin")) {}
  torch::Tensor compute(StepInputs& in) override {
    torch::Tensor x = in.embed_one("image");
    const std::int64_t n = x.size(0);
    LabelMasks m = label_masks(in, n);
    // Pairs i < j only (each unordered pair once); an index comparison, not triu (see above).
    torch::Tensor idx = torch::arange(n, torch::TensorOptions().dtype(torch::kLong).device(x.device()));
    torch::Tensor upper = idx.unsqueeze(1) < idx.unsqueeze(0);
    torch::Tensor pos = m.positive & upper, neg = m.negative & upper;
    const auto pairs = (pos | neg).sum().item<std::int64_t>();
    if (pairs == 0) return zero_like_graph(x);
    return AllPairsFunction::apply(x, pos, neg, mu_, margin_, static_cast<double>(pairs));
  }

 private:
  double mu_, margin_;
};

class L2Embedding final : public Loss {
 public:
  explicit L2Embedding(const ComponentContext& c) : weight_(c.params().number("weight")) {}
  torch::Tensor compute(StepInputs& in) override {
    if (in.embeddings().empty()) {
      std::vector<std::string> present;
      for (const auto& f : kImageFields)
        if (in.has(f)) present.push_back(f);
      if (present.empty()) throw DataError(cat("torch.l2_embedding: the batch has no image field (", in.record().describe(), ")"));
      in.embed(present);
    }
    std::vector<torch::Tensor> all;
    for (const auto& [name, e] : in.embeddings()) all.push_back(e);
    return weight_ * torch::cat(all, 0).pow(2).sum(1).mean();
  }

 private:
  double weight_;
};

// Image fields a loss applies to: its `fields` param, else every image field of the batch.
std::vector<std::string> image_fields_of(StepInputs& in, const std::vector<std::string>& fields, const char* loss) {
  if (!fields.empty()) return fields;
  std::vector<std::string> present;
  for (const auto& f : kImageFields)
    if (in.has(f)) present.push_back(f);
  if (present.empty()) throw DataError(cat(loss, ": the batch has no image field (", in.record().describe(), ")"));
  return present;
}

// Reconstruction error between each image field and the model's "reconstruction" of it.
// reduction mean: mean over every pixel (F.mse_loss / F.binary_cross_entropy defaults);
// sum: summed over the pixels of each image, mean over images (the VAE's negative log-likelihood
// convention, on the scale of the KL term).
class Reconstruction final : public Loss {
 public:
  explicit Reconstruction(const ComponentContext& c)
      : bce_(c.params().string("error") == "bce"), sum_(c.params().string("reduction") == "sum"),
        fields_(c.params().strings("fields")) {}
  torch::Tensor compute(StepInputs& in) override {
    torch::Tensor total;
    std::int64_t elements = 0, images = 0;
    for (const auto& f : image_fields_of(in, fields_, "torch.reconstruction")) {
      torch::Tensor x = in.field(f);
      torch::Tensor r = in.output(f, "reconstruction");
      if (!x.sizes().equals(r.sizes()))
        throw DataError(cat("torch.reconstruction: the reconstruction of '", f, "' has shape ", r.sizes(),
                            " but the images have ", x.sizes()));
      if (bce_ && (x.min().item<double>() < 0 || x.max().item<double>() > 1))
        throw DataError(cat("torch.reconstruction: error bce needs targets in [0,1], but '", f, "' spans [",
                            x.min().item<double>(), ", ", x.max().item<double>(), "] (use mse for normalised images)"));
      torch::Tensor e = bce_ ? F::binary_cross_entropy(r, x, F::BinaryCrossEntropyFuncOptions().reduction(torch::kSum))
                             : (r - x).pow(2).sum();
      total = total.defined() ? total + e : e;
      elements += x.numel();
      images += x.size(0);
    }
    return total / double(sum_ ? images : elements);
  }

 private:
  bool bce_, sum_;
  std::vector<std::string> fields_;
};

// KL(N(mu, exp(logvar)) || N(0, I)) = -1/2 sum_j (1 + logvar_j - mu_j^2 - exp(logvar_j)) per image,
// mean over images, times beta.
class KlDivergence final : public Loss {
 public:
  explicit KlDivergence(const ComponentContext& c) : beta_(c.params().number("beta")), fields_(c.params().strings("fields")) {}
  torch::Tensor compute(StepInputs& in) override {
    torch::Tensor total;
    std::int64_t images = 0;
    for (const auto& f : image_fields_of(in, fields_, "torch.kl_divergence")) {
      torch::Tensor mu = in.output(f, "mu"), logvar = in.output(f, "logvar");
      torch::Tensor kl = -0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).sum();
      total = total.defined() ? total + kl : kl;
      images += mu.size(0);
    }
    return beta_ * total / double(images);
  }

 private:
  double beta_;
  std::vector<std::string> fields_;
};

class Sum final : public Loss {
 public:
  explicit Sum(const ComponentContext& c) {
    for (const char* slot : {"a", "b", "c", "d"})
      if (c.params().has(slot)) terms_.push_back(c.component<Loss>(slot));
    weights_ = c.params().numbers("weights");
    if (weights_.size() > terms_.size())
      throw ConfigError(cat(c.owner(), ": ", weights_.size(), " weights for ", terms_.size(), " terms"));
    weights_.resize(terms_.size(), 1.0);
  }
  torch::Tensor compute(StepInputs& in) override {
    torch::Tensor total;
    for (std::size_t i = 0; i < terms_.size(); ++i) {
      torch::Tensor t = weights_[i] * terms_[i]->compute(in);
      total = total.defined() ? total + t : t;
    }
    return total;
  }

 private:
  std::vector<std::unique_ptr<Loss>> terms_;
  std::vector<double> weights_;
};

Param margin_param(double def, const char* doc) { return Param::number("margin").default_value(def).min(0.0).doc(doc); }

}  // namespace

std::vector<ComponentType> loss_components() {
  return {
      ComponentTypeBuilder("torch.contrastive", "loss")
          .doc("Contrastive loss on pairs (a_image, b_image, pair_label z): squared: z d^2 + (1-z) max(0, m-d)^2 "
               "(Hadsell et al.); else z d + (1-z) max(0, m-d). d = ||f(a) - f(b)||.")
          .param(margin_param(1.0, "m, the distance dissimilar pairs are pushed beyond"))
          .param(Param::boolean("squared").default_value(true).doc("squared terms (true) or plain distances (false)"))
          .create<Contrastive>(),
      ComponentTypeBuilder("torch.dual_margin_contrastive", "loss")
          .doc("Dual-margin contrastive loss on pairs (a_image, b_image, pair_label z): gamma z max(0, d - m_p) + "
               "(1-z) max(0, m_n - d), terms squared when `squared` (the CEN loss without its regularisers).")
          .param(Param::number("positive_margin").default_value(0.0).min(0.0).doc("m_p: similar pairs closer than this cost nothing"))
          .param(Param::number("negative_margin").default_value(1.0).min(0.0).doc("m_n: dissimilar pairs farther than this cost nothing"))
          .param(Param::number("positive_weight").default_value(1.0).min(0.0).doc("gamma, the weight of the similar-pair term"))
          .param(Param::boolean("squared").default_value(false).doc("square both hinge terms"))
          .create<DualMargin>(),
      ComponentTypeBuilder("torch.triplet_margin", "loss")
          .doc("Triplet margin loss on (anchor_image, positive_image, negative_image): hinge max(0, d_ap - d_an + m) "
               "(PyTorch's triplet_margin_loss) or soft log(1 + exp(d_ap - d_an + m)).")
          .param(margin_param(1.0, "m"))
          .param(Param::boolean("soft").default_value(false).doc("softplus instead of the hinge (use margin 0 for Hermans' soft margin)"))
          .param(Param::boolean("swap").default_value(false).doc("distance swap: d_an = min(d_an, d_pn) (Balntas et al.; PyTorch's swap)"))
          .create<TripletMargin>(),
      ComponentTypeBuilder("torch.batch_hard_triplet", "loss")
          .doc("Batch-hard triplet loss on a label batch (image, label or pair_labels), for PK batches: per anchor, the farthest "
               "positive and the closest negative; hinge or soft margin (Hermans et al. 2017). Anchors without a "
               "positive or a negative are skipped.")
          .param(margin_param(0.2, "m"))
          .param(Param::boolean("soft").default_value(false).doc("softplus(d_ap - d_an + m) instead of the hinge"))
          .create<BatchHard>(),
      ComponentTypeBuilder("torch.semi_hard_triplet", "loss")
          .doc("Semi-hard triplet loss on a label batch (image, label or pair_labels): for every anchor-positive pair, the closest "
               "negative farther than the positive, else the farthest negative (FaceNet; TensorFlow's "
               "triplet_semihard_loss); mean of max(0, d_ap - d_an + m) over all anchor-positive pairs.")
          .param(margin_param(0.2, "m"))
          .create<SemiHard>(),
      ComponentTypeBuilder("torch.all_pairs_contrastive", "loss")
          .doc("mu-weighted contrastive loss over all pairs i<j of a label batch (image, label or pair_labels): "
               "mu z d^2 + (1 - mu)(1 - z) max(0, l - d), z = 1 for equal labels (or pair_labels[i][j]); mean over "
               "the pairs whose relation is known.")
          .param(Param::number("mu").default_value(0.5).range(0.0, 1.0).doc("mu, the weight of the similar-pair term"))
          .param(margin_param(1.0, "l, the margin of dissimilar pairs"))
          .create<AllPairs>(),
      ComponentTypeBuilder("torch.l2_embedding", "loss")
          .doc("L2 embedding regulariser: weight * mean ||f(x)||^2 over the embeddings of the step (every image "
               "field of the batch). Combine it with any loss through torch.sum.")
          .param(Param::number("weight").default_value(1e-3).min(0.0).doc("regulariser weight"))
          .create<L2Embedding>(),
      ComponentTypeBuilder("torch.reconstruction", "loss")
          .doc("Reconstruction error of an autoencoder (torch.conv_ae, torch.conv_vae): the model's 'reconstruction' "
               "output against each image field. error mse: (r - x)^2; bce: -(x log r + (1-x) log(1-r)) (log clamped "
               "at -100 as PyTorch; targets in [0,1]). reduction mean: mean over all pixels (F.mse_loss's default); "
               "sum: summed over each image's pixels, mean over images (the VAE's scale, comparable with the KL term).")
          .param(Param::choice("error", {"mse", "bce"}).default_value("mse").doc("squared error or binary cross-entropy"))
          .param(Param::choice("reduction", {"mean", "sum"}).default_value("mean").doc(
              "mean: per pixel; sum: per image (pixels summed), mean over images"))
          .param(Param::strings("fields").default_value(std::vector<std::string>{}).doc(
              "image fields to reconstruct; empty: every image field of the batch"))
          .create<Reconstruction>(),
      ComponentTypeBuilder("torch.kl_divergence", "loss")
          .doc("beta * KL(q(z|x) || N(0, I)) of a VAE (torch.conv_vae's mu and logvar outputs), closed form "
               "-1/2 sum_j (1 + logvar_j - mu_j^2 - exp(logvar_j)) summed over the latent, mean over images. "
               "Pair it with torch.reconstruction (reduction: sum) in a torch.sum.")
          .param(Param::number("beta").default_value(1.0).min(0.0).doc("beta, the weight of the KL term (beta-VAE)"))
          .param(Param::strings("fields").default_value(std::vector<std::string>{}).doc(
              "image fields whose latents are regularised; empty: every image field of the batch"))
          .create<KlDivergence>(),
      ComponentTypeBuilder("torch.sum", "loss")
          .doc("Weighted sum of up to four losses sharing one forward pass per step, e.g. "
               "{type: torch.sum, a: {type: torch.contrastive}, b: {type: torch.l2_embedding, weight: 0.001}}.")
          .param(Param::component("a", "loss").doc("first term"))
          .param(Param::component("b", "loss").optional().doc("second term"))
          .param(Param::component("c", "loss").optional().doc("third term"))
          .param(Param::component("d", "loss").optional().doc("fourth term"))
          .param(Param::numbers("weights").default_value(std::vector<double>{}).doc("weight of each term in order; missing ones are 1"))
          .create<Sum>(),
  };
}

double evaluate_loss(const Value& spec, const Record& batch, Record* grads) {
  std::unique_ptr<Component> c = family_registry().instantiate(spec, 1, "evaluate_loss");
  auto* loss = dynamic_cast<Loss*>(c.get());
  if (!loss) throw ConfigError(cat(spec.str(), " is not a loss"));
  std::unique_ptr<Model> identity = build_model(Value::map({{"type", Value::string("torch.identity")}}), 1, "evaluate_loss");
  const Value* type = spec.get("type");
  StepInputs in(*identity, batch, torch::kCPU, type && type->is_string() ? type->as_string() : "");
  std::map<std::string, torch::Tensor> leaves;
  for (const auto& f : kImageFields)
    if (const Array* a = batch.find(f)) {
      torch::Tensor t = to_tensor(*a).to(torch::kFloat32).clone().requires_grad_(true);
      in.provide(f, t);
      leaves.emplace(f, t);
    }
  // Fields "output.<name>" stand for the model's named outputs of "image" (reconstruction, mu,
  // logvar): the autoencoder losses' formulas are tested on fixed tensors without a model.
  for (const auto& [name, array] : batch.fields())
    if (name.rfind("output.", 0) == 0) {
      torch::Tensor t = to_tensor(array).to(torch::kFloat32).clone().requires_grad_(true);
      in.provide_output("image", name.substr(7), t);
      leaves.emplace(name, t);
    }
  if (leaves.count("output.mu") && !leaves.count("output.embedding")) in.provide_output("image", "embedding", leaves.at("output.mu"));
  torch::Tensor value = loss->compute(in);
  if (grads) {
    value.backward();
    for (auto& [name, leaf] : leaves)
      grads->set(name, to_array(leaf.grad().defined() ? leaf.grad() : torch::zeros_like(leaf)));
  }
  return value.item<double>();
}

}  // namespace embedflow::torchfam
