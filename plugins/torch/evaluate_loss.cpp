// evaluate_loss and LossSequence (torch_types.hpp), the test and documentation hooks that run a
// loss of this family on given embeddings, with the identity as the model.
#include "bridge.hpp"
#include "catalog.hpp"
#include "loss.hpp"
#include "torch_types.hpp"

namespace embedflow::torchfam {

namespace {

// Sets the loss's learnable tensor `name` (proxies, class weights) to `value`; returns it (a leaf).
torch::Tensor set_loss_parameter(Loss& loss, const std::string& loss_name, const std::string& name, const Array& value) {
  std::string have;
  for (auto& [n, t] : loss.parameters()) {
    if (n != name) {
      have += cat(have.empty() ? "" : ", ", n);
      continue;
    }
    torch::Tensor v = to_tensor(value).to(t.scalar_type());
    if (v.sizes() != t.sizes())
      throw DataError(cat("evaluate_loss: loss.", name, " is ", v.sizes(), " but ", loss_name, " has it ", t.sizes()));
    torch::NoGradGuard no_grad;
    t.copy_(v);
    if (t.grad().defined()) t.grad().zero_();  // a LossSequence's earlier steps
    return t;
  }
  throw DataError(cat("evaluate_loss: ", loss_name, " has no learnable tensor '", name, "' (it has: ",
                      have.empty() ? "none" : have, ")"));
}

}  // namespace

struct LossSequence::Parts {
  Registry types;
  std::unique_ptr<Component> component;
  Loss* loss = nullptr;
  std::unique_ptr<Model> identity;
  std::string name;
};

LossSequence::LossSequence(const Value& spec) : parts_(std::make_unique<Parts>()) {
  register_types(parts_->types);
  parts_->component = parts_->types.instantiate(spec, 1, "evaluate_loss");
  parts_->loss = dynamic_cast<Loss*>(parts_->component.get());
  if (!parts_->loss) throw ConfigError(cat(spec.str(), " is not a loss"));
  parts_->identity = build_model(Value::map({{"type", Value::string("torch.identity")}}), 1, "evaluate_loss", parts_->types);
  const Value* type = spec.get("type");
  parts_->name = type && type->is_string() ? type->as_string() : "";
}

LossSequence::~LossSequence() = default;

double LossSequence::step(const Record& batch, Record* grads) { return run(batch, grads, false); }

double LossSequence::evaluate(const Record& batch) { return run(batch, nullptr, true); }

double LossSequence::run(const Record& batch, Record* grads, bool evaluating) {
  StepInputs in(*parts_->identity, batch, torch::kCPU, parts_->name);
  in.set_evaluating(evaluating);
  std::map<std::string, torch::Tensor> leaves;
  for (const auto& f : kImageFields)
    if (const Array* a = batch.find(f)) {
      torch::Tensor t = to_tensor(*a).to(torch::kFloat32).clone().requires_grad_(true);
      in.provide(f, t);
      leaves.emplace(f, t);
    }
  // Fields "output.<name>" stand for the model's named outputs of "image" (reconstruction, mu,
  // logvar): the autoencoder losses' formulas are tested on fixed tensors without a model.
  for (const auto& [name, array] : batch.fields())
    if (name.rfind("output.", 0) == 0) {
      torch::Tensor t = to_tensor(array).to(torch::kFloat32).clone().requires_grad_(true);
      in.provide_output("image", name.substr(7), t);
      leaves.emplace(name, t);
    }
  if (leaves.count("output.mu") && !leaves.count("output.embedding")) in.provide_output("image", "embedding", leaves.at("output.mu"));
  // Fields "loss.<name>" set the loss's learnable tensors (proxies, class weights), which are
  // leaves already: their gradients are reported like the embeddings'.
  for (const auto& [name, array] : batch.fields())
    if (name.rfind("loss.", 0) == 0)
      leaves.emplace(name, set_loss_parameter(*parts_->loss, parts_->name, name.substr(5), array));
  torch::Tensor value = parts_->loss->compute(in);
  if (grads) {
    value.backward();
    for (auto& [name, leaf] : leaves)
      grads->set(name, to_array(leaf.grad().defined() ? leaf.grad() : torch::zeros_like(leaf)));
  }
  return value.item<double>();
}

Record LossSequence::state() const {
  Record r;
  for (const auto& [name, t] : parts_->loss->state()) r.set(name, to_array(t.contiguous()));
  return r;
}

void LossSequence::load_state(const Record& state) {
  NamedTensors tensors;
  for (const auto& [name, array] : state.fields()) tensors.emplace_back(name, to_tensor(array).clone());
  parts_->loss->load_state(tensors, "evaluate_loss state");
}

double evaluate_loss(const Value& spec, const Record& batch, Record* grads) { return LossSequence(spec).step(batch, grads); }

}  // namespace embedflow::torchfam
