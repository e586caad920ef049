// The seed's combination variants:
//   torch.concat  concat(I(x), V(x)) of a backbone I and a branch V, updating only V
//                 (frozen_backbone, T_c^1), both (both, T_c^2), or V alone (branch_only, T_c^3)
//   torch.blend   a trained head over a frozen model's embeddings (T_b)
#include "catalog.hpp"
#include "model.hpp"
#include "torch_types.hpp"

namespace embedflow::torchfam {

namespace {

NamedTensors prefixed(const std::string& prefix, NamedTensors s) {
  for (auto& [n, t] : s) n = prefix + n;
  return s;
}

class Concat final : public Model {
 public:
  explicit Concat(const ComponentContext& c) : Model(c), mode_(c.params().string("mode")) {
    branch_ = c.component<Model>("branch");
    if (mode_ != "branch_only") {
      if (!c.params().has("backbone")) throw ConfigError(cat(owner_, ": mode ", mode_, " needs a `backbone` model"));
      backbone_ = c.component<Model>("backbone");
      if (mode_ == "frozen_backbone") backbone_->set_frozen(true);
    }
  }
  NamedTensors state() override {
    NamedTensors s = backbone_ ? prefixed("backbone.", backbone_->state()) : NamedTensors{};
    for (auto& e : prefixed("branch.", branch_->state())) s.push_back(std::move(e));
    return s;
  }
  void to(const torch::Device& d) override {
    if (backbone_) backbone_->to(d);
    branch_->to(d);
  }

 protected:
  torch::Tensor forward(const torch::Tensor& x) override {
    if (!backbone_) return branch_->embed(x);
    return torch::cat({backbone_->embed(x), branch_->embed(x)}, 1);
  }
  void materialize(const torch::Tensor& sample) override {
    if (backbone_) backbone_->prepare(sample);
    branch_->prepare(sample);
  }
  std::vector<torch::Tensor> parameters_for_training() override {
    std::vector<torch::Tensor> p = backbone_ ? backbone_->trainable_parameters() : std::vector<torch::Tensor>{};
    for (auto& t : branch_->trainable_parameters()) p.push_back(t);
    return p;
  }
  void train_mode(bool on) override {
    if (backbone_) backbone_->set_training(on);
    branch_->set_training(on);
  }

 private:
  std::string mode_;
  std::unique_ptr<Model> backbone_, branch_;
};

class Blend final : public Model {
 public:
  explicit Blend(const ComponentContext& c) : Model(c) {
    backbone_ = c.component<Model>("backbone");
    backbone_->set_frozen(true);
    head_ = c.component<Model>("head");
  }
  NamedTensors state() override {
    NamedTensors s = prefixed("backbone.", backbone_->state());
    for (auto& e : prefixed("head.", head_->state())) s.push_back(std::move(e));
    return s;
  }
  void to(const torch::Device& d) override {
    backbone_->to(d);
    head_->to(d);
  }

 protected:
  torch::Tensor forward(const torch::Tensor& x) override { return head_->embed(backbone_->embed(x)); }
  void materialize(const torch::Tensor& sample) override {
    backbone_->prepare(sample);
    backbone_->set_training(false);
    head_->prepare(backbone_->embed(sample));
  }
  std::vector<torch::Tensor> parameters_for_training() override { return head_->trainable_parameters(); }
  void train_mode(bool on) override {
    backbone_->set_training(false);
    head_->set_training(on);
  }

 private:
  std::unique_ptr<Model> backbone_, head_;
};

Value model_spec(const char* type, Value::Map rest = {}) {
  Value::Map m{{"type", Value::string(type)}};
  for (auto& e : rest) m.push_back(std::move(e));
  return Value::map(std::move(m));
}

}  // namespace

ComponentType concat_type() {
  return model_type("torch.concat",
                    "The seed's combination variants: embedding = concat(I(x), V(x)) with backbone I and branch V. "
                    "mode frozen_backbone (T_c^1): I frozen, only V trained; both (T_c^2): I and V trained; branch_only "
                    "(T_c^3): V alone.",
                    {Param::component("backbone", "model").optional().doc("I, e.g. {type: torch.torchscript, path: resnet50.pt}"),
                     Param::component("branch", "model").doc("V, e.g. {type: torch.resnet18, embedding_dim: 1024}"),
                     Param::choice("mode", {"frozen_backbone", "both", "branch_only"}).default_value("frozen_backbone").doc(
                         "which parts train (see above)")})
      .check([](ContractContext& c) {
        // concat(I(x), V(x)): both parts read the same images; the size is the sum of theirs.
        const ComponentContract* branch = c.part("branch");
        const ComponentContract* backbone = c.params().string("mode") == "branch_only" ? nullptr : c.part("backbone");
        Dim v = branch ? produced_dim(branch->produces) : Dim{};
        Dim d = v;
        if (backbone) {
          Dim i = produced_dim(backbone->produces);
          d = i.kind == Dim::Kind::fixed && v.kind == Dim::Kind::fixed ? Dim{Dim::Kind::fixed, i.value + v.value, ""} : Dim{};
        }
        PortSchema out;
        out.add(embedding_field("embedding", d));
        c.contract().produces = out;
      })
      .create(model_factory<Concat>());
}

ComponentType blend_type() {
  return model_type("torch.blend",
                    "A blending head B over a frozen model's embeddings (the seed's T_b): embedding = head(backbone(x)); "
                    "only the head trains. Give the backbone its trained weights with its `weights` parameter.",
                    {Param::component("backbone", "model").doc("the frozen model, e.g. a torch.concat with weights: run/ckpt/step-00001000.pt"),
                     Param::component("head", "model")
                         .default_value(model_spec("torch.mlp", {{"embedding_dim", Value::integer(128)}}))
                         .doc("the trained head over the backbone's embeddings")})
      .check([](ContractContext& c) {
        // head(backbone(x)): the head reads the backbone's embeddings as its images.
        const ComponentContract* backbone = c.part("backbone");
        PortSchema head_input = PortSchema::any();
        if (backbone && backbone->produces.find("embedding")) {
          FieldSchema e = *backbone->produces.find("embedding");
          e.name = "image";
          head_input = PortSchema();
          head_input.add(std::move(e));
        }
        const ComponentContract* head = c.part("head", {{"in", head_input}});
        PortSchema out;
        out.add(embedding_field("embedding", head ? produced_dim(head->produces) : Dim{}));
        c.contract().produces = out;
      })
      .create(model_factory<Blend>());
}

}  // namespace embedflow::torchfam
