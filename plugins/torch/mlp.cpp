// torch.mlp: flatten, fully connected layers (a head over features, or a small model);
// torch.identity: flatten, no parameters (losses on precomputed embeddings, tests).
#include "catalog.hpp"
#include "model.hpp"
#include "torch_types.hpp"

namespace embedflow::torchfam {

namespace nn = torch::nn;

namespace {

class Mlp final : public ModuleModel {
 public:
  explicit Mlp(const ComponentContext& c) : ModuleModel(c) {
    const Params& p = c.params();
    in_ = p.integer("in_features");
    hidden_ = p.integers("hidden");
    dim_ = p.integer("embedding_dim");
    bn_ = p.boolean("batchnorm");
    dropout_ = p.number("dropout");
    if (in_ > 0) build(in_);
  }

 protected:
  void materialize(const torch::Tensor& sample) override {
    std::int64_t f = sample.dim() >= 2 ? sample.flatten(1).size(1) : 1;
    if (in_ > 0 && f != in_)
      throw DataError(cat(owner_, ": in_features is ", in_, " but the input has ", f, " features per row (shape ", sample.sizes(), ")"));
    if (!net_) build(f);
  }
  torch::Tensor forward(const torch::Tensor& x) override { return net_->forward(x.flatten(1)); }

 private:
  void build(std::int64_t in) {
    seed_init(0);
    nn::Sequential s;
    for (std::int64_t h : hidden_) {
      s->push_back(nn::Linear(in, h));
      if (bn_) s->push_back(nn::BatchNorm1d(h));
      s->push_back(nn::ReLU());
      if (dropout_ > 0) s->push_back(nn::Dropout(dropout_));
      in = h;
    }
    s->push_back(nn::Linear(in, dim_));
    net_ = module_->register_module("net", s);
  }
  std::int64_t in_, dim_;
  std::vector<std::int64_t> hidden_;
  bool bn_;
  double dropout_;
  nn::Sequential net_{nullptr};
};

// ---------------------------------------------------------------------------------------------
// torch.identity

class Identity final : public ModuleModel {
 public:
  using ModuleModel::ModuleModel;

 protected:
  torch::Tensor forward(const torch::Tensor& x) override { return x.dim() >= 2 ? x.flatten(1) : x.unsqueeze(1); }
};

}  // namespace

ComponentType mlp_type() {
  return model_type("torch.mlp", "Flattens its input and applies linear layers (ReLU between): a head over features, or a small model.",
                    {Param::integer("in_features").default_value(0).min(0).doc("input features per row; 0: taken from the first batch"),
                     Param::integers("hidden").default_value(std::vector<std::int64_t>{}).min(1).doc("hidden layer sizes"),
                     Param::integer("embedding_dim").default_value(64).min(1).doc("D, the output size"),
                     Param::boolean("batchnorm").default_value(false).doc("batch norm after each hidden layer"),
                     Param::number("dropout").default_value(0.0).range(0.0, 0.99).doc("dropout after each hidden layer")})
      .consumes("in", "image: f32[N,...]")
      .produces("embedding: f32[N,$embedding_dim]")
      .check([](ContractContext& c) {
        std::int64_t in = c.params().integer("in_features");
        std::int64_t given = flattened_size(c.input("in"));
        if (in > 0 && given > 0 && in != given)
          c.error(cat("in_features is ", in, " but its input rows flatten to ", given, " (", c.input("in").str(), ")"));
      })
      .create(model_factory<Mlp>());
}

ComponentType identity_type() {
  return model_type("torch.identity", "Flattens its input: no parameters (losses on precomputed embeddings).", {})
      .consumes("in", "image: any[N,...]")
      .check([](ContractContext& c) {
        std::int64_t d = flattened_size(c.input("in"));
        PortSchema out;
        out.add(embedding_field("embedding", d > 0 ? Dim{Dim::Kind::fixed, d, ""} : Dim{}));
        c.contract().produces = out;
      })
      .create(model_factory<Identity>());
}

}  // namespace embedflow::torchfam
