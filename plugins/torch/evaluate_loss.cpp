// evaluate_loss (torch_types.hpp), the test and documentation hook that runs a loss of this family
// on given embeddings, with the identity as the model.
#include "bridge.hpp"
#include "catalog.hpp"
#include "loss.hpp"
#include "torch_types.hpp"

namespace embedflow::torchfam {

namespace {

torch::Tensor set_loss_parameter(Loss& loss, const Value& spec, const std::string& name, const Array& value) {
  std::string have;
  for (auto& [n, t] : loss.parameters()) {
    if (n != name) {
      have += cat(have.empty() ? "" : ", ", n);
      continue;
    }
    torch::Tensor v = to_tensor(value).to(t.scalar_type());
    if (v.sizes() != t.sizes())
      throw DataError(cat("evaluate_loss: loss.", name, " is ", v.sizes(), " but ", spec.str(), " has it ", t.sizes()));
    torch::NoGradGuard no_grad;
    t.copy_(v);
    return t;
  }
  throw DataError(cat("evaluate_loss: ", spec.str(), " has no learnable tensor '", name, "' (it has: ",
                      have.empty() ? "none" : have, ")"));
}

}  // namespace

double evaluate_loss(const Value& spec, const Record& batch, Record* grads) {
  Registry types;
  register_types(types);
  std::unique_ptr<Component> c = types.instantiate(spec, 1, "evaluate_loss");
  auto* loss = dynamic_cast<Loss*>(c.get());
  if (!loss) throw ConfigError(cat(spec.str(), " is not a loss"));
  std::unique_ptr<Model> identity = build_model(Value::map({{"type", Value::string("torch.identity")}}), 1, "evaluate_loss", types);
  const Value* type = spec.get("type");
  StepInputs in(*identity, batch, torch::kCPU, type && type->is_string() ? type->as_string() : "");
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
    if (name.rfind("loss.", 0) == 0) leaves.emplace(name, set_loss_parameter(*loss, spec, name.substr(5), array));
  torch::Tensor value = loss->compute(in);
  if (grads) {
    value.backward();
    for (auto& [name, leaf] : leaves)
      grads->set(name, to_array(leaf.grad().defined() ? leaf.grad() : torch::zeros_like(leaf)));
  }
  return value.item<double>();
}

}  // namespace embedflow::torchfam
