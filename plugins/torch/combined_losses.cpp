// torch.sum, a weighted sum of up to four losses sharing one forward pass per step, and
// torch.l2_embedding, the embedding-norm regulariser usually added to another loss through it.
#include "catalog.hpp"
#include "loss_formulas.hpp"
#include "torch_types.hpp"

namespace embedflow::torchfam {
namespace {

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

class Sum final : public Loss {
 public:
  explicit Sum(const ComponentContext& c) {
    for (const char* slot : {"a", "b", "c", "d"})
      if (c.params().has(slot)) {
        terms_.push_back(c.component<Loss>(slot));
        slots_.emplace_back(slot);
      }
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
  // Each term's state under its slot's name: "a.embeddings", ...
  NamedTensors state() const override {
    NamedTensors all;
    for (std::size_t i = 0; i < terms_.size(); ++i)
      for (auto& [name, t] : terms_[i]->state()) all.emplace_back(cat(slots_[i], ".", name), t);
    return all;
  }
  void load_state(const NamedTensors& state, const std::string& what) override {
    for (std::size_t i = 0; i < terms_.size(); ++i) {
      const std::string prefix = cat(slots_[i], ".");
      NamedTensors mine;
      for (const auto& [name, t] : state)
        if (name.rfind(prefix, 0) == 0) mine.emplace_back(name.substr(prefix.size()), t);
      terms_[i]->load_state(mine, what);
    }
  }
  // The terms' learnable tensors, named after their slot ("a.proxies"), so they train too.
  NamedTensors parameters() override {
    NamedTensors all;
    for (std::size_t i = 0; i < terms_.size(); ++i)
      for (auto& [name, t] : terms_[i]->parameters()) all.emplace_back(cat(slots_[i], ".", name), t);
    return all;
  }
  void to(const torch::Device& device) override {
    for (auto& t : terms_) t->to(device);
  }

 private:
  std::vector<std::unique_ptr<Loss>> terms_;
  std::vector<std::string> slots_;  // each term's parameter name (a..d)
  std::vector<double> weights_;
};

}  // namespace

ComponentType l2_embedding_type() {
  return ComponentTypeBuilder("torch.l2_embedding", "loss")
      .doc("L2 embedding regulariser: weight * mean ||f(x)||^2 over the embeddings of the step (every image "
           "field of the batch). Combine it with any loss through torch.sum.")
      .param(Param::number("weight").default_value(1e-3).min(0.0).doc("regulariser weight"))
      .consumes("outputs", "embedding: f32[N,D]")
      .create<L2Embedding>();
}

ComponentType sum_type() {
  return ComponentTypeBuilder("torch.sum", "loss")
      .doc("Weighted sum of up to four losses sharing one forward pass per step, e.g. "
           "{type: torch.sum, a: {type: torch.contrastive}, b: {type: torch.l2_embedding, weight: 0.001}}.")
      .param(Param::component("a", "loss").doc("first term"))
      .param(Param::component("b", "loss").optional().doc("second term"))
      .param(Param::component("c", "loss").optional().doc("third term"))
      .param(Param::component("d", "loss").optional().doc("fourth term"))
      .param(Param::numbers("weights").default_value(std::vector<double>{}).doc("weight of each term in order; missing ones are 1"))
      .check([](ContractContext& c) {
        // Each term checks what it reads against the same batch and model outputs.
        for (const char* term : {"a", "b", "c", "d"}) c.part(term);
      })
      .create<Sum>();
}

}  // namespace embedflow::torchfam
