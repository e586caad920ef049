// Autoencoder terms, on the model's named outputs (torch.conv_ae, torch.conv_vae):
//   torch.reconstruction   MSE or BCE between each image field and its "reconstruction"
//   torch.kl_divergence    beta KL(N(mu, exp(logvar)) || N(0, I)) from "mu" and "logvar"
#include "catalog.hpp"
#include "loss_formulas.hpp"
#include "torch_types.hpp"

namespace embedflow::torchfam {
namespace {

namespace F = torch::nn::functional;

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

// Both losses' check: every name in param `fields` is a field of the batch.
void check_fields_in_batch(ContractContext& c) {
  const PortSchema& batch = c.input("batch");
  if (batch.is_any()) return;
  for (const auto& f : c.params().strings("fields"))
    if (!batch.find(f)) c.error(cat("fields names '", f, "', which the batch lacks (batch: ", batch.str(), ")"));
}

}  // namespace

ComponentType reconstruction_type() {
  return ComponentTypeBuilder("torch.reconstruction", "loss")
      .doc("Reconstruction error of an autoencoder (torch.conv_ae, torch.conv_vae): the model's 'reconstruction' "
           "output against each image field. error mse: (r - x)^2; bce: -(x log r + (1-x) log(1-r)) (log clamped "
           "at -100 as PyTorch; targets in [0,1]). reduction mean: mean over all pixels (F.mse_loss's default); "
           "sum: summed over each image's pixels, mean over images (the VAE's scale, comparable with the KL term).")
      .param(Param::choice("error", {"mse", "bce"}).default_value("mse").doc("squared error or binary cross-entropy"))
      .param(Param::choice("reduction", {"mean", "sum"}).default_value("mean").doc(
          "mean: per pixel; sum: per image (pixels summed), mean over images"))
      .param(Param::strings("fields").default_value(std::vector<std::string>{}).doc(
          "image fields to reconstruct; empty: every image field of the batch"))
      .consumes("outputs", "reconstruction: f32[N,...]")
      .check(check_fields_in_batch)
      .create<Reconstruction>();
}

ComponentType kl_divergence_type() {
  return ComponentTypeBuilder("torch.kl_divergence", "loss")
      .doc("beta * KL(q(z|x) || N(0, I)) of a VAE (torch.conv_vae's mu and logvar outputs), closed form "
           "-1/2 sum_j (1 + logvar_j - mu_j^2 - exp(logvar_j)) summed over the latent, mean over images. "
           "Pair it with torch.reconstruction (reduction: sum) in a torch.sum.")
      .param(Param::number("beta").default_value(1.0).min(0.0).doc("beta, the weight of the KL term (beta-VAE)"))
      .param(Param::strings("fields").default_value(std::vector<std::string>{}).doc(
          "image fields whose latents are regularised; empty: every image field of the batch"))
      .consumes("outputs", "mu: f32[N,...], logvar: f32[N,...]")
      .check(check_fields_in_batch)
      .create<KlDivergence>();
}

}  // namespace embedflow::torchfam
