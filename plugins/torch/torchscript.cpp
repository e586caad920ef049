// torch.torchscript: a user's TorchScript .pt backbone (torch.jit.script or trace, then save).
#include "model.hpp"
#include "torch_types.hpp"
#include "embedflow/file_kind.hpp"
#include "zip_integrity.hpp"

namespace embedflow::torchfam {

namespace {

class TorchScript final : public Model {
 public:
  explicit TorchScript(const ComponentContext& c) : Model(c), path_(c.params().string("path")) {
    // The same checks as every archive embedflow loads: not a FIFO, every entry's CRC-32.
    refuse_special_input(path_, cat(owner_, ": TorchScript module"));
    verify_zip_file(path_, cat(owner_, ": TorchScript module '", path_, "'"));
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

}  // namespace

ComponentType torchscript_type() {
  return model_type("torch.torchscript",
                    "A user's TorchScript module (.pt from torch.jit.script or torch.jit.trace and .save), e.g. an "
                    "ImageNet ResNet-50 backbone. Its forward takes f32[N,C,H,W] and returns a tensor (or a tuple whose "
                    "first element is one), flattened to [N,D]. freeze: true keeps its weights and statistics fixed.",
                    {Param::path("path").doc("the TorchScript file")})
      .consumes("in", "image: f32[N,...]")
      .produces("embedding: f32[N,?]")  // only a forward pass can tell
      .create(model_factory<TorchScript>());
}

}  // namespace embedflow::torchfam
