// StepInputs, the batch view a loss computes on (loss.hpp): fields as tensors on the device, one
// forward pass per step for every image field a loss asks for, the model's named outputs. Part of
// libembedflow_torch_common, with the Loss interface (its destructor is defined here, so the
// interface's type information has one home that every family's losses share).
#include <algorithm>

#include "bridge.hpp"
#include "catalog.hpp"
#include "loss.hpp"

namespace embedflow::torchfam {

torch::Tensor image_input(const torch::Tensor& t) {
  if (t.scalar_type() == torch::kUInt8) {
    torch::Tensor x = t.dim() == 3 ? t.unsqueeze(3) : t;  // [N,H,W] grey images
    if (x.dim() == 4) x = x.permute({0, 3, 1, 2});       // HWC (OpenCV) -> CHW
    return x.contiguous().to(torch::kFloat32).div_(255.0);  // a new tensor: the record is untouched
  }
  return t.scalar_type() == torch::kFloat32 ? t : t.to(torch::kFloat32);
}

StepInputs::StepInputs(Model& model, const Record& batch, torch::Device device, std::string loss_name)
    : model_(model), record_(batch), device_(device), loss_name_(std::move(loss_name)) {}

std::int64_t StepInputs::batch_size() const { return record_.batch_size(); }

torch::Tensor StepInputs::field(const std::string& name) {
  auto it = tensors_.find(name);
  if (it != tensors_.end()) return it->second;
  const Array* a = record_.find(name);
  if (!a)
    throw DataError(cat(loss_name_.empty() ? std::string("the loss") : loss_name_, " needs the batch field '", name,
                        "', but the batch is ", record_.describe()));
  torch::Tensor t = to_tensor(*a);
  if (std::find(kImageFields.begin(), kImageFields.end(), name) != kImageFields.end()) t = image_input(t);
  // To a GPU from page-locked memory without blocking: the copy is queued on the stream the model's
  // kernels follow, so the host goes on preparing the step meanwhile.
  t = device_.is_cuda() ? t.pin_memory().to(device_, /*non_blocking=*/true) : t.to(device_);
  tensors_.emplace(name, t);
  return t;
}

void StepInputs::provide(const std::string& name, torch::Tensor t) { tensors_[name] = std::move(t); }

void StepInputs::provide_output(const std::string& field, const std::string& name, torch::Tensor t) {
  if (name == "embedding") embeddings_[field] = t;
  outputs_[field][name] = std::move(t);
}

torch::Tensor StepInputs::output(const std::string& field, const std::string& name) {
  if (!embeddings_.count(field)) embed({field});
  const TensorMap& outs = outputs_[field];
  auto it = outs.find(name);
  if (it == outs.end()) {
    std::string have;
    for (const auto& [n, t] : outs) have += cat(have.empty() ? "" : ", ", n);
    throw DataError(cat(loss_name_.empty() ? std::string("the loss") : loss_name_, " needs the model output '", name,
                        "' of '", field, "', but the model ", model_.owner(), " gives only: ", have,
                        " (reconstruction: torch.conv_ae or torch.conv_vae; mu and logvar: torch.conv_vae)"));
  }
  return it->second;
}

std::vector<torch::Tensor> StepInputs::embed(const std::vector<std::string>& fields) {
  std::vector<std::string> todo;
  for (const auto& f : fields)
    if (!embeddings_.count(f) && std::find(todo.begin(), todo.end(), f) == todo.end()) todo.push_back(f);
  if (!todo.empty()) {
    std::vector<torch::Tensor> xs;
    std::vector<std::int64_t> sizes;
    for (const auto& f : todo) {
      xs.push_back(field(f));
      sizes.push_back(xs.back().size(0));
    }
    torch::Tensor x;
    try {
      x = xs.size() == 1 ? xs.front() : torch::cat(xs, 0);
    } catch (const c10::Error&) {
      std::string shapes;
      for (std::size_t i = 0; i < todo.size(); ++i) shapes += cat(i ? ", " : "", todo[i], " ", xs[i].sizes());
      throw DataError(cat("image fields of one batch must have equal shapes past the batch dim: ", shapes));
    }
    TensorMap outs = model_.forward_all({{"image", x}});
    if (!outs.count("embedding")) throw DataError(cat(model_.owner(), ": the model's forward_all gave no 'embedding'"));
    for (const auto& [name, t] : outs) {
      if (t.dim() == 0 || t.size(0) != x.size(0)) continue;  // not per sample: cannot be split by field
      auto parts = t.split_with_sizes(sizes, 0);
      for (std::size_t i = 0; i < todo.size(); ++i) outputs_[todo[i]][name] = parts[i];
    }
    for (const auto& f : todo) embeddings_[f] = outputs_[f].at("embedding");
  }
  std::vector<torch::Tensor> out;
  for (const auto& f : fields) out.push_back(embeddings_.at(f));
  return out;
}

Loss::~Loss() = default;

}  // namespace embedflow::torchfam
