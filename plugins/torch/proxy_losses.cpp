// Proxy losses on a label batch (image, label), as pytorch-metric-learning computes them: one
// learnable proxy per class, proxies [C, D] (Loss::parameters, "proxies": torch.train optimises
// them with the model and checkpoints them).
//   torch.proxy_anchor  each proxy is an anchor over the batch (Kim et al. 2020; PML's
//                       ProxyAnchorLoss): cosine similarity, proxies kaiming_normal (fan_out) at
//                       the start, the positive term averaged over the proxies with a positive in
//                       the batch and the negative term over all proxies
//   torch.proxy_nca     NCA against the proxies (Movshovitz-Attias et al. 2017; PML's
//                       ProxyNCALoss): squared L2 distance of the normalised embedding and proxy,
//                       proxies normal(0, 1) at the start, mean over the rows
// Rows with label < 0 are left out; a label >= num_classes is a DataError naming the loss and row.
#include <cmath>

#include "pml_formulas.hpp"
#include "torch_types.hpp"

namespace embedflow::torchfam {
namespace {

class ProxyLoss : public Loss {
 public:
  ProxyLoss(const ComponentContext& c, std::string name, double init_std)
      : name_(std::move(name)),
        num_classes_(c.params().integer("num_classes")),
        embedding_size_(c.params().integer("embedding_size")),
        proxies_(normal_parameter({num_classes_, embedding_size_}, init_std, derive_seed(c.seed(), name_))) {}

  torch::Tensor compute(StepInputs& in) override {
    torch::Tensor x = sized_embeddings(in, embedding_size_, name_);
    ClassLabels y = class_labels(in, x.size(0), num_classes_, name_);
    if (y.rows.numel() == 0) return zero_like_graph(x) + zero_like_graph(proxies_);
    return formula(x.index_select(0, y.rows), y.labels);
  }
  NamedTensors parameters() override { return {{"proxies", proxies_}}; }
  void to(const torch::Device& device) override { move_parameter(proxies_, device); }

 protected:
  // The loss of labelled embeddings x [k, D] with labels [k].
  virtual torch::Tensor formula(const torch::Tensor& x, const torch::Tensor& labels) = 0;

  std::string name_;
  std::int64_t num_classes_, embedding_size_;
  torch::Tensor proxies_;
};

class ProxyAnchor final : public ProxyLoss {
 public:
  // kaiming_normal_(mode=fan_out) of a [C, D] tensor: std = sqrt(2 / C).
  explicit ProxyAnchor(const ComponentContext& c)
      : ProxyLoss(c, "torch.proxy_anchor", std::sqrt(2.0 / static_cast<double>(c.params().integer("num_classes")))),
        margin_(c.params().number("margin")), alpha_(c.params().number("alpha")) {}

 protected:
  torch::Tensor formula(const torch::Tensor& x, const torch::Tensor& labels) override {
    torch::Tensor cos = cosine_matrix(x, proxies_);  // [k, C]
    torch::Tensor positive = torch::one_hot(labels, num_classes_).to(torch::kBool);
    torch::Tensor pos_term = pml_logsumexp(alpha_ * (margin_ - cos), positive, true, 0);
    torch::Tensor neg_term = pml_logsumexp(alpha_ * (cos + margin_), ~positive, true, 0);
    const auto with_positives = positive.any(0).sum().item<std::int64_t>();
    return pos_term.sum() / static_cast<double>(with_positives) + neg_term.sum() / static_cast<double>(num_classes_);
  }

 private:
  double margin_, alpha_;
};

class ProxyNca final : public ProxyLoss {
 public:
  explicit ProxyNca(const ComponentContext& c)
      : ProxyLoss(c, "torch.proxy_nca", 1.0), softmax_scale_(c.params().number("softmax_scale")) {}

 protected:
  torch::Tensor formula(const torch::Tensor& x, const torch::Tensor& labels) override {
    torch::Tensor mat = -unit_l2_matrix(x, proxies_).pow(2);
    torch::Tensor classes = torch::arange(num_classes_, labels.options());
    torch::Tensor same = (labels.unsqueeze(1) == classes.unsqueeze(0)).to(mat.scalar_type());
    torch::Tensor own = (torch::softmax(softmax_scale_ * mat, 1) * same).sum(1);
    // PML leaves out rows whose own-class probability underflowed to 0 (log would be -inf).
    torch::Tensor kept = own.masked_select(own != 0);
    return kept.numel() > 0 ? -torch::log(kept).mean() : zero_like_graph(x) + zero_like_graph(proxies_);
  }

 private:
  double softmax_scale_;
};

}  // namespace

ComponentType proxy_anchor_type() {
  return class_parameter_loss("torch.proxy_anchor")
      .doc("Proxy-Anchor loss on a label batch (image, label), as pytorch-metric-learning's ProxyAnchorLoss: "
           "1/|P+| sum_{p in P+} log(1 + sum_{x in X_p+} exp(-α(s(x,p) - δ))) + 1/|P| sum_{p in P} log(1 + "
           "sum_{x in X_p-} exp(α(s(x,p) + δ))), s the cosine similarity, P the learnable proxies (one per class, "
           "trained and checkpointed with the model), P+ those with a positive in the batch. Kim et al. 2020.")
      .param(Param::number("margin").default_value(0.1).doc("δ, the margin"))
      .param(Param::number("alpha").default_value(32.0).min(0.0).doc("α, the scale"))
      .create<ProxyAnchor>();
}

ComponentType proxy_nca_type() {
  return class_parameter_loss("torch.proxy_nca")
      .doc("ProxyNCA loss on a label batch (image, label), as pytorch-metric-learning's ProxyNCALoss: mean over the "
           "rows of -log softmax_y(-s ||x̂ - p̂_c||^2), x̂ and p̂_c the normalised embedding and class proxies "
           "(learnable, trained and checkpointed with the model). Movshovitz-Attias et al. 2017.")
      .param(Param::number("softmax_scale").default_value(1.0).min(0.0).doc("s, the scale of the negative squared distances"))
      .create<ProxyNca>();
}

}  // namespace embedflow::torchfam
