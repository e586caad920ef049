// Context Embedding Networks (docs/crowd.md):
// the model class shared by the CEN translation units (cen.cpp: components; cen_score.cpp and
// cen_synth.cpp: nodes). Includes LibTorch.
//
// A CEN embeds image i as x_i in R^K and weights the K dimensions by an attribute activation a:
//   worker encoder  a^w = ReLU(Q o(w))          Q: K x W, o(w) one-hot of the worker id
//   context encoder a^g = ReLU(P s(g) + b)      P: K x N_ctx, s(g) S-hot of the grid's image ids
//                   (context_hidden H > 0: a^g = ReLU(V ReLU(P s(g) + b) + c), P: H x N_ctx)
//   a = a^w (variant worker), a^g (context) or a^w + a^g (mixture)
//   d(i, j; a) = ||a ⊙ (x_i - x_j)||_2
// Two departures from the paper, both off by default:
//   context: spread   a^g reads the spread of the grid: σ_k(g), the standard deviation of x_k over
//                     the grid's members (detached), instead of the S-hot vector:
//                     a^g = ReLU(P σ(g) + b); a linear function of S-hot(g) cannot tell whether an
//                     attribute varies inside the grid, which is what the paper says context is.
//   mixing: product   a = K softmax(z^w + z^g) with the encoders' logits z^w = Q o(w) and
//                     z^g = P log(σ(g) + 1e-3) + b (or P S-hot(g) + b): a product of experts, so
//                     an attribute constant in the grid (σ -> 0) drops out of a and the worker's
//                     next preference takes its weight; a sum can only add weight. K makes a
//                     uniform a start at 1 per dimension, as the sum's initialisation does.
//                     worker_activation / context_activation then return the logits z^w / z^g.
//   spread_units H    adds to each spread logit (before the ReLU of the sum) a learned function of
//                     that dimension alone, f_k(σ_k) = Σ_h v_kh ReLU(u_kh log(σ_k + 1e-3) + c_kh):
//                     piecewise linear in log σ_k with H bends. The simulator's workers never use
//                     an attribute the grid holds constant, and σ_k of a constant attribute sits
//                     at the embedding's within-value noise (0.01-0.07 against 0.1-0.2 when it
//                     varies): a bend lets the encoder cut such dimensions off sharply, which
//                     P log(σ) alone can only do by also exaggerating small differences between
//                     varying attributes. v starts at 0, so the encoder starts as without it;
//                     the bends start at thresholds 0.1..2 x init_std (log-spaced).
// The image encoder is an embedding table over image ids (the paper's one-hot f(o(i)); the model
// input is then the id itself, a f32 field such as crowd.grid_reader's names: ids gives) or a
// nested model component on pixels (`encoder:`, e.g. {type: torch.small_cnn, embedding_dim: 8}).
#pragma once

#include "model.hpp"

namespace embedflow::crowd {
using torchfam::Model;
using torchfam::NamedTensors;
using torchfam::TensorMap;

class CenModel final : public Model {
 public:
  explicit CenModel(const ComponentContext& c);

  // Attribute activations [B,K] for worker ids [B] and grid members [B,S] (ids of the grid's
  // images); either may be undefined when the variant does not use it. The parts are returned
  // separately too (undefined when unused).
  struct Attributes {
    torch::Tensor a, worker, context;
  };
  Attributes attributes(const torch::Tensor& worker, const torch::Tensor& members);
  // a^w [B,K] of worker ids [B] and a^g [B,K] of grid members [B,S] alone (the variant must have
  // the encoder).
  torch::Tensor worker_activation(const torch::Tensor& worker);
  torch::Tensor context_activation(const torch::Tensor& members);
  // d = ||a ⊙ (x_i - x_j)||_2 with eps inside the root (zero gradient at d = 0 would stall a
  // positive pair sitting on top of each other; the margin keeps it away anyway).
  static torch::Tensor weighted_distance(const torch::Tensor& a, const torch::Tensor& xi, const torch::Tensor& xj);

  bool uses_worker() const { return variant_ != "context"; }
  bool uses_context() const { return variant_ != "worker"; }
  bool product() const { return product_; }
  bool spread_context() const { return spread_; }
  const std::string& variant() const { return variant_; }
  std::int64_t dim() const { return k_; }
  std::int64_t workers() const { return workers_; }
  std::int64_t context_images() const { return context_images_; }
  bool has_table() const { return !encoder_; }

  NamedTensors state() override;
  void to(const torch::Device& d) override;
  // {"embedding": x} from {"image": ...}; with "worker" and/or "members" inputs also
  // "attributes", "worker_attributes", "context_attributes".
  TensorMap forward_all(const TensorMap& inputs) override;

 protected:
  torch::Tensor forward(const torch::Tensor& x) override;
  void materialize(const torch::Tensor& sample) override;
  std::vector<torch::Tensor> parameters_for_training() override;
  void train_mode(bool on) override;

 private:
  std::string variant_;
  std::int64_t k_, images_, workers_, context_images_, context_hidden_;
  std::unique_ptr<Model> encoder_;  // pixels -> x; null: the id table
  bool unique_ = true;
  bool spread_ = false, product_ = false;
  std::shared_ptr<torch::nn::Module> module_ = std::make_shared<torch::nn::Module>();
  torch::nn::Embedding table_{nullptr}, worker_{nullptr};
  torch::nn::EmbeddingBag context_{nullptr};
  torch::Tensor context_bias_;
  torch::nn::Linear context_spread_{nullptr};  // context: spread, P and b
  torch::nn::Linear context_out_{nullptr};  // context_hidden > 0: the second layer
  torch::Tensor bend_slope_, bend_offset_, bend_weight_;  // spread_units > 0: u, c, v [K,H]
};

// model.embed(x) computed once per distinct row of x and gathered back (crowd.unique).
torch::Tensor embed_unique(Model& model, const torch::Tensor& x);

// Image ids carried in a f32/f64/i64 tensor [N] or [N,1] as i64 [N], checked to be whole numbers
// in [0, n); `what` names the field in the DataError.
torch::Tensor ids_from(const torch::Tensor& t, std::int64_t n, const std::string& what);

}  // namespace embedflow::crowd
