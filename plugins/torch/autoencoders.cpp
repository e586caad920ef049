// torch.conv_ae, torch.conv_vae: convolutional autoencoder and variational autoencoder for square
// images (the embedding is the latent, mu for the VAE); forward_all adds the reconstruction.
#include "model.hpp"
#include "torch_types.hpp"

namespace embedflow::torchfam {

namespace nn = torch::nn;

namespace {

// A convolutional autoencoder (or VAE) for square images whose side is divisible by 2^(number of
// conv blocks): 28x28 with the default two blocks. Encoder: per entry of `channels` a 3x3 stride-2
// conv and ReLU (halving the side), then linear layers to mu (and logvar for the VAE). Decoder:
// a linear layer back to the last feature map, then 4x4 stride-2 transposed convs (doubling the
// side) mirroring the encoder, and a sigmoid so reconstructions live in [0,1] like the inputs.
// forward() (the embedding) is mu: deterministic, so embeddings of one image never vary.
class ConvAutoencoder final : public ModuleModel {
 public:
  ConvAutoencoder(const ComponentContext& c, bool variational) : ModuleModel(c), variational_(variational) {
    const Params& p = c.params();
    in_ = p.integer("in_channels");
    size_ = p.integer("image_size");
    latent_ = p.integer("latent_dim");
    sigmoid_ = p.string("output") == "sigmoid";
    std::vector<std::int64_t> ch = p.integers("channels");
    if (ch.empty()) throw ConfigError(cat(owner_, ": channels needs at least one entry"));
    std::int64_t factor = std::int64_t(1) << ch.size();
    if (size_ % factor != 0)
      throw ConfigError(cat(owner_, ": image_size ", size_, " must be divisible by 2^", ch.size(), " = ", factor,
                            " (one halving per entry of channels)"));
    side_ = size_ / factor;
    last_ = ch.back();
    std::int64_t flat = last_ * side_ * side_;
    seed_init(0);
    nn::Sequential enc;
    std::int64_t c_in = in_;
    for (std::int64_t c_out : ch) {
      enc->push_back(nn::Conv2d(nn::Conv2dOptions(c_in, c_out, 3).stride(2).padding(1)));
      enc->push_back(nn::ReLU());
      c_in = c_out;
    }
    encoder_ = module_->register_module("encoder", enc);
    mu_ = module_->register_module("fc_mu", nn::Linear(flat, latent_));
    if (variational_) logvar_ = module_->register_module("fc_logvar", nn::Linear(flat, latent_));
    nn::Sequential dec;
    for (std::size_t i = ch.size(); i-- > 0;) {
      std::int64_t c_out = i == 0 ? in_ : ch[i - 1];
      dec->push_back(nn::ConvTranspose2d(nn::ConvTranspose2dOptions(ch[i], c_out, 4).stride(2).padding(1)));
      if (i != 0) dec->push_back(nn::ReLU());
    }
    expand_ = module_->register_module("fc_decode", nn::Linear(latent_, flat));
    decoder_ = module_->register_module("decoder", dec);
  }

  TensorMap forward_all(const TensorMap& inputs) override {
    auto it = inputs.find("image");
    if (it == inputs.end()) throw DataError(cat(owner_, ": no 'image' input"));
    std::unique_ptr<torch::NoGradGuard> no_grad;
    if (frozen()) no_grad = std::make_unique<torch::NoGradGuard>();
    torch::Tensor h = features(it->second);
    torch::Tensor mu = mu_->forward(h);
    TensorMap out{{"mu", mu}};
    torch::Tensor z = mu;
    if (variational_) {
      torch::Tensor logvar = logvar_->forward(h);
      out["logvar"] = logvar;
      // Reparameterisation (Kingma & Welling): z = mu + sigma * eps, eps ~ N(0, I), while training;
      // the mean in eval mode so a trained model reconstructs deterministically.
      if (module_->is_training()) z = mu + torch::randn_like(mu) * torch::exp(0.5 * logvar);
    }
    out["latent"] = z;
    out["reconstruction"] = decode(z);
    out["embedding"] = finish_embedding(mu);
    return out;
  }

 protected:
  torch::Tensor forward(const torch::Tensor& x) override { return mu_->forward(features(x)); }

 private:
  torch::Tensor features(const torch::Tensor& x) {
    expect_images(x, in_, owner_);
    if (x.size(2) != size_ || x.size(3) != size_)
      throw DataError(cat(owner_, ": image_size is ", size_, " but the images are ", x.size(2), "x", x.size(3),
                          " (shape ", x.sizes(), ")"));
    return encoder_->forward(x).flatten(1);
  }
  torch::Tensor decode(const torch::Tensor& z) {
    torch::Tensor h = torch::relu(expand_->forward(z)).view({z.size(0), last_, side_, side_});
    torch::Tensor r = decoder_->forward(h);
    return sigmoid_ ? torch::sigmoid(r) : r;
  }

  bool variational_;
  bool sigmoid_ = true;
  std::int64_t in_, size_, latent_, side_, last_;
  nn::Sequential encoder_{nullptr}, decoder_{nullptr};
  nn::Linear mu_{nullptr}, logvar_{nullptr}, expand_{nullptr};
};

std::vector<ParamSpec> autoencoder_params() {
  return {
      Param::integer("in_channels").default_value(1).min(1).doc("image channels"),
      Param::integer("image_size").default_value(28).min(2).doc(
          "side of the square input images; divisible by 2^(entries of channels), e.g. 28 with two"),
      Param::integers("channels").default_value(std::vector<std::int64_t>{32, 64}).min(1).doc(
          "output channels of each stride-2 encoder conv (the decoder mirrors them)"),
      Param::integer("latent_dim").default_value(16).min(1).doc("size of the latent (the embedding)"),
      Param::choice("output", {"sigmoid", "linear"}).default_value("sigmoid").doc(
          "sigmoid: reconstructions in [0,1] (inputs scaled to [0,1], needed for BCE); linear: none (normalised inputs)"),
  };
}

}  // namespace

ComponentType conv_ae_type() {
  return model_type("torch.conv_ae",
                    "Convolutional autoencoder: per entry of `channels` a 3x3 stride-2 conv + ReLU, a linear layer to the "
                    "latent (the embedding), and a mirrored decoder (4x4 stride-2 transposed convs, sigmoid). forward_all "
                    "outputs: embedding, mu (= latent), latent, reconstruction f32[N,C,H,W]. For torch.reconstruction.",
                    autoencoder_params())
      .consumes("in", "image: f32[N,$in_channels,$image_size,$image_size]")
      .produces("embedding: f32[N,$latent_dim], mu: f32[N,$latent_dim], latent: f32[N,$latent_dim], "
                "reconstruction: f32[N,$in_channels,$image_size,$image_size]")
      .create([](const ComponentContext& c) -> std::unique_ptr<Component> { return std::make_unique<ConvAutoencoder>(c, false); });
}

ComponentType conv_vae_type() {
  return model_type("torch.conv_vae",
                    "Convolutional variational autoencoder: torch.conv_ae's layers with two latent heads, mu and logvar; "
                    "while training the decoder sees z = mu + exp(logvar / 2) * eps (reparameterisation), in eval mode "
                    "z = mu. The embedding is mu. forward_all outputs: embedding, mu, logvar, latent (z), reconstruction. "
                    "For torch.reconstruction and torch.kl_divergence.",
                    autoencoder_params())
      .consumes("in", "image: f32[N,$in_channels,$image_size,$image_size]")
      .produces("embedding: f32[N,$latent_dim], mu: f32[N,$latent_dim], logvar: f32[N,$latent_dim], "
                "latent: f32[N,$latent_dim], reconstruction: f32[N,$in_channels,$image_size,$image_size]")
      .create([](const ComponentContext& c) -> std::unique_ptr<Component> { return std::make_unique<ConvAutoencoder>(c, true); });
}

}  // namespace embedflow::torchfam
