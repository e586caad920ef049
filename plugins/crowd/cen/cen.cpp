// Context Embedding Networks: the crowd.cen and crowd.id_table models and the crowd.cen_loss
// loss (cen.hpp has the formulas; docs/crowd.md the usage), built on the torch family's model and
// loss interfaces (libembedflow_torch_common) and registered by the crowd plugin.
//
//   crowd.cen       image encoder (id table or nested model) + worker and/or context encoders
//   crowd.id_table  an embedding table over image ids alone: the siamese / triplet baselines on
//                   the same one-hot image input as the CEN
//   crowd.cen_loss  gamma l max(0, d - xi_p) + (1 - l) max(0, xi_n - d) + lambda1 ||a||_1
//                   + lambda2 (||x_i||_2 + ||x_j||_2), mean over the batch
#include "cen.hpp"

#include "bridge.hpp"
#include "catalog.hpp"
#include "loss.hpp"
#include "crowd_types.hpp"

namespace embedflow::crowd {
using namespace torchfam;

namespace nn = torch::nn;

torch::Tensor ids_from(const torch::Tensor& t, std::int64_t n, const std::string& what) {
  torch::Tensor v = t;
  if (v.dim() == 2 && v.size(1) == 1) v = v.flatten();
  if (v.dim() != 1)
    throw DataError(cat(what, ": expects image ids [N] (e.g. crowd.grid_reader names: ids), got a tensor of shape ",
                        v.sizes(), " (pixels need an `encoder` model)"));
  torch::Tensor ids = v.scalar_type() == torch::kInt64 ? v : v.round().to(torch::kInt64);
  if (ids.numel() == 0) return ids;
  if (v.scalar_type() != torch::kInt64 && !torch::equal(ids.to(v.scalar_type()), v))
    throw DataError(cat(what, ": image ids must be whole numbers"));
  const std::int64_t lo = ids.min().item<std::int64_t>(), hi = ids.max().item<std::int64_t>();
  if (lo < 0 || hi >= n)
    throw DataError(cat(what, ": image id ", lo < 0 ? lo : hi, " is outside the table of ", n,
                        " ids (0..", n - 1, "); raise `images`"));
  return ids;
}

torch::Tensor embed_unique(Model& model, const torch::Tensor& x) {
  if (x.size(0) < 2) return model.embed(x);
  // Rows of a pair batch repeat (a grid's 276 pairs show 24 images); the encoder runs once per
  // distinct image and the rows are gathered back, so gradients still sum over every pair.
  torch::Tensor flat = x.reshape({x.size(0), -1});
  auto [uniq, inverse, counts] = at::unique_dim(flat, 0, /*sorted=*/true, /*return_inverse=*/true, /*return_counts=*/false);
  if (uniq.size(0) == x.size(0)) return model.embed(x);
  std::vector<std::int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape[0] = uniq.size(0);
  return model.embed(uniq.reshape(shape)).index_select(0, inverse);
}

CenModel::CenModel(const ComponentContext& c) : Model(c) {
  const Params& p = c.params();
  variant_ = p.string("variant");
  k_ = p.integer("embedding_dim");
  images_ = p.integer("images");
  workers_ = p.integer("workers");
  context_images_ = p.integer("context_images") > 0 ? p.integer("context_images") : images_;
  context_hidden_ = p.integer("context_hidden");
  unique_ = p.boolean("unique_images");
  spread_ = p.string("context") == "spread";
  product_ = p.string("mixing") == "product";
  if (p.has("encoder")) encoder_ = c.component<Model>("encoder");
  if (spread_ && encoder_)
    throw ConfigError(cat(owner_, ": context: spread reads the members' embeddings from the id table; a pixel `encoder` has "
                                  "no pixels for the grid's members (use context: members)"));
  if (p.integer("spread_units") > 0 && !(spread_ && uses_context()))
    throw ConfigError(cat(owner_, ": spread_units shapes the spread context's logits; it needs context: spread and a variant "
                                  "with a context encoder (context or mixture)"));
  if (!encoder_ && images_ <= 0) throw ConfigError(cat(owner_, ": an id-table image encoder needs `images` > 0 (or give an `encoder` model)"));
  if (uses_worker() && workers_ <= 0) throw ConfigError(cat(owner_, ": variant ", variant_, " needs `workers` > 0"));
  if (uses_context() && context_images_ <= 0)
    throw ConfigError(cat(owner_, ": variant ", variant_, " needs `context_images` (or `images`) > 0"));
  const double init = p.number("init_std");
  seed_init();
  torch::NoGradGuard no_grad;
  if (!encoder_) {
    table_ = module_->register_module("image", nn::Embedding(images_, k_));
    table_->weight.normal_(0.0, init);
  }
  // Activations start positive (a ReLU unit that starts below 0 never learns): worker rows
  // U(0.5, 1.5); context columns U(0, 2 c / 24), so a grid of S = 24 members starts with a^g
  // near c = `context_init` in every dimension.
  // Product mixing: logits near 0, so a = K softmax(z) starts near 1 in every dimension.
  if (uses_worker()) {
    worker_ = module_->register_module("worker", nn::Embedding(workers_, k_));
    if (product_)
      worker_->weight.uniform_(0.0, 0.01);
    else
      worker_->weight.uniform_(0.5, 1.5);
  }
  if (uses_context() && spread_) {
    // P starts as the identity: at first each dimension's weight follows its own spread.
    context_spread_ = module_->register_module("context_spread", nn::Linear(k_, k_));
    context_spread_->weight.copy_(torch::eye(k_));
    context_spread_->bias.fill_(product_ ? 0.0 : p.number("context_init"));
    if (const std::int64_t h = p.integer("spread_units"); h > 0) {
      // Each unit starts as a hinge below a threshold t (u = -1, c = log t: ReLU(log t - log σ)),
      // the thresholds log-spaced over 0.1..2 x init_std, the scale σ starts at: a hinge below
      // every σ would get no gradient. With the graph's init_std 0.1 that is 0.01..0.2, the range
      // between a constant attribute's within-value noise and a varying attribute's spread.
      const double s0 = p.number("init_std") > 0 ? p.number("init_std") : 0.1;
      torch::Tensor t = torch::logspace(std::log10(0.1 * s0), std::log10(2 * s0), h).repeat({k_, 1});
      bend_slope_ = module_->register_parameter("context_bend_slope", -torch::ones({k_, h}));
      bend_offset_ = module_->register_parameter("context_bend_offset", torch::log(t));
      bend_weight_ = module_->register_parameter("context_bend_weight", torch::zeros({k_, h}));
    }
  } else if (uses_context()) {
    const std::int64_t h = context_hidden_ > 0 ? context_hidden_ : k_;
    const double context_init = p.number("context_init");
    context_ = module_->register_module(
        "context", nn::EmbeddingBag(nn::EmbeddingBagOptions(context_images_, h).mode(torch::kSum)));
    context_bias_ = module_->register_parameter("context_bias", torch::zeros({h}));
    if (context_hidden_ > 0) {
      // Hidden units see signed sums (they can learn "some member has value v"); the output
      // layer starts positive so a^g starts near 1.
      context_->weight.normal_(0.0, 1.0 / 24.0);
      context_out_ = module_->register_module("context_out", nn::Linear(h, k_));
      context_out_->bias.fill_(context_init);
    } else {
      context_->weight.uniform_(0.0, 2.0 * context_init / 24.0);
    }
  }
}

torch::Tensor CenModel::worker_activation(const torch::Tensor& worker) {
  if (!uses_worker()) throw DataError(cat(owner_, ": variant ", variant_, " has no worker encoder"));
  torch::Tensor w = worker.flatten().to(torch::kInt64);
  if (w.numel() > 0) {
    const std::int64_t lo = w.min().item<std::int64_t>(), hi = w.max().item<std::int64_t>();
    if (lo < 0 || hi >= workers_)
      throw DataError(cat(owner_, ": worker id ", lo < 0 ? lo : hi, " is outside 0..", workers_ - 1, "; raise `workers`"));
  }
  return product_ ? worker_(w) : torch::relu(worker_(w));
}

torch::Tensor CenModel::context_activation(const torch::Tensor& members) {
  if (!uses_context()) throw DataError(cat(owner_, ": variant ", variant_, " has no context encoder"));
  torch::Tensor m = members.to(torch::kInt64);
  if (m.dim() != 2) throw DataError(cat(owner_, ": members must be [B,S], got ", m.sizes()));
  if (m.numel() > 0) {
    const std::int64_t lo = m.min().item<std::int64_t>(), hi = m.max().item<std::int64_t>();
    // The spread context looks the members up in the image table; the S-hot one in its own.
    const std::int64_t n = spread_ ? images_ : context_images_;
    if (lo < 0 || hi >= n)
      throw DataError(cat(owner_, ": grid member id ", lo < 0 ? lo : hi, " is outside ", spread_ ? "the image table" : "the S-hot vector",
                          " 0..", n - 1, spread_ ? "; raise `images`" : "; raise `context_images` or `images`"));
  }
  if (spread_) {
    // The grid's spread per dimension, read from the embedding without moving it (letting the
    // context loss shrink or stretch x was worse in trials: docs/crowd.md).
    torch::Tensor sigma = table_(m).detach().std(1, /*unbiased=*/false);
    const torch::Tensor log_sigma = torch::log(sigma + 1e-3);
    torch::Tensor z = context_spread_(product_ ? log_sigma : sigma);
    if (bend_weight_.defined())
      z = z + (torch::relu(log_sigma.unsqueeze(2) * bend_slope_ + bend_offset_) * bend_weight_).sum(2);  // [B,K,H] -> [B,K]
    return product_ ? z : torch::relu(z);
  }
  torch::Tensor z = context_(m) + context_bias_;
  if (context_out_) z = context_out_(torch::relu(z));
  return product_ ? z : torch::relu(z);
}

CenModel::Attributes CenModel::attributes(const torch::Tensor& worker, const torch::Tensor& members) {
  Attributes r;
  if (uses_worker()) {
    if (!worker.defined()) throw DataError(cat(owner_, ": variant ", variant_, " needs the batch field 'worker'"));
    r.worker = worker_activation(worker);
  }
  if (uses_context()) {
    if (!members.defined())
      throw DataError(cat(owner_, ": variant ", variant_, " needs the batch field 'members' i64[B,S] (crowd.grid_reader with_members: true)"));
    r.context = context_activation(members);
  }
  r.a = r.worker.defined() && r.context.defined() ? r.worker + r.context : r.worker.defined() ? r.worker : r.context;
  // Product of experts: the summed logits become a distribution over the K dimensions.
  if (product_) r.a = static_cast<double>(k_) * torch::softmax(r.a, 1);
  return r;
}

torch::Tensor CenModel::weighted_distance(const torch::Tensor& a, const torch::Tensor& xi, const torch::Tensor& xj) {
  return torch::sqrt((a * (xi - xj)).pow(2).sum(1) + 1e-12);
}

torch::Tensor CenModel::forward(const torch::Tensor& x) {
  if (encoder_) return unique_ ? embed_unique(*encoder_, x) : encoder_->embed(x);
  return table_(ids_from(x, images_, owner_));
}

void CenModel::materialize(const torch::Tensor& sample) {
  if (encoder_) encoder_->prepare(sample);
}

TensorMap CenModel::forward_all(const TensorMap& inputs) {
  TensorMap out;
  auto it = inputs.find("image");
  if (it != inputs.end()) out["embedding"] = embed(it->second);
  auto w = inputs.find("worker");
  auto m = inputs.find("members");
  if (w != inputs.end() || m != inputs.end()) {
    Attributes a = attributes(w != inputs.end() ? w->second : torch::Tensor(), m != inputs.end() ? m->second : torch::Tensor());
    out["attributes"] = a.a;
    if (a.worker.defined()) out["worker_attributes"] = a.worker;
    if (a.context.defined()) out["context_attributes"] = a.context;
  }
  return out;
}

NamedTensors CenModel::state() {
  NamedTensors s;
  for (const auto& p : module_->named_parameters(true)) s.emplace_back(p.key(), p.value());
  if (encoder_)
    for (auto& [name, t] : encoder_->state()) s.emplace_back("encoder." + name, t);
  return s;
}

void CenModel::to(const torch::Device& d) {
  module_->to(d);
  // Handles held outside the module are read back from it after the move.
  if (context_bias_.defined()) context_bias_ = module_->named_parameters()["context_bias"];
  if (bend_weight_.defined()) {
    auto named = module_->named_parameters();
    bend_slope_ = named["context_bend_slope"];
    bend_offset_ = named["context_bend_offset"];
    bend_weight_ = named["context_bend_weight"];
  }
  if (encoder_) encoder_->to(d);
}

std::vector<torch::Tensor> CenModel::parameters_for_training() {
  std::vector<torch::Tensor> p = module_->parameters();
  if (encoder_)
    for (auto& t : encoder_->trainable_parameters()) p.push_back(t);
  return p;
}

void CenModel::train_mode(bool on) {
  module_->train(on);
  if (encoder_) encoder_->set_training(on);
}

namespace {

// ---------------------------------------------------------------------------------------------
// crowd.id_table

class IdTable final : public ModuleModel {
 public:
  explicit IdTable(const ComponentContext& c) : ModuleModel(c), n_(c.params().integer("images")) {
    seed_init();
    table_ = module_->register_module("image", nn::Embedding(n_, c.params().integer("embedding_dim")));
    torch::NoGradGuard no_grad;
    table_->weight.normal_(0.0, c.params().number("init_std"));
  }

 protected:
  torch::Tensor forward(const torch::Tensor& x) override { return table_(ids_from(x, n_, owner_)); }

 private:
  std::int64_t n_;
  nn::Embedding table_{nullptr};
};

// ---------------------------------------------------------------------------------------------
// crowd.unique

class Unique final : public Model {
 public:
  explicit Unique(const ComponentContext& c) : Model(c) { inner_ = c.component<Model>("model"); }
  // Transparent: the wrapped model's own state names, so its checkpoints load either way.
  NamedTensors state() override { return inner_->state(); }
  void to(const torch::Device& d) override { inner_->to(d); }

 protected:
  torch::Tensor forward(const torch::Tensor& x) override { return embed_unique(*inner_, x); }
  void materialize(const torch::Tensor& sample) override { inner_->prepare(sample); }
  std::vector<torch::Tensor> parameters_for_training() override { return inner_->trainable_parameters(); }
  void train_mode(bool on) override { inner_->set_training(on); }

 private:
  std::unique_ptr<Model> inner_;
};

// ---------------------------------------------------------------------------------------------
// crowd.cen_loss

class CenLoss final : public Loss {
 public:
  explicit CenLoss(const ComponentContext& c)
      : xi_p_(c.params().number("positive_margin")), xi_n_(c.params().number("negative_margin")),
        gamma_(c.params().number("positive_weight")), l1_(c.params().number("l1")), l2_(c.params().number("l2")) {
    if (xi_p_ >= xi_n_) throw ConfigError(cat(c.owner(), ": positive_margin must be below negative_margin"));
  }
  torch::Tensor compute(StepInputs& in) override {
    auto* cen = dynamic_cast<CenModel*>(&in.model());
    if (!cen)
      throw DataError(cat("crowd.cen_loss needs a crowd.cen model (it weights distances by the model's attribute "
                          "encoders), but the model is ", in.model().owner()));
    auto x = in.embed({"a_image", "b_image"});
    CenModel::Attributes a = cen->attributes(cen->uses_worker() ? in.field("worker") : torch::Tensor(),
                                             cen->uses_context() ? in.field("members") : torch::Tensor());
    torch::Tensor l = in.field("pair_label").flatten().to(torch::kFloat32);
    return formula(a.a, x[0], x[1], l);
  }
  torch::Tensor formula(const torch::Tensor& a, const torch::Tensor& xi, const torch::Tensor& xj, const torch::Tensor& l) const {
    torch::Tensor d = CenModel::weighted_distance(a, xi, xj);
    torch::Tensor per = gamma_ * l * torch::relu(d - xi_p_) + (1 - l) * torch::relu(xi_n_ - d) +
                        l1_ * a.abs().sum(1) + l2_ * (xi.norm(2, 1) + xj.norm(2, 1));
    return per.mean();
  }

 private:
  double xi_p_, xi_n_, gamma_, l1_, l2_;
};

std::vector<ParamSpec> image_table_params() {
  return {Param::integer("embedding_dim").default_value(8).min(1).doc("K, the embedding size (one dimension per attribute, ideally)"),
          Param::number("init_std").default_value(0.5).min(0.0).doc("standard deviation of the table's normal initialisation")};
}

}  // namespace

ComponentType cen_type() {
  std::vector<ParamSpec> cen = image_table_params();
  cen.push_back(Param::choice("variant", {"worker", "context", "mixture"}).default_value("mixture").doc(
      "which attribute encoder weights the distance: worker a^w, context a^g, or mixture a^w + a^g"));
  cen.push_back(Param::integer("images").default_value(0).min(0).doc(
      "image ids 0..images-1 of the id-table image encoder (and of the S-hot context vector); 0 with an `encoder`"));
  cen.push_back(Param::integer("workers").default_value(0).min(0).doc("worker ids 0..workers-1 (one-hot input of a^w)"));
  cen.push_back(Param::integer("context_images").default_value(0).min(0).doc(
      "length of the S-hot grid vector (image ids of grid members); 0: `images`"));
  cen.push_back(Param::number("context_init").default_value(1.0).min(0.0).doc(
      "mean initial a^g per dimension for a grid of 24 images (a^w starts near 1); smaller lets the worker encoder lead "
      "early in training"));
  cen.push_back(Param::integer("context_hidden").default_value(0).min(0).doc(
      "0: a^g = ReLU(P Shot(g) + b), the paper's equation; H > 0: a two-layer context encoder with H hidden ReLU units "
      "(a linear function of the S-hot vector cannot tell whether an attribute varies inside the grid; a hidden layer can)"));
  cen.push_back(Param::choice("context", {"members", "spread"}).default_value("members").doc(
      "what the context encoder reads: members, the S-hot vector of the grid's image ids (the paper); spread, the "
      "standard deviation of each embedding dimension over the grid's members (needs the id table)"));
  cen.push_back(Param::integer("spread_units").default_value(0).min(0).doc(
      "context: spread only; H > 0 adds to each dimension's context logit a learned piecewise-linear function of its "
      "own log spread with H bends, so a dimension the grid holds constant can be cut off sharply (docs/crowd.md)"));
  cen.push_back(Param::choice("mixing", {"sum", "product"}).default_value("sum").doc(
      "how the encoders make a: sum, ReLU activations added (the paper); product, a = K softmax(z^w + z^g) of the "
      "encoders' logits, so a grid's constant attributes drop out and the worker's next preference takes their weight"));
  cen.push_back(Param::boolean("unique_images").default_value(true).doc(
      "with an encoder: run it once per distinct image of a batch (batches of whole submissions, crowd.grid_reader "
      "shuffle_unit: submission, repeat each image ~23 times)"));
  cen.push_back(Param::component("encoder", "model").optional().doc(
      "image encoder on pixels instead of the id table, e.g. {type: torch.small_cnn, in_channels: 3, embedding_dim: 8} "
      "(its embedding_dim must equal this one)"));
  return model_type("crowd.cen",
                    "Context Embedding Network (docs/crowd.md): image embeddings x_i (an id table, or `encoder` on "
                    "pixels) and attribute activations a = ReLU(Q onehot(w)) (worker), ReLU(P Shot(g) + b) (context) "
                    "or their sum (mixture), for d = ||a * (x_i - x_j)||. Model input: the image field (ids as f32 "
                    "for the table); crowd.cen_loss also reads worker and members. Train with crowd.cen_loss, "
                    "score with crowd.cen_score.",
                    std::move(cen))
      .produces("embedding: f32[N,$embedding_dim]")
      .create(model_factory<CenModel>());
}

ComponentType id_table_type() {
  std::vector<ParamSpec> table = image_table_params();
  table.push_back(Param::integer("images").min(1).doc("image ids 0..images-1"));
  return model_type("crowd.id_table",
                    "An embedding table over image ids (the CEN's one-hot image encoder alone): input f32/i64 ids [N] "
                    "(crowd.grid_reader names: ids), output f32[N,K]. The siamese and triplet baselines of docs/crowd.md.",
                    std::move(table))
      .produces("embedding: f32[N,$embedding_dim]")
      .create(model_factory<IdTable>());
}

ComponentType unique_type() {
  return model_type("crowd.unique",
                    "Runs `model` once per distinct input row of a batch and gathers the rows back: the same embeddings "
                    "and gradients, ~20x cheaper on pair batches of whole submissions (a pixel siamese or triplet "
                    "baseline beside a crowd.cen with an encoder).",
                    {Param::component("model", "model").doc("the wrapped model, e.g. {type: torch.small_cnn, in_channels: 3}")})
      .check([](ContractContext& c) {
        if (const ComponentContract* inner = c.part("model")) c.contract().produces = inner->produces;
      })
      .create(model_factory<Unique>());
}

ComponentType cen_loss_type() {
  return ComponentTypeBuilder("crowd.cen_loss", "loss")
      .doc("The CEN loss on crowd pair batches (a_image, b_image, pair_label, worker, members; docs/crowd.md): "
           "gamma l max(0, d - xi_p) + (1 - l) max(0, xi_n - d) + l1 ||a||_1 + l2 (||x_i|| + ||x_j||), d = "
           "||a * (x_i - x_j)||, mean over the batch. Needs a crowd.cen model.")
      .param(Param::number("positive_margin").default_value(0.1).min(0.0).doc("xi_p: similar pairs closer than this cost nothing"))
      .param(Param::number("negative_margin").default_value(1.0).min(0.0).doc("xi_n: dissimilar pairs farther than this cost nothing"))
      .param(Param::number("positive_weight").default_value(1.0).min(0.0).doc("gamma, the weight of the similar-pair term"))
      .param(Param::number("l1").default_value(0.001).min(0.0).doc("lambda1, the L1 penalty on the attribute activation a"))
      .param(Param::number("l2").default_value(0.001).min(0.0).doc("lambda2, the L2 penalty on each image embedding"))
      .create<CenLoss>();
}

double evaluate_cen_loss(const Value& spec, const Record& batch) {
  static const Registry registry = [] {
    Registry r;
    r.add(cen_loss_type());
    return r;
  }();
  std::unique_ptr<Component> c = registry.instantiate(spec, 1, "evaluate_cen_loss");
  auto* loss = dynamic_cast<CenLoss*>(c.get());
  if (!loss) throw ConfigError(cat("evaluate_cen_loss: ", spec.str(), " is not crowd.cen_loss"));
  torch::NoGradGuard no_grad;
  auto f = [&](const char* name) { return to_tensor(batch.get(name)).to(torch::kFloat32); };
  return loss->formula(f("attributes"), f("x_a"), f("x_b"), f("pair_label").flatten()).item<double>();
}

}  // namespace embedflow::crowd
