// torch.resnet18, torch.resnet50: He et al.'s ResNets (2016) written in C++ with torchvision's
// layer names and initialisation; configurable in_channels, width, stem and embedding_dim.
#include "catalog.hpp"
#include "model.hpp"
#include "torch_types.hpp"

namespace embedflow::torchfam {

namespace nn = torch::nn;

namespace {

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

}  // namespace

// Without a final linear layer the embedding is the pooled last stage: 8 x width channels for
// ResNet-18's basic blocks, 32 x width for ResNet-50's bottlenecks (expansion 4).
ComponentTypeBuilder resnet_contract(ComponentTypeBuilder b, std::int64_t last_stage_factor) {
  return b.consumes("in", "image: f32[N,$in_channels,H,W]").check([last_stage_factor](ContractContext& c) {
    std::int64_t d = c.params().integer("embedding_dim");
    if (d == 0) d = last_stage_factor * c.params().integer("width");
    PortSchema out;
    out.add(embedding_field("embedding", Dim{Dim::Kind::fixed, d, ""}));
    c.contract().produces = out;
  });
}

ComponentType resnet18_type() {
  return resnet_contract(model_type("torch.resnet18", "ResNet-18 (basic blocks [2,2,2,2]) defined in C++, torchvision's layer names and initialisation.",
                                    resnet_params()), 8)
      .create([](const ComponentContext& c) -> std::unique_ptr<Component> { return std::make_unique<ResNet>(c, false); });
}

ComponentType resnet50_type() {
  return resnet_contract(model_type("torch.resnet50", "ResNet-50 (bottleneck blocks [3,4,6,3]) defined in C++, torchvision's layer names and initialisation.",
                                    resnet_params()), 32)
      .create([](const ComponentContext& c) -> std::unique_ptr<Component> { return std::make_unique<ResNet>(c, true); });
}

}  // namespace embedflow::torchfam
