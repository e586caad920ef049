// torch.small_cnn: conv blocks (3x3 conv, batch norm, ReLU, 2x2 max pool) and an MLP head, for
// 28x28 images; the head's input size is taken from the first batch.
#include "model.hpp"
#include "torch_types.hpp"

namespace embedflow::torchfam {

namespace nn = torch::nn;

namespace {

class SmallCnn final : public ModuleModel {
 public:
  explicit SmallCnn(const ComponentContext& c) : ModuleModel(c) {
    const Params& p = c.params();
    in_ = p.integer("in_channels");
    hidden_ = p.integer("hidden");
    dim_ = p.integer("embedding_dim");
    bool bn = p.boolean("batchnorm");
    seed_init(0);
    nn::Sequential f;
    std::int64_t ch_in = in_;
    for (std::int64_t ch : p.integers("channels")) {
      f->push_back(nn::Conv2d(nn::Conv2dOptions(ch_in, ch, 3).padding(1).bias(!bn)));
      if (bn) f->push_back(nn::BatchNorm2d(ch));
      f->push_back(nn::ReLU());
      f->push_back(nn::MaxPool2d(nn::MaxPool2dOptions(2)));
      ch_in = ch;
    }
    features_ = module_->register_module("features", f);
  }

 protected:
  // The head's input size follows from the image size, known at the first batch.
  void materialize(const torch::Tensor& sample) override {
    expect_images(sample, in_, owner_);
    std::int64_t flat = features_->forward(sample).flatten(1).size(1);
    seed_init(1);
    nn::Sequential h;
    if (hidden_ > 0) {
      h->push_back(nn::Linear(flat, hidden_));
      h->push_back(nn::ReLU());
      h->push_back(nn::Linear(hidden_, dim_));
    } else {
      h->push_back(nn::Linear(flat, dim_));
    }
    head_ = module_->register_module("head", h);
  }
  torch::Tensor forward(const torch::Tensor& x) override {
    expect_images(x, in_, owner_);
    return head_->forward(features_->forward(x).flatten(1));
  }
  // Also gives the conv features the head reads ("features", f32[N, F], not normalised). The
  // loss shapes the head's output; on classes never seen in training the features before the
  // head retrieve better than the embedding, which collapses onto the training classes (the
  // projection-head effect; docs/torch.md). torch.embed's `outputs: [features]` exports them.
  TensorMap forward_all(const TensorMap& inputs) override {
    auto it = inputs.find("image");
    if (it == inputs.end()) throw DataError(cat(owner_, ": no 'image' input"));
    expect_images(it->second, in_, owner_);
    std::unique_ptr<torch::NoGradGuard> no_grad;
    if (frozen()) no_grad = std::make_unique<torch::NoGradGuard>();
    torch::Tensor f = features_->forward(it->second).flatten(1);
    return {{"embedding", finish_embedding(head_->forward(f))}, {"features", f}};
  }

 private:
  std::int64_t in_, hidden_, dim_;
  nn::Sequential features_{nullptr}, head_{nullptr};
};

}  // namespace

ComponentType small_cnn_type() {
  return model_type(
      "torch.small_cnn",
      "Small CNN for 28x28 images: per entry of `channels` a 3x3 conv (+ batch norm), ReLU and 2x2 max pool, then a "
      "hidden linear layer and the embedding layer. Input f32[N,C,H,W]; output f32[N,D]. forward_all also outputs "
      "features (the flattened conv features the head reads).",
      {Param::integer("in_channels").default_value(1).min(1).doc("image channels"),
       Param::integers("channels").default_value(std::vector<std::int64_t>{32, 64}).min(1).doc("output channels of each conv block"),
       Param::integer("hidden").default_value(128).min(0).doc("hidden units before the embedding layer; 0: none"),
       Param::integer("embedding_dim").default_value(64).min(1).doc("D, the embedding size"),
       Param::boolean("batchnorm").default_value(true).doc("batch norm after each convolution")})
      .consumes("in", "image: f32[N,$in_channels,H,W]")
      .produces("embedding: f32[N,$embedding_dim], features: f32[N,?]")
      .create(model_factory<SmallCnn>());
}

}  // namespace embedflow::torchfam
