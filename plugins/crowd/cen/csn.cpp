// crowd.csn (model) and crowd.csn_loss (loss): the Conditional Similarity Network baseline
// (csn.hpp has the model; docs/crowd.md the usage), on the torch family's model and loss
// interfaces like crowd.cen.
//
//   crowd.csn       x_i from an id table, masks m_c = ReLU(β_c), β ~ N(0.9, 0.7^2) at the start
//                   (the CSN authors' learned-mask initialisation)
//   crowd.csn_loss  mean_t max(0, d(a, p; c) - d(a, n; c) + h)
//                   + λ_e (||X_a||_F + ||X_p||_F + ||X_n||_F) / sqrt(B)     (embedding norm)
//                   + λ_m 3 mean_t ||m_{c_t}||_1                            (mask sparsity)
//                   over a batch of B triplets (a, p, n) with conditions c: the CSN authors'
//                   loss (their code: margin 0.2, λ_e 5e-3, λ_m 5e-4, the defaults here)
#include "csn.hpp"

#include "bridge.hpp"
#include "cen.hpp"
#include "crowd_types.hpp"
#include "loss.hpp"

namespace embedflow::crowd {
using namespace torchfam;
namespace nn = torch::nn;

CsnModel::CsnModel(const ComponentContext& c)
    : ModuleModel(c), images_(c.params().integer("images")), conditions_(c.params().integer("conditions")) {
  const std::int64_t k = c.params().integer("embedding_dim");
  seed_init();
  table_ = module_->register_module("image", nn::Embedding(images_, k));
  mask_ = module_->register_module("mask", nn::Embedding(conditions_, k));
  torch::NoGradGuard no_grad;
  table_->weight.normal_(0.0, c.params().number("init_std"));
  mask_->weight.normal_(c.params().number("mask_init_mean"), c.params().number("mask_init_std"));
}

torch::Tensor CsnModel::forward(const torch::Tensor& x) { return table_(ids_from(x, images_, owner_)); }

torch::Tensor CsnModel::masks(const torch::Tensor& condition) {
  torch::Tensor c = condition.flatten().to(torch::kInt64);
  if (c.numel() > 0) {
    const std::int64_t lo = c.min().item<std::int64_t>(), hi = c.max().item<std::int64_t>();
    if (lo < -1 || hi >= conditions_)
      throw DataError(cat(owner_, ": condition ", lo < -1 ? lo : hi, " is outside -1..", conditions_ - 1, " (raise `conditions`)"));
  }
  torch::Tensor all = torch::relu(mask_->weight);                           // [C,K]
  torch::Tensor table = torch::cat({all, all.mean(0, true)}, 0);            // row C: the mean mask
  return table.index_select(0, torch::where(c < 0, torch::full_like(c, conditions_), c));
}

namespace {

class CsnLoss final : public Loss {
 public:
  explicit CsnLoss(const ComponentContext& c)
      : margin_(c.params().number("margin")), embed_(c.params().number("embedding_norm")), mask_(c.params().number("mask_l1")) {}
  torch::Tensor compute(StepInputs& in) override {
    auto* csn = dynamic_cast<CsnModel*>(&in.model());
    if (!csn)
      throw DataError(cat("crowd.csn_loss needs a crowd.csn model (it masks distances by the triplet's condition), but the "
                          "model is ", in.model().owner()));
    auto x = in.embed({"anchor_image", "positive_image", "negative_image"});
    return formula(csn->masks(in.field("condition")), x[0], x[1], x[2]);
  }
  torch::Tensor formula(const torch::Tensor& m, const torch::Tensor& a, const torch::Tensor& p, const torch::Tensor& n) const {
    const double root_b = std::sqrt(static_cast<double>(a.size(0)));
    torch::Tensor triplet = torch::relu(CenModel::weighted_distance(m, a, p) - CenModel::weighted_distance(m, a, n) + margin_).mean();
    torch::Tensor norms = (a.norm() + p.norm() + n.norm()) / root_b;
    return triplet + embed_ * norms + mask_ * 3.0 * m.abs().sum(1).mean();
  }

 private:
  double margin_, embed_, mask_;
};

}  // namespace

ComponentType csn_type() {
  return model_type("crowd.csn",
                    "Conditional Similarity Network (docs/crowd.md): image embeddings x_i from an id table and one learnt "
                    "mask m_c = ReLU(beta_c) per known condition (attribute), d(i, j; c) = ||m_c * (x_i - x_j)||. The CEN "
                    "paper's baseline that is told each submission's attribute. Train with crowd.csn_loss on crowd.triplets "
                    "with `truth`; score with crowd.cen_score with `truth`.",
                    {Param::integer("images").min(1).doc("image ids 0..images-1"),
                     Param::integer("conditions").min(1).doc("conditions (attributes) 0..conditions-1, one mask each"),
                     Param::integer("embedding_dim").default_value(8).min(1).doc("K, the embedding size"),
                     Param::number("init_std").default_value(0.1).min(0.0).doc("standard deviation of the table's normal initialisation"),
                     Param::number("mask_init_mean").default_value(0.9).doc("mean of the masks' normal initialisation (before the ReLU)"),
                     Param::number("mask_init_std").default_value(0.7).min(0.0).doc("its standard deviation")})
      .produces("embedding: f32[N,$embedding_dim]")
      .create(model_factory<CsnModel>());
}

ComponentType csn_loss_type() {
  return ComponentTypeBuilder("crowd.csn_loss", "loss")
      .doc("The Conditional Similarity Network loss on triplets with conditions (anchor_image, positive_image, "
           "negative_image, condition): mean max(0, d(a,p;c) - d(a,n;c) + margin) + embedding_norm (||X_a|| + ||X_p|| + "
           "||X_n||) / sqrt(B) + mask_l1 3 mean ||m_c||_1, d(i,j;c) = ||m_c * (x_i - x_j)||. Needs a crowd.csn model.")
      .param(Param::number("margin").default_value(0.2).min(0.0).doc("h, the triplet margin"))
      .param(Param::number("embedding_norm").default_value(5e-3).min(0.0).doc("lambda_e, the weight of the embeddings' norm"))
      .param(Param::number("mask_l1").default_value(5e-4).min(0.0).doc("lambda_m, the weight of the masks' L1 norm"))
      .consumes("batch", "anchor_image: any[N,...], positive_image: any[N,...], negative_image: any[N,...], condition: i64[N]")
      .consumes("outputs", "embedding: f32[N,D]")
      .create<CsnLoss>();
}

double evaluate_csn_loss(const Value& spec, const Record& batch) {
  static const Registry registry = [] {
    Registry r;
    r.add(csn_loss_type());
    return r;
  }();
  std::unique_ptr<Component> c = registry.instantiate(spec, 1, "evaluate_csn_loss");
  auto* loss = dynamic_cast<CsnLoss*>(c.get());
  if (!loss) throw ConfigError(cat("evaluate_csn_loss: ", spec.str(), " is not crowd.csn_loss"));
  torch::NoGradGuard no_grad;
  auto f = [&](const char* name) { return to_tensor(batch.get(name)).to(torch::kFloat32); };
  return loss->formula(f("masks"), f("x_a"), f("x_p"), f("x_n")).item<double>();
}

}  // namespace embedflow::crowd
