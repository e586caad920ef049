// Model components (kind "model") and model state I/O.
//
//   torch.small_cnn   conv blocks (3x3 conv, batch norm, ReLU, 2x2 max pool) + MLP head; for 28x28
//   torch.resnet18    ResNet-18 / ResNet-50 defined here (torchvision's layer names and init),
//   torch.resnet50    configurable in_channels, width, stem and embedding_dim
//   torch.mlp         flatten + fully connected layers (a head over features or a small model)
//   torch.identity    flatten; no parameters (losses on precomputed embeddings, tests)
//   torch.torchscript a user's TorchScript .pt backbone (torch.jit.script/trace + save)
//   torch.concat      the seed's combination variants: concat(I(x), V(x)) updating only V
//                     (frozen_backbone, T_c^1), updating both (both, T_c^2), or V alone
//                     (branch_only, T_c^3)
//   torch.blend       a trained head over a frozen model's embeddings (the seed's T_b)
// Every model also takes device, normalize (L2 rows), freeze and weights (model.hpp).
#include <algorithm>
#include <sstream>

#include "bridge.hpp"
#include "catalog.hpp"
#include "model.hpp"
#include "torch_family.hpp"

namespace embedflow::torchfam {

namespace nn = torch::nn;

// ---------------------------------------------------------------------------------------------
// Model base

std::vector<ParamSpec> common_model_params() {
  return {
      Param::choice("device", {"auto", "cpu", "cuda"}).default_value("auto").doc(
          "where the model runs: auto picks CUDA when LibTorch sees a GPU, else the CPU; a nested model follows "
          "the outermost one"),
      Param::boolean("normalize").default_value(false).doc("L2-normalise each embedding row"),
      Param::boolean("freeze").default_value(false).doc(
          "keep the weights fixed: no gradients, always eval mode (batch-norm statistics unchanged)"),
      Param::path("weights").default_value("").doc(
          "load weights from a torch.train checkpoint or model snapshot file after building (empty: none)"),
  };
}

torch::Device resolve_device(const std::string& name, const std::string& owner) {
  if (name == "cpu") return torch::kCPU;
  bool cuda = torch::cuda::is_available();
  if (name == "cuda" && !cuda)
    throw ConfigError(cat(owner, ": device cuda was asked for, but LibTorch sees no CUDA device (use auto or cpu)"));
  return cuda ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
}

Model::Model(const ComponentContext& ctx) : seed_(ctx.seed()), owner_(ctx.owner()) {
  const Params& p = ctx.params();
  device_ = resolve_device(p.string("device"), owner_);
  normalize_ = p.boolean("normalize");
  frozen_ = p.boolean("freeze");
  weights_ = p.string("weights");
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
    torch::serialize::InputArchive archive;
    try {
      archive.load_from(weights_);
    } catch (const c10::Error& e) {
      throw ConfigError(cat(owner_, ": cannot read weights '", weights_, "': ", e.msg().substr(0, e.msg().find('\n'))));
    }
    read_model_state(*this, archive, weights_);
  }
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

// ---------------------------------------------------------------------------------------------
// State I/O

void write_model_state(Model& model, torch::serialize::OutputArchive& archive) { write_state(model.state(), archive); }

void write_state(const NamedTensors& state, torch::serialize::OutputArchive& archive) {
  std::string names;
  std::size_t i = 0;
  for (const auto& [name, t] : state) {
    names += name + "\n";
    archive.write("t" + std::to_string(i++), t.detach().to(torch::kCPU), /*is_buffer=*/true);
  }
  archive.write("names", c10::IValue(names));
}

std::string read_string(torch::serialize::InputArchive& a, const std::string& key, const std::string& what) {
  c10::IValue v;
  if (!a.try_read(key, v) || !v.isString()) throw DataError(cat(what, ": no '", key, "' entry (not an embedflow torch archive?)"));
  return v.toStringRef();
}

std::int64_t read_int(torch::serialize::InputArchive& a, const std::string& key, const std::string& what) {
  c10::IValue v;
  if (!a.try_read(key, v) || !v.isInt()) throw DataError(cat(what, ": no '", key, "' entry (not an embedflow torch archive?)"));
  return v.toInt();
}

void read_model_state(Model& model, torch::serialize::InputArchive& archive, const std::string& what) {
  torch::serialize::InputArchive nested;
  torch::serialize::InputArchive* src = &archive;
  if (archive.try_read("model", nested)) src = &nested;
  std::string names = read_string(*src, "names", what);
  std::map<std::string, std::size_t> index;
  {
    std::istringstream in(names);
    std::string line;
    for (std::size_t i = 0; std::getline(in, line); ++i) index[line] = i;
  }
  NamedTensors state = model.state();
  if (state.size() != index.size())
    throw DataError(cat(what, ": holds ", index.size(), " tensors but ", model.owner(), " has ", state.size(),
                        " (a different architecture?)"));
  torch::NoGradGuard no_grad;
  for (auto& [name, t] : state) {
    auto it = index.find(name);
    if (it == index.end())
      throw DataError(cat(what, ": has no tensor '", name, "' that ", model.owner(), " needs (a different architecture?)"));
    torch::Tensor v;
    src->read("t" + std::to_string(it->second), v, /*is_buffer=*/true);
    if (v.sizes() != t.sizes())
      throw DataError(cat(what, ": tensor '", name, "' has shape ", v.sizes(), " but ", model.owner(), " expects ", t.sizes()));
    t.copy_(v);
  }
}

Record make_snapshot(Model& model, const std::string& spec_text, std::int64_t step, std::int64_t epoch) {
  return make_snapshot(model.state(), spec_text, step, epoch);
}

Record make_snapshot(const NamedTensors& model_state, const std::string& spec_text, std::int64_t step, std::int64_t epoch) {
  torch::serialize::OutputArchive archive, state;
  archive.write("format", c10::IValue(std::string("embedflow-torch-snapshot/1")));
  archive.write("spec", c10::IValue(spec_text));
  archive.write("step", c10::IValue(step));
  archive.write("epoch", c10::IValue(epoch));
  write_state(model_state, state);
  archive.write("model", state);
  std::vector<std::uint8_t> bytes;
  archive.save_to([&](const void* data, std::size_t n) -> std::size_t {
    auto p = static_cast<const std::uint8_t*>(data);
    bytes.insert(bytes.end(), p, p + n);
    return n;
  });
  Record r;
  auto n = static_cast<std::int64_t>(bytes.size());
  r.set("weights", Array::from_vector<std::uint8_t>({n}, std::move(bytes)));
  r.set("spec", Array::strings({spec_text}));
  r.set("step", Array::from_vector<std::int64_t>({1}, {step}));
  r.set("epoch", Array::from_vector<std::int64_t>({1}, {epoch}));
  return r;
}

std::unique_ptr<Model> build_model(const Value& spec, std::uint64_t seed, const std::string& owner) {
  return build_model(spec, seed, owner, family_registry());
}

std::unique_ptr<Model> build_model(const Value& spec, std::uint64_t seed, const std::string& owner,
                                   const Registry& registry) {
  std::unique_ptr<Component> c = registry.instantiate(spec, seed, owner);
  auto* m = dynamic_cast<Model*>(c.get());
  if (!m) throw ConfigError(cat(owner, ": ", spec.str(), " is not a model"));
  c.release();
  return std::unique_ptr<Model>(m);
}

void set_torch_threads(std::int64_t threads, int graph_threads, const std::string& node) {
  int n = threads > 0 ? static_cast<int>(threads) : std::max(1, graph_threads);
  if (torch::get_num_threads() != n) torch::set_num_threads(n);
  log_debug(node, "LibTorch intra-op threads: ", torch::get_num_threads());
}

namespace {

void expect_images(const torch::Tensor& x, std::int64_t channels, const std::string& owner) {
  if (x.dim() != 4)
    throw DataError(cat(owner, ": expects images [N,C,H,W], got a tensor of shape ", x.sizes()));
  if (channels > 0 && x.size(1) != channels)
    throw DataError(cat(owner, ": in_channels is ", channels, " but the images have ", x.size(1),
                        " channels (shape ", x.sizes(), "; u8 images are read as [N,H,W,C])"));
}

// ---------------------------------------------------------------------------------------------
// torch.small_cnn

class SmallCnn final : public ModuleModel {
 public:
  explicit SmallCnn(const ComponentContext& c) : ModuleModel(c) {
    const Params& p = c.params();
    in_ = p.integer("in_channels");
    hidden_ = p.integer("hidden");
    dim_ = p.integer("embedding_dim");
    bool bn = p.boolean("batchnorm");
    seed_init(0);
    nn::Sequential f;
    std::int64_t ch_in = in_;
    for (std::int64_t ch : p.integers("channels")) {
      f->push_back(nn::Conv2d(nn::Conv2dOptions(ch_in, ch, 3).padding(1).bias(!bn)));
      if (bn) f->push_back(nn::BatchNorm2d(ch));
      f->push_back(nn::ReLU());
      f->push_back(nn::MaxPool2d(nn::MaxPool2dOptions(2)));
      ch_in = ch;
    }
    features_ = module_->register_module("features", f);
  }

 protected:
  // The head's input size follows from the image size, known at the first batch.
  void materialize(const torch::Tensor& sample) override {
    expect_images(sample, in_, owner_);
    std::int64_t flat = features_->forward(sample).flatten(1).size(1);
    seed_init(1);
    nn::Sequential h;
    if (hidden_ > 0) {
      h->push_back(nn::Linear(flat, hidden_));
      h->push_back(nn::ReLU());
      h->push_back(nn::Linear(hidden_, dim_));
    } else {
      h->push_back(nn::Linear(flat, dim_));
    }
    head_ = module_->register_module("head", h);
  }
  torch::Tensor forward(const torch::Tensor& x) override {
    expect_images(x, in_, owner_);
    return head_->forward(features_->forward(x).flatten(1));
  }
  // Also gives the conv features the head reads ("features", f32[N, F], not normalised). The
  // loss shapes the head's output; on classes never seen in training the features before the
  // head retrieve better than the embedding, which collapses onto the training classes (the
  // projection-head effect; docs/torch.md). torch.embed's `outputs: [features]` exports them.
  TensorMap forward_all(const TensorMap& inputs) override {
    auto it = inputs.find("image");
    if (it == inputs.end()) throw DataError(cat(owner_, ": no 'image' input"));
    expect_images(it->second, in_, owner_);
    std::unique_ptr<torch::NoGradGuard> no_grad;
    if (frozen()) no_grad = std::make_unique<torch::NoGradGuard>();
    torch::Tensor f = features_->forward(it->second).flatten(1);
    return {{"embedding", finish_embedding(head_->forward(f))}, {"features", f}};
  }

 private:
  std::int64_t in_, hidden_, dim_;
  nn::Sequential features_{nullptr}, head_{nullptr};
};

// ---------------------------------------------------------------------------------------------
// torch.resnet18 / torch.resnet50 (He et al. 2016, torchvision's layout)

nn::Conv2d conv(std::int64_t in, std::int64_t out, std::int64_t k, std::int64_t stride) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, k).stride(stride).padding(k / 2).bias(false));
}

struct BlockImpl : nn::Module {
  BlockImpl(std::int64_t in, std::int64_t planes, std::int64_t stride, bool bottleneck) : bottleneck(bottleneck) {
    std::int64_t out = bottleneck ? planes * 4 : planes;
    if (bottleneck) {
      conv1 = register_module("conv1", conv(in, planes, 1, 1));
      bn1 = register_module("bn1", nn::BatchNorm2d(planes));
      conv2 = register_module("conv2", conv(planes, planes, 3, stride));
      bn2 = register_module("bn2", nn::BatchNorm2d(planes));
      conv3 = register_module("conv3", conv(planes, out, 1, 1));
      bn3 = register_module("bn3", nn::BatchNorm2d(out));
    } else {
      conv1 = register_module("conv1", conv(in, planes, 3, stride));
      bn1 = register_module("bn1", nn::BatchNorm2d(planes));
      conv2 = register_module("conv2", conv(planes, planes, 3, 1));
      bn2 = register_module("bn2", nn::BatchNorm2d(planes));
    }
    if (stride != 1 || in != out) {
      downsample = register_module("downsample", nn::Sequential(conv(in, out, 1, stride), nn::BatchNorm2d(out)));
    }
  }
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor y = torch::relu(bn1(conv1(x)));
    y = bn2(conv2(y));
    if (bottleneck) y = bn3(conv3(torch::relu(y)));
    return torch::relu(y + (downsample ? downsample->forward(x) : x));
  }
  bool bottleneck;
  nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  nn::BatchNorm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr};
  nn::Sequential downsample{nullptr};
};
TORCH_MODULE(Block);

class ResNet final : public ModuleModel {
 public:
  ResNet(const ComponentContext& c, bool deep) : ModuleModel(c) {
    const Params& p = c.params();
    in_ = p.integer("in_channels");
    const std::int64_t width = p.integer("width"), dim = p.integer("embedding_dim");
    const bool small = p.string("stem") == "small";
    const std::vector<int> blocks = deep ? std::vector<int>{3, 4, 6, 3} : std::vector<int>{2, 2, 2, 2};
    seed_init(0);
    auto& m = *module_;
    // ImageNet stem: 7x7/2 conv + 3x3/2 max pool; the small stem (28x28 or 32x32 inputs) keeps
    // the resolution with one 3x3/1 conv, as CIFAR ResNets do.
    conv1_ = m.register_module("conv1", small ? conv(in_, width, 3, 1) : conv(in_, width, 7, 2));
    bn1_ = m.register_module("bn1", nn::BatchNorm2d(width));
    pool_ = !small;
    std::int64_t ch = width;
    for (int stage = 0; stage < 4; ++stage) {
      nn::Sequential layer;
      std::int64_t planes = width << stage;
      for (int b = 0; b < blocks[static_cast<std::size_t>(stage)]; ++b) {
        layer->push_back(Block(ch, planes, b == 0 && stage > 0 ? 2 : 1, deep));
        ch = deep ? planes * 4 : planes;
      }
      layers_.push_back(m.register_module("layer" + std::to_string(stage + 1), layer));
    }
    if (dim > 0) fc_ = m.register_module("fc", nn::Linear(ch, dim));
    // torchvision's initialisation: He (fan_out) for convolutions, unit batch-norm scales.
    for (auto& mod : m.modules(false)) {
      if (auto* cv = mod->as<nn::Conv2d>()) nn::init::kaiming_normal_(cv->weight, 0.0, torch::kFanOut, torch::kReLU);
      else if (auto* bn = mod->as<nn::BatchNorm2d>()) {
        nn::init::ones_(bn->weight);
        nn::init::zeros_(bn->bias);
      }
    }
  }

 protected:
  torch::Tensor forward(const torch::Tensor& x) override {
    expect_images(x, in_, owner_);
    torch::Tensor y = torch::relu(bn1_(conv1_(x)));
    if (pool_) y = torch::max_pool2d(y, 3, 2, 1);
    for (auto& l : layers_) y = l->forward(y);
    y = torch::adaptive_avg_pool2d(y, {1, 1}).flatten(1);
    return fc_ ? fc_(y) : y;
  }

 private:
  std::int64_t in_;
  bool pool_ = true;
  nn::Conv2d conv1_{nullptr};
  nn::BatchNorm2d bn1_{nullptr};
  std::vector<nn::Sequential> layers_;
  nn::Linear fc_{nullptr};
};

// ---------------------------------------------------------------------------------------------
// torch.mlp

class Mlp final : public ModuleModel {
 public:
  explicit Mlp(const ComponentContext& c) : ModuleModel(c) {
    const Params& p = c.params();
    in_ = p.integer("in_features");
    hidden_ = p.integers("hidden");
    dim_ = p.integer("embedding_dim");
    bn_ = p.boolean("batchnorm");
    dropout_ = p.number("dropout");
    if (in_ > 0) build(in_);
  }

 protected:
  void materialize(const torch::Tensor& sample) override {
    std::int64_t f = sample.dim() >= 2 ? sample.flatten(1).size(1) : 1;
    if (in_ > 0 && f != in_)
      throw DataError(cat(owner_, ": in_features is ", in_, " but the input has ", f, " features per row (shape ", sample.sizes(), ")"));
    if (!net_) build(f);
  }
  torch::Tensor forward(const torch::Tensor& x) override { return net_->forward(x.flatten(1)); }

 private:
  void build(std::int64_t in) {
    seed_init(0);
    nn::Sequential s;
    for (std::int64_t h : hidden_) {
      s->push_back(nn::Linear(in, h));
      if (bn_) s->push_back(nn::BatchNorm1d(h));
      s->push_back(nn::ReLU());
      if (dropout_ > 0) s->push_back(nn::Dropout(dropout_));
      in = h;
    }
    s->push_back(nn::Linear(in, dim_));
    net_ = module_->register_module("net", s);
  }
  std::int64_t in_, dim_;
  std::vector<std::int64_t> hidden_;
  bool bn_;
  double dropout_;
  nn::Sequential net_{nullptr};
};

// ---------------------------------------------------------------------------------------------
// torch.identity

class Identity final : public ModuleModel {
 public:
  using ModuleModel::ModuleModel;

 protected:
  torch::Tensor forward(const torch::Tensor& x) override { return x.dim() >= 2 ? x.flatten(1) : x.unsqueeze(1); }
};

// ---------------------------------------------------------------------------------------------
// torch.torchscript

class TorchScript final : public Model {
 public:
  explicit TorchScript(const ComponentContext& c) : Model(c), path_(c.params().string("path")) {
    try {
      module_ = torch::jit::load(path_);
    } catch (const c10::Error& e) {
      throw ConfigError(cat(owner_, ": cannot load TorchScript module '", path_, "': ", e.msg().substr(0, e.msg().find('\n'))));
    } catch (const std::exception& e) {
      throw ConfigError(cat(owner_, ": cannot load TorchScript module '", path_, "': ", e.what()));
    }
  }
  NamedTensors state() override {
    NamedTensors s;
    for (const auto& p : module_.named_parameters(true)) s.emplace_back(p.name, p.value);
    for (const auto& b : module_.named_buffers(true)) s.emplace_back(b.name, b.value);
    return s;
  }
  void to(const torch::Device& d) override { module_.to(d); }

 protected:
  torch::Tensor forward(const torch::Tensor& x) override {
    c10::IValue out = module_.forward({x});
    if (out.isTuple()) out = out.toTupleRef().elements().at(0);  // (embedding, ...) modules
    if (!out.isTensor()) throw DataError(cat(owner_, ": ", path_, " returned ", out.tagKind(), ", not a tensor"));
    return out.toTensor();
  }
  std::vector<torch::Tensor> parameters_for_training() override {
    std::vector<torch::Tensor> out;
    for (const auto& p : module_.parameters(true)) out.push_back(p);
    return out;
  }
  void train_mode(bool on) override { module_.train(on); }

 private:
  std::string path_;
  torch::jit::Module module_;
};

// ---------------------------------------------------------------------------------------------
// torch.concat and torch.blend (combination variants of the seed)

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

// ---------------------------------------------------------------------------------------------
// torch.conv_ae, torch.conv_vae

// A convolutional autoencoder (or VAE) for square images whose side is divisible by 2^(number of
// conv blocks): 28x28 with the default two blocks. Encoder: per entry of `channels` a 3x3 stride-2
// conv and ReLU (halving the side), then linear layers to mu (and logvar for the VAE). Decoder:
// a linear layer back to the last feature map, then 4x4 stride-2 transposed convs (doubling the
// side) mirroring the encoder, and a sigmoid so reconstructions live in [0,1] like the inputs.
// forward() (the embedding) is mu: deterministic, so embeddings of one image never vary.
class ConvAutoencoder final : public ModuleModel {
 public:
  ConvAutoencoder(const ComponentContext& c, bool variational) : ModuleModel(c), variational_(variational) {
    const Params& p = c.params();
    in_ = p.integer("in_channels");
    size_ = p.integer("image_size");
    latent_ = p.integer("latent_dim");
    sigmoid_ = p.string("output") == "sigmoid";
    std::vector<std::int64_t> ch = p.integers("channels");
    if (ch.empty()) throw ConfigError(cat(owner_, ": channels needs at least one entry"));
    std::int64_t factor = std::int64_t(1) << ch.size();
    if (size_ % factor != 0)
      throw ConfigError(cat(owner_, ": image_size ", size_, " must be divisible by 2^", ch.size(), " = ", factor,
                            " (one halving per entry of channels)"));
    side_ = size_ / factor;
    last_ = ch.back();
    std::int64_t flat = last_ * side_ * side_;
    seed_init(0);
    nn::Sequential enc;
    std::int64_t c_in = in_;
    for (std::int64_t c_out : ch) {
      enc->push_back(nn::Conv2d(nn::Conv2dOptions(c_in, c_out, 3).stride(2).padding(1)));
      enc->push_back(nn::ReLU());
      c_in = c_out;
    }
    encoder_ = module_->register_module("encoder", enc);
    mu_ = module_->register_module("fc_mu", nn::Linear(flat, latent_));
    if (variational_) logvar_ = module_->register_module("fc_logvar", nn::Linear(flat, latent_));
    nn::Sequential dec;
    for (std::size_t i = ch.size(); i-- > 0;) {
      std::int64_t c_out = i == 0 ? in_ : ch[i - 1];
      dec->push_back(nn::ConvTranspose2d(nn::ConvTranspose2dOptions(ch[i], c_out, 4).stride(2).padding(1)));
      if (i != 0) dec->push_back(nn::ReLU());
    }
    expand_ = module_->register_module("fc_decode", nn::Linear(latent_, flat));
    decoder_ = module_->register_module("decoder", dec);
  }

  TensorMap forward_all(const TensorMap& inputs) override {
    auto it = inputs.find("image");
    if (it == inputs.end()) throw DataError(cat(owner_, ": no 'image' input"));
    std::unique_ptr<torch::NoGradGuard> no_grad;
    if (frozen()) no_grad = std::make_unique<torch::NoGradGuard>();
    torch::Tensor h = features(it->second);
    torch::Tensor mu = mu_->forward(h);
    TensorMap out{{"mu", mu}};
    torch::Tensor z = mu;
    if (variational_) {
      torch::Tensor logvar = logvar_->forward(h);
      out["logvar"] = logvar;
      // Reparameterisation (Kingma & Welling): z = mu + sigma * eps, eps ~ N(0, I), while training;
      // the mean in eval mode so a trained model reconstructs deterministically.
      if (module_->is_training()) z = mu + torch::randn_like(mu) * torch::exp(0.5 * logvar);
    }
    out["latent"] = z;
    out["reconstruction"] = decode(z);
    out["embedding"] = finish_embedding(mu);
    return out;
  }

 protected:
  torch::Tensor forward(const torch::Tensor& x) override { return mu_->forward(features(x)); }

 private:
  torch::Tensor features(const torch::Tensor& x) {
    expect_images(x, in_, owner_);
    if (x.size(2) != size_ || x.size(3) != size_)
      throw DataError(cat(owner_, ": image_size is ", size_, " but the images are ", x.size(2), "x", x.size(3),
                          " (shape ", x.sizes(), ")"));
    return encoder_->forward(x).flatten(1);
  }
  torch::Tensor decode(const torch::Tensor& z) {
    torch::Tensor h = torch::relu(expand_->forward(z)).view({z.size(0), last_, side_, side_});
    torch::Tensor r = decoder_->forward(h);
    return sigmoid_ ? torch::sigmoid(r) : r;
  }

  bool variational_;
  bool sigmoid_ = true;
  std::int64_t in_, size_, latent_, side_, last_;
  nn::Sequential encoder_{nullptr}, decoder_{nullptr};
  nn::Linear mu_{nullptr}, logvar_{nullptr}, expand_{nullptr};
};

// ---------------------------------------------------------------------------------------------

ComponentType model_type(const std::string& name, const std::string& doc, std::vector<ParamSpec> params,
                         std::function<std::unique_ptr<Component>(const ComponentContext&)> make) {
  ComponentTypeBuilder b(name, "model");
  b.doc(doc);
  for (auto& p : params) b.param(std::move(p));
  for (auto& p : common_model_params()) b.param(std::move(p));
  return b.create(std::move(make));
}

template <class T>
std::function<std::unique_ptr<Component>(const ComponentContext&)> make() {
  return [](const ComponentContext& c) -> std::unique_ptr<Component> { return std::make_unique<T>(c); };
}

Value model_spec(const char* type, Value::Map rest = {}) {
  Value::Map m{{"type", Value::string(type)}};
  for (auto& e : rest) m.push_back(std::move(e));
  return Value::map(std::move(m));
}

std::vector<ParamSpec> resnet_params() {
  return {
      Param::integer("in_channels").default_value(3).min(1).doc("image channels"),
      Param::integer("width").default_value(64).min(1).doc("channels of the first stage (64 in the paper); stages double it"),
      Param::choice("stem", {"imagenet", "small"}).default_value("imagenet").doc(
          "imagenet: 7x7/2 conv + max pool (224x224 inputs); small: one 3x3/1 conv (28x28 or 32x32 inputs)"),
      Param::integer("embedding_dim").default_value(128).min(0).doc(
          "size of the final linear layer; 0: none, the pooled features (8 x width for ResNet-18, 32 x width for ResNet-50)"),
  };
}

std::vector<ParamSpec> autoencoder_params() {
  return {
      Param::integer("in_channels").default_value(1).min(1).doc("image channels"),
      Param::integer("image_size").default_value(28).min(2).doc(
          "side of the square input images; divisible by 2^(entries of channels), e.g. 28 with two"),
      Param::integers("channels").default_value(std::vector<std::int64_t>{32, 64}).min(1).doc(
          "output channels of each stride-2 encoder conv (the decoder mirrors them)"),
      Param::integer("latent_dim").default_value(16).min(1).doc("size of the latent (the embedding)"),
      Param::choice("output", {"sigmoid", "linear"}).default_value("sigmoid").doc(
          "sigmoid: reconstructions in [0,1] (inputs scaled to [0,1], needed for BCE); linear: none (normalised inputs)"),
  };
}

}  // namespace

std::vector<ComponentType> model_components() {
  return {
      model_type("torch.small_cnn",
                 "Small CNN for 28x28 images: per entry of `channels` a 3x3 conv (+ batch norm), ReLU and 2x2 max "
                 "pool, then a hidden linear layer and the embedding layer. Input f32[N,C,H,W]; output f32[N,D]. "
                 "forward_all also outputs features (the flattened conv features the head reads).",
                 {Param::integer("in_channels").default_value(1).min(1).doc("image channels"),
                  Param::integers("channels").default_value(std::vector<std::int64_t>{32, 64}).min(1).doc("output channels of each conv block"),
                  Param::integer("hidden").default_value(128).min(0).doc("hidden units before the embedding layer; 0: none"),
                  Param::integer("embedding_dim").default_value(64).min(1).doc("D, the embedding size"),
                  Param::boolean("batchnorm").default_value(true).doc("batch norm after each convolution")},
                 make<SmallCnn>()),
      model_type("torch.resnet18", "ResNet-18 (basic blocks [2,2,2,2]) defined in C++, torchvision's layer names and initialisation.",
                 resnet_params(), [](const ComponentContext& c) -> std::unique_ptr<Component> { return std::make_unique<ResNet>(c, false); }),
      model_type("torch.resnet50", "ResNet-50 (bottleneck blocks [3,4,6,3]) defined in C++, torchvision's layer names and initialisation.",
                 resnet_params(), [](const ComponentContext& c) -> std::unique_ptr<Component> { return std::make_unique<ResNet>(c, true); }),
      model_type("torch.mlp", "Flattens its input and applies linear layers (ReLU between): a head over features, or a small model.",
                 {Param::integer("in_features").default_value(0).min(0).doc("input features per row; 0: taken from the first batch"),
                  Param::integers("hidden").default_value(std::vector<std::int64_t>{}).min(1).doc("hidden layer sizes"),
                  Param::integer("embedding_dim").default_value(64).min(1).doc("D, the output size"),
                  Param::boolean("batchnorm").default_value(false).doc("batch norm after each hidden layer"),
                  Param::number("dropout").default_value(0.0).range(0.0, 0.99).doc("dropout after each hidden layer")},
                 make<Mlp>()),
      model_type("torch.conv_ae",
                 "Convolutional autoencoder: per entry of `channels` a 3x3 stride-2 conv + ReLU, a linear layer to the "
                 "latent (the embedding), and a mirrored decoder (4x4 stride-2 transposed convs, sigmoid). forward_all "
                 "outputs: embedding, mu (= latent), latent, reconstruction f32[N,C,H,W]. For torch.reconstruction.",
                 autoencoder_params(), [](const ComponentContext& c) -> std::unique_ptr<Component> {
                   return std::make_unique<ConvAutoencoder>(c, false);
                 }),
      model_type("torch.conv_vae",
                 "Convolutional variational autoencoder: torch.conv_ae's layers with two latent heads, mu and logvar; "
                 "while training the decoder sees z = mu + exp(logvar / 2) * eps (reparameterisation), in eval mode "
                 "z = mu. The embedding is mu. forward_all outputs: embedding, mu, logvar, latent (z), reconstruction. "
                 "For torch.reconstruction and torch.kl_divergence.",
                 autoencoder_params(), [](const ComponentContext& c) -> std::unique_ptr<Component> {
                   return std::make_unique<ConvAutoencoder>(c, true);
                 }),
      model_type("torch.identity", "Flattens its input: no parameters (losses on precomputed embeddings).", {}, make<Identity>()),
      model_type("torch.torchscript",
                 "A user's TorchScript module (.pt from torch.jit.script or torch.jit.trace and .save), e.g. an "
                 "ImageNet ResNet-50 backbone. Its forward takes f32[N,C,H,W] and returns a tensor (or a tuple whose "
                 "first element is one), flattened to [N,D]. freeze: true keeps its weights and statistics fixed.",
                 {Param::path("path").doc("the TorchScript file")}, make<TorchScript>()),
      model_type("torch.concat",
                 "The seed's combination variants: embedding = concat(I(x), V(x)) with backbone I and branch V. "
                 "mode frozen_backbone (T_c^1): I frozen, only V trained; both (T_c^2): I and V trained; branch_only "
                 "(T_c^3): V alone.",
                 {Param::component("backbone", "model").optional().doc("I, e.g. {type: torch.torchscript, path: resnet50.pt}"),
                  Param::component("branch", "model").doc("V, e.g. {type: torch.resnet18, embedding_dim: 1024}"),
                  Param::choice("mode", {"frozen_backbone", "both", "branch_only"}).default_value("frozen_backbone").doc(
                      "which parts train (see above)")},
                 make<Concat>()),
      model_type("torch.blend",
                 "A blending head B over a frozen model's embeddings (the seed's T_b): embedding = head(backbone(x)); "
                 "only the head trains. Give the backbone its trained weights with its `weights` parameter.",
                 {Param::component("backbone", "model").doc("the frozen model, e.g. a torch.concat with weights: run/ckpt/step-00001000.pt"),
                  Param::component("head", "model")
                      .default_value(model_spec("torch.mlp", {{"embedding_dim", Value::integer(128)}}))
                      .doc("the trained head over the backbone's embeddings")},
                 make<Blend>()),
  };
}

const Registry& family_registry() {
  static const Registry registry = [] {
    Registry r;
    for (auto& c : model_components()) r.add(std::move(c));
    for (auto& c : loss_components()) r.add(std::move(c));
    for (auto& c : optimizer_components()) r.add(std::move(c));
    for (auto& c : schedule_components()) r.add(std::move(c));
    return r;
  }();
  return registry;
}

}  // namespace embedflow::torchfam
