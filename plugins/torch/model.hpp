// The model interface of the torch family (components of kind "model", model.cpp) and the helpers
// that move model state in and out of LibTorch archives (checkpoints, snapshots, `weights` files;
// model_state.cpp).
//
// A Model turns a batch of inputs [N, ...] into embeddings [N, D]. The interface is wider than
// that so later members of the family fit without changing the trainer: forward_all returns
// named outputs (an autoencoder adds "reconstruction", a VAE "mu" and "logvar", a context
// embedding network reads worker/grid fields), and materialize() lets parts whose size depends
// on the input (an MLP over a backbone's features) be built from the first batch.
#pragma once

#include <torch/script.h>
#include <torch/torch.h>

#include <embedflow/embedflow.hpp>

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace embedflow::torchfam {

using TensorMap = std::map<std::string, torch::Tensor>;
using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

using ComponentFactory = std::function<std::unique_ptr<Component>(const ComponentContext&)>;

// device, normalize, freeze, weights, memory_format: declared by every model type.
std::vector<ParamSpec> common_model_params();
// A model component type: its own `params`, then common_model_params(). The caller adds the
// contract (what it consumes from "in", the image batch, and what it produces) and the factory:
//   model_type(...).consumes("in", "image: f32[N,$in_channels,H,W]").produces(...).create(model_factory<T>())
ComponentTypeBuilder model_type(const std::string& name, const std::string& doc, std::vector<ParamSpec> params);
template <class T>
ComponentFactory model_factory() {
  return [](const ComponentContext& c) -> std::unique_ptr<Component> { return std::make_unique<T>(c); };
}
// "auto" -> CUDA when LibTorch sees a GPU, else CPU; "cuda" without one is a ConfigError.
torch::Device resolve_device(const std::string& name, const std::string& owner);
// DataError unless x is an image batch [N,C,H,W] with `channels` channels (channels <= 0: any).
void expect_images(const torch::Tensor& x, std::int64_t channels, const std::string& owner);

class Model : public Component {
 public:
  explicit Model(const ComponentContext& ctx);

  // Embeddings [N, D] of inputs [N, ...]: L2-normalised rows when `normalize` is set; computed
  // without autograd when the model is frozen (no gradient can reach it).
  torch::Tensor embed(const torch::Tensor& x);
  // Named outputs for models that give more than an embedding. Default: {"embedding": embed(image)}.
  virtual TensorMap forward_all(const TensorMap& inputs);

  // Builds input-dependent parts from a sample batch, then loads `weights` if given and lays the
  // 4-D weights out channels-last when `memory_format` says so. Called once, on the CPU, before
  // the model is moved to its device and before an optimizer sees it.
  void prepare(const torch::Tensor& sample);
  bool prepared() const { return prepared_; }

  // What the optimizer updates: nothing when frozen.
  std::vector<torch::Tensor> trainable_parameters();
  // Every parameter and buffer under a stable name (checkpoints and snapshots).
  virtual NamedTensors state() = 0;
  // Training mode (batch norm statistics, dropout); a frozen model always stays in eval mode.
  void set_training(bool on) { train_mode(on && !frozen_); }
  virtual void to(const torch::Device& device) = 0;

  const torch::Device& device() const { return device_; }
  bool frozen() const { return frozen_; }
  // Whether any convolution kernel is laid out channels-last (this model's, or a nested one's
  // that chose it for itself).
  bool channels_last();
  void set_frozen(bool f) { frozen_ = f; }
  const std::string& owner() const { return owner_; }

 protected:
  virtual torch::Tensor forward(const torch::Tensor& x) = 0;
  virtual void materialize(const torch::Tensor& sample) { (void)sample; }
  virtual std::vector<torch::Tensor> parameters_for_training() = 0;
  virtual void train_mode(bool on) = 0;
  // An encoder's output as an embedding: flattened to [N,D], L2-normalised rows when `normalize`
  // is set (what embed() applies to forward(); forward_all overrides use it for "embedding").
  torch::Tensor finish_embedding(torch::Tensor e) const;
  // Seeds LibTorch's generator for this component's initialisation (deterministic per graph seed).
  void seed_init(std::uint64_t salt = 0) const;

  std::uint64_t seed_;
  std::string owner_;

 private:
  void lay_out_channels_last();

  torch::Device device_{torch::kCPU};
  bool normalize_ = false;
  bool frozen_ = false;
  bool prepared_ = false;
  bool channels_last_ = false;
  std::string memory_format_;
  std::string weights_;
};

// A model whose parts are one torch::nn::Module.
class ModuleModel : public Model {
 public:
  using Model::Model;
  NamedTensors state() override;
  void to(const torch::Device& device) override { module_->to(device); }

 protected:
  std::vector<torch::Tensor> parameters_for_training() override { return module_->parameters(); }
  void train_mode(bool on) override { module_->train(on); }
  std::shared_ptr<torch::nn::Module> module_ = std::make_shared<torch::nn::Module>();
};

// Model state in an archive: "names" (newline-joined) and tensors "t0", "t1", ... — positional
// keys, because module names contain dots that archive keys may not. The archive refers to the
// tensors until it is saved: save it before they change.
void write_model_state(Model& model, torch::serialize::OutputArchive& archive);
void write_state(const NamedTensors& state, torch::serialize::OutputArchive& archive);
// write_state also stores "digest": SHA-256 over each tensor's name, dtype, shape and bytes in
// order ("sha256:<hex>"), so weights that differ from the ones saved are a located error even
// where the zip's CRC-32 was rewritten to match.
// The tensors write_state wrote, in order, their digest checked (archives written before the
// digest existed have none and are checked by their zip CRCs alone).
NamedTensors read_state(torch::serialize::InputArchive& archive, const std::string& what);
// Copies the archive's tensors into the model's (by name, checking shapes); `what` names the
// file in errors. Accepts a whole checkpoint/snapshot archive (reads its "model" part) too.
void read_model_state(Model& model, torch::serialize::InputArchive& archive, const std::string& what);
// Opens a LibTorch archive after checking it (zip_integrity.hpp: every entry's CRC-32; a path
// that is a FIFO or device is refused unopened). DataError "<what>: ..." when damaged.
void load_archive(torch::serialize::InputArchive& archive, const std::filesystem::path& file, const std::string& what);
void load_archive(torch::serialize::InputArchive& archive, const void* data, std::size_t size, const std::string& what);
// A string or integer stored with OutputArchive::write(key, IValue); throws DataError if absent.
std::string read_string(torch::serialize::InputArchive& a, const std::string& key, const std::string& what);
std::int64_t read_int(torch::serialize::InputArchive& a, const std::string& key, const std::string& what);

// Model snapshot records (image/torch contract): {weights: u8[N], spec: str[1], step: i64[1], epoch: i64[1]}.
Record make_snapshot(Model& model, const std::string& spec_text, std::int64_t step, std::int64_t epoch);
// The same from a given state (the model's names with other values, e.g. a weight average).
Record make_snapshot(const NamedTensors& state, const std::string& spec_text, std::int64_t step, std::int64_t epoch);
// Builds a model from a spec through `registry` (a node's: NodeContext::registry()).
// Sets LibTorch's intra-op thread count from a node's `threads` parameter (0: the graph's
// --threads). LibTorch here starts with one thread, so every node that runs a model calls this
// in open().
void set_torch_threads(std::int64_t threads, int graph_threads, const std::string& node);

std::unique_ptr<Model> build_model(const Value& spec, std::uint64_t seed, const std::string& owner,
                                   const Registry& registry);

}  // namespace embedflow::torchfam
