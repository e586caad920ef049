// The model base of the torch family (model.hpp): parameters every model takes, device choice,
// embedding, preparation at the first batch, and the ModuleModel state. Model state I/O is in
// model_state.cpp; each architecture has its own file (small_cnn.cpp, resnet.cpp, mlp.cpp,
// autoencoders.cpp, torchscript.cpp, composites.cpp).
#include <algorithm>
#include <cstdlib>

#include <filesystem>

#include "checkpoint.hpp"
#include "model.hpp"
#include "torch_types.hpp"

namespace embedflow::torchfam {

namespace nn = torch::nn;

std::vector<ParamSpec> common_model_params() {
  return {
      Param::choice("device", {"auto", "cpu", "cuda"}).default_value("auto").doc(
          "where the model runs: auto picks CUDA when LibTorch sees a GPU, else the CPU; a nested model follows "
          "the outermost one"),
      Param::boolean("normalize").default_value(false).doc("L2-normalise each embedding row"),
      Param::boolean("freeze").default_value(false).doc(
          "keep the weights fixed: no gradients, always eval mode (batch-norm statistics unchanged)"),
      Param::path("weights").default_value("").doc(
          "load weights from a torch.train checkpoint or model snapshot file after building; a checkpoint folder: "
          "its newest readable checkpoint (empty: none)"),
      Param::choice("memory_format", {"auto", "channels_last", "contiguous"}).default_value("auto").doc(
          "layout of the 4-D weights (convolution kernels): channels_last lets oneDNN convolve without reordering "
          "every input and kernel (about a third faster for torch.small_cnn on a CPU); auto: channels_last on the "
          "CPU, contiguous on CUDA. The values computed are the same up to float rounding; checkpoints and "
          "snapshots hold the same weights either way"),
  };
}

torch::Device resolve_device(const std::string& name, const std::string& owner) {
  if (name == "cpu") return torch::kCPU;
  bool cuda = torch::cuda::is_available();
  if (name == "cuda" && !cuda)
    throw ConfigError(cat(owner, ": device cuda was asked for, but LibTorch sees no CUDA device (use auto or cpu)"));
  if (!cuda) return torch::Device(torch::kCPU);
  // One GPU per process on a node: the launcher's local rank (torchrun's LOCAL_RANK, srun's
  // SLURM_LOCALID) picks the device, as DistributedDataParallel's device_ids=[local_rank] does.
  const char* local = std::getenv("LOCAL_RANK");
  if (!local || !*local) local = std::getenv("SLURM_LOCALID");
  const auto devices = static_cast<long>(torch::cuda::device_count());
  char* end = nullptr;
  const long index = local && *local ? std::strtol(local, &end, 10) : 0;
  if (local && *local && (*end || index < 0))
    throw ConfigError(cat(owner, ": the local rank '", local, "' (LOCAL_RANK or SLURM_LOCALID) is not a non-negative integer"));
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index % devices));
}

ComponentTypeBuilder model_type(const std::string& name, const std::string& doc, std::vector<ParamSpec> params) {
  ComponentTypeBuilder b(name, "model");
  b.doc(doc);
  for (auto& p : params) b.param(std::move(p));
  for (auto& p : common_model_params()) b.param(std::move(p));
  return b;
}

void expect_images(const torch::Tensor& x, std::int64_t channels, const std::string& owner) {
  if (x.dim() != 4)
    throw DataError(cat(owner, ": expects images [N,C,H,W], got a tensor of shape ", x.sizes()));
  if (channels > 0 && x.size(1) != channels)
    throw DataError(cat(owner, ": in_channels is ", channels, " but the images have ", x.size(1),
                        " channels (shape ", x.sizes(), "; u8 images are read as [N,H,W,C])"));
}

Model::Model(const ComponentContext& ctx) : seed_(ctx.seed()), owner_(ctx.owner()) {
  const Params& p = ctx.params();
  device_ = resolve_device(p.string("device"), owner_);
  normalize_ = p.boolean("normalize");
  frozen_ = p.boolean("freeze");
  weights_ = p.string("weights");
  memory_format_ = p.string("memory_format");
  channels_last_ = memory_format_ == "channels_last" || (memory_format_ == "auto" && device_.is_cpu());
}

void Model::lay_out_channels_last() {
  NamedTensors kernels;
  for (auto& [name, t] : state())
    if (t.dim() == 4) kernels.emplace_back(name, t);
  // oneDNN 2.6 (Debian's, under LibTorch 1.13) corrupts memory in the backward pass of a
  // channels-last 1x1 stride-2 convolution with 2-8 input channels: the shortcut of a narrow
  // ResNet (reproduced with PyTorch alone). The stride is not in the weights, so auto keeps any
  // model with a 1x1 kernel over fewer than 16 channels contiguous.
  for (const auto& [name, t] : kernels) {
    if (t.size(2) != 1 || t.size(3) != 1 || t.size(1) >= 16) continue;
    if (memory_format_ == "auto") {
      log_debug(owner_, "memory format: contiguous, because ", name, " is a 1x1 kernel over ", t.size(1),
                " channels (oneDNN 2.6 fails on such a convolution with stride 2 in channels-last)");
      channels_last_ = false;
      return;
    }
    log_warning(owner_, "memory_format channels_last: ", name, " is a 1x1 kernel over ", t.size(1),
                " channels; with stride 2, oneDNN 2.6 corrupts memory in its backward pass (use auto or contiguous)");
  }
  // Convolutions follow their kernel's layout (ATen picks oneDNN's channels-last path when the
  // weight is channels-last and converts the input itself), so the kernels alone are re-laid;
  // the optimizer's state, created later with zeros_like, keeps their layout. A copy with
  // explicit strides, because contiguous() keeps a one-channel kernel [O,1,kh,kw] as it is
  // (either layout describes its memory) and its convolution would stay on the slow path.
  for (auto& [name, t] : kernels) t.set_data(torch::empty_like(t, t.options(), at::MemoryFormat::ChannelsLast).copy_(t));
}

bool Model::channels_last() {
  for (const auto& [name, t] : state())
    if (t.dim() == 4 && t.suggest_memory_format() == at::MemoryFormat::ChannelsLast) return true;
  return false;
}

void Model::seed_init(std::uint64_t salt) const {
  torch::manual_seed(derive_seed(seed_, salt) & 0x7fffffffffffffffULL);
}

torch::Tensor Model::embed(const torch::Tensor& x) {
  torch::Tensor e;
  if (frozen_) {
    torch::NoGradGuard no_grad;
    e = forward(x);
  } else {
    e = forward(x);
  }
  return finish_embedding(e);
}

torch::Tensor Model::finish_embedding(torch::Tensor e) const {
  if (e.dim() != 2) e = e.flatten(1);
  if (normalize_) e = nn::functional::normalize(e, nn::functional::NormalizeFuncOptions().p(2).dim(1).eps(1e-12));
  return e;
}

TensorMap Model::forward_all(const TensorMap& inputs) {
  auto it = inputs.find("image");
  if (it == inputs.end()) throw DataError(cat(owner_, ": no 'image' input"));
  return {{"embedding", embed(it->second)}};
}

void Model::prepare(const torch::Tensor& sample) {
  if (prepared_) return;
  {
    // Probing the input must not update batch-norm statistics or record a graph.
    torch::NoGradGuard no_grad;
    train_mode(false);
    materialize(sample);
  }
  if (!weights_.empty()) {
    // A checkpoint folder means its newest readable checkpoint, so a graph can name another
    // trainer's folder ("${out}/tc1/ckpt") without knowing its last step.
    std::error_code ec;
    if (std::filesystem::is_directory(weights_, ec)) {
      const auto newest = newest_checkpoint_file(weights_);
      if (newest.empty()) throw ConfigError(cat(owner_, ": weights folder '", weights_, "' holds no checkpoint (step-N.pt)"));
      weights_ = newest.string();
    }
    torch::serialize::InputArchive archive;
    load_archive(archive, weights_, cat(owner_, ": weights '", weights_, "'"));
    read_model_state(*this, archive, weights_);
  }
  if (channels_last_) lay_out_channels_last();
  prepared_ = true;
}

std::vector<torch::Tensor> Model::trainable_parameters() {
  if (frozen_) return {};
  return parameters_for_training();
}

NamedTensors ModuleModel::state() {
  NamedTensors s;
  for (const auto& p : module_->named_parameters(true)) s.emplace_back(p.key(), p.value());
  for (const auto& b : module_->named_buffers(true)) s.emplace_back(b.key(), b.value());
  return s;
}

void set_torch_threads(std::int64_t threads, int graph_threads, const std::string& node) {
  int n = threads > 0 ? static_cast<int>(threads) : std::max(1, graph_threads);
  if (torch::get_num_threads() != n) torch::set_num_threads(n);
  log_debug(node, "LibTorch intra-op threads: ", torch::get_num_threads());
}

}  // namespace embedflow::torchfam
