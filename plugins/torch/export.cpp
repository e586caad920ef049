// TorchScript export (export.hpp) and torch.export, the node behind `embedflow export`.
//
// torch.export — writes a torch.train checkpoint's model as a TorchScript module.
//
// Inputs:  none (a source).
// Outputs: out — one record {path: str[1], embedding_dim: i64[1]} once the module is written.
// Behaviour: opens the checkpoint (a file, or a checkpoint folder: its newest step-*.pt) through
//   the checks every embedflow archive gets (zip_integrity.hpp: every entry's CRC-32, the weights'
//   digest), rebuilds the model from the spec it carries, loads its `model` weights (the weight
//   average when trained with ema_decay) and writes the module (export.hpp). The input size comes
//   from the checkpoint (torch.train records it) or from `input_size`.
//
//   seed: 1
//   nodes:
//     export: {type: torch.export, params: {checkpoint: out/train/ckpt, out: out/model.ts.pt}}
//   edges: []
#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/jit/frontend/tracer.h>

#include <algorithm>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "embedflow/report_files.hpp"

#include "catalog.hpp"
#include "checkpoint.hpp"
#include "export.hpp"
#include "model.hpp"
#include "torch_types.hpp"

namespace embedflow::torchfam {
namespace fs = std::filesystem;
namespace {

template <class T>
std::string json_list(const std::vector<T>& v) {
  std::ostringstream s;
  s.precision(17);
  s << "[";
  for (std::size_t i = 0; i < v.size(); ++i) s << (i ? ", " : "") << v[i];
  s << "]";
  return s.str();
}

// The module that holds the model's tensors under their dotted names ("layer1.0.conv1.weight":
// submodules layer1, 0, conv1 and the parameter weight), so the traced forward reads them as
// attributes and the saved file keeps the names.
class ModuleTree {
 public:
  ModuleTree() : root_(c10::QualifiedName("__torch__.embedflow.EmbeddingModel")) {
    cu_ = root_._ivalue()->compilation_unit();
    root_.register_attribute("training", c10::BoolType::get(), false);
  }
  torch::jit::Module& root() { return root_; }

  void add(const std::string& name, const torch::Tensor& t, bool parameter) {
    torch::jit::Module m = root_;
    std::size_t start = 0;
    for (std::size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', start)) {
      m = child(m, name.substr(start, dot - start));
      start = dot + 1;
    }
    const std::string leaf = name.substr(start);
    if (m.hasattr(leaf)) return;  // one tensor under two names (shared weights): the first name holds it
    m.register_parameter(leaf, t, /*is_buffer=*/!parameter);
  }

 private:
  torch::jit::Module child(torch::jit::Module& parent, const std::string& atom) {
    if (parent.hasattr(atom)) {
      c10::IValue v = parent.attr(atom);
      if (v.isModule()) return v.toModule();
      throw DataError(cat("the model's state names '", atom, "' both as a tensor and as a part"));
    }
    std::string cls = "Part" + std::to_string(++parts_) + "_";
    for (char c : atom) cls += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    torch::jit::Module m(c10::QualifiedName("__torch__.embedflow." + cls), cu_);
    m.register_attribute("training", c10::BoolType::get(), false);
    parent.register_module(atom, m);
    return m;
  }

  torch::jit::Module root_;
  std::shared_ptr<torch::jit::CompilationUnit> cu_;
  int parts_ = 0;
};

std::vector<double> per_channel(const std::vector<double>& v, std::int64_t channels, double fill) {
  if (v.empty()) return std::vector<double>(static_cast<std::size_t>(channels), fill);
  if (v.size() == 1) return std::vector<double>(static_cast<std::size_t>(channels), v[0]);
  return v;
}

}  // namespace

void check_export_normalization(const std::vector<double>& mean, const std::vector<double>& std, std::int64_t channels,
                                const std::string& owner) {
  for (const auto* v : {&mean, &std}) {
    const char* name = v == &mean ? "mean" : "std";
    if (v->size() > 1 && static_cast<std::int64_t>(v->size()) != channels)
      throw ConfigError(cat(owner, ": export ", name, " has ", v->size(), " values but the images have ", channels,
                            " channels (give one value, or one per channel)"));
  }
  for (double s : std)
    if (!(s > 0)) throw ConfigError(cat(owner, ": export std must be positive, got ", s));
  if (mean.empty() != std.empty())
    throw ConfigError(cat(owner, ": export normalisation needs both mean and std (or neither)"));
}

std::int64_t export_torchscript(const std::string& spec_text, torch::serialize::InputArchive& weights,
                                const std::string& what, const ExportOptions& o, const Registry& registry,
                                std::uint64_t seed, const fs::path& out) {
  if (o.input_size.size() != 3)
    throw ConfigError(cat("export: the input size must be C,H,W (", o.input_size.size(), " values given)"));
  const std::int64_t C = o.input_size[0], H = o.input_size[1], W = o.input_size[2];
  if (C < 1 || H < 1 || W < 1) throw ConfigError(cat("export: input size ", C, "x", H, "x", W, " is not an image size"));
  check_export_normalization(o.mean, o.std, C, "export");
  torch::NoGradGuard no_grad;
  // As torch.embed does: the model rebuilt from its spec, prepared on a batch of the input size,
  // then the weights copied in, in eval mode.
  std::unique_ptr<Model> model = build_model(spec_from_text(spec_text), seed, cat("export model from ", what), registry);
  model->prepare(torch::zeros({2, C, H, W}));
  model->to(torch::kCPU);
  read_model_state(*model, weights, what);
  model->set_training(false);

  ModuleTree tree;
  torch::jit::Module& root = tree.root();
  for (const auto& [name, t] : model->state()) tree.add(name, t, t.requires_grad());
  const bool normalizes = !o.mean.empty();
  const std::vector<double> mean = per_channel(o.mean, C, 0.0), std = per_channel(o.std, C, 1.0);
  torch::Tensor mean_t = torch::tensor(mean, torch::kFloat32).view({1, C, 1, 1}),
                std_t = torch::tensor(std, torch::kFloat32).view({1, C, 1, 1});
  if (normalizes) {
    root.register_buffer("input_mean", mean_t);
    root.register_buffer("input_std", std_t);
  }

  auto embed = [&](const torch::Tensor& images) {
    torch::Tensor x = images;
    if (normalizes) x = (x - mean_t) / std_t;
    return model->embed(x).to(torch::kFloat32);
  };
  // Random images from a generator of the export's own (the global one is left as it is).
  at::Generator gen = at::detail::createCPUGenerator(derive_seed(seed, "export"));
  const torch::Tensor example = torch::rand({2, C, H, W}, gen);
  std::shared_ptr<torch::jit::Graph> graph;
  try {
    auto traced = torch::jit::tracer::trace(
        {example}, [&](torch::jit::Stack in) -> torch::jit::Stack { return {embed(in.at(0).toTensor())}; },
        [](const torch::autograd::Variable&) { return std::string(); }, /*strict=*/true, /*force_outplace=*/false,
        &root, {"images"});
    graph = traced.first->graph;
  } catch (const c10::Error& e) {
    throw DataError(cat("export: tracing the model from ", what, " failed: ", e.what_without_backtrace()));
  }
  auto fn = root._ivalue()->compilation_unit()->create_function(c10::QualifiedName(*root.type()->name(), "forward"), graph);
  root.type()->addMethod(fn);

  // The traced forward must give what the model gives, on another batch size too.
  const torch::Tensor check = torch::rand({3, C, H, W}, gen);
  const torch::Tensor want = embed(check), got = root.forward({check}).toTensor();
  if (!got.sizes().equals(want.sizes()) ||
      (got - want).abs().max().item<double>() > 1e-5 * std::max(1.0, want.abs().max().item<double>()))
    throw DataError(cat("export: the traced module of ", what, " does not reproduce the model's embeddings (shape ",
                        got.sizes(), " vs ", want.sizes(), "): the model's forward depends on more than its input"));
  const std::int64_t dim = want.size(1);

  const std::string order = C == 3 ? "RGB" : C == 1 ? "grey" : "";
  const bool l2 = (want.norm(2, 1) - 1).abs().max().item<double>() < 1e-4;
  root.register_attribute("input_size", c10::ListType::ofInts(), c10::List<std::int64_t>(o.input_size));
  root.register_attribute("mean", c10::ListType::ofFloats(), c10::List<double>(mean));
  root.register_attribute("std", c10::ListType::ofFloats(), c10::List<double>(std));
  root.register_attribute("embedding_dim", c10::IntType::get(), dim);
  root.register_attribute("channel_order", c10::StringType::get(), order);
  root.register_attribute("spec", c10::StringType::get(), spec_text);

  std::ostringstream meta;
  meta << "{\"format\": " << json_quote(kTorchScriptExportFormat) << ", \"input_size\": " << json_list(o.input_size)
       << ", \"channel_order\": " << json_quote(order) << ", \"value_range\": [0, 1], \"mean\": " << json_list(mean)
       << ", \"std\": " << json_list(std) << ", \"embedding_dim\": " << dim
       << ", \"normalized\": " << (l2 ? "true" : "false") << ", \"spec\": " << json_quote(spec_text)
       << ", \"step\": " << o.step << ", \"source\": " << json_quote(o.source) << "}\n";
  torch::jit::ExtraFilesMap extra{{"embedflow.json", meta.str()}};
  if (!out.parent_path().empty()) fs::create_directories(out.parent_path());
  fs::path tmp = out;
  tmp += ".tmp";
  try {
    root.save(tmp.string(), extra);
  } catch (const c10::Error& e) {
    throw Error(cat("export: cannot write ", out.string(), ": ", e.msg().substr(0, e.msg().find('\n'))));
  }
  fs::rename(tmp, out);
  return dim;
}

namespace {

class Export final : public Node {
 public:
  void open(NodeContext& ctx) override {
    ctx_ = &ctx;
    const Params& p = ctx.params();
    set_torch_threads(p.integer("threads"), ctx.threads(), ctx.id());
    file_ = p.string("checkpoint");
    std::error_code ec;
    if (fs::is_directory(file_, ec)) {
      auto all = list_checkpoints(file_);
      if (all.empty()) throw ConfigError(cat("checkpoint: no step-*.pt file in ", file_.string()));
      file_ = all.back().second;
    } else if (!fs::exists(file_, ec)) {
      throw ConfigError(cat("checkpoint '", file_.string(), "' does not exist"));
    }
    out_ = p.string("out");
    options_.mean = p.numbers("mean");
    options_.std = p.numbers("std");
    options_.input_size = p.integers("input_size");
  }

  bool produce(Emitter& out) override {
    CheckpointReader checkpoint(file_);  // DataError naming the file when damaged
    options_.source = file_.string();
    options_.step = checkpoint.progress().step;
    if (options_.input_size.empty()) {
      options_.input_size = checkpoint_input_size(checkpoint.archive());
      if (options_.input_size.empty())
        throw ConfigError(cat("checkpoint ", file_.string(), " does not record its input size (written before "
                              "torch.train recorded it): give input_size [C, H, W]"));
    }
    std::int64_t dim = 0;
    try {
      dim = export_torchscript(checkpoint.spec(), checkpoint.archive(), cat("checkpoint ", file_.string()), options_,
                               ctx_->registry(), ctx_->seed(), out_);
    } catch (const c10::Error& e) {
      throw DataError(cat("exporting ", file_.string(), ": LibTorch failed: ", e.what_without_backtrace()));
    }
    log_info(ctx_->id(), "wrote ", out_.string(), " (embedding_dim ", dim, ", input ", options_.input_size[0], "x",
             options_.input_size[1], "x", options_.input_size[2], ") from ", file_.string());
    Record r;
    r.set("path", Array::strings({out_.string()}));
    r.set("embedding_dim", Array::from_vector<std::int64_t>({1}, {dim}));
    out.emit(std::move(r));
    return false;
  }

 private:
  NodeContext* ctx_ = nullptr;
  fs::path file_, out_;
  ExportOptions options_;
};

}  // namespace

NodeType export_type() {
  return NodeTypeBuilder("torch.export")
      .doc("Writes a torch.train checkpoint's model as a TorchScript module: forward(images f32[N,C,H,W] in [0,1]) "
           "gives the embeddings torch.embed computes, with input size, channel order, mean/std and embedding size "
           "in the file (extra file embedflow.json, and module attributes). `embedflow export` runs it.")
      .source()
      .param(Param::path("checkpoint").doc("a torch.train checkpoint file, or a checkpoint folder (its newest step-*.pt)"))
      .param(Param::path("out").doc("the TorchScript file to write, e.g. out/model.ts.pt"))
      .param(Param::integers("input_size").default_value(std::vector<std::int64_t>{}).doc(
          "C, H, W of the images; empty: the size the checkpoint records (torch.train writes it)"))
      .param(Param::numbers("mean").default_value(std::vector<double>{}).doc(
          "per-channel mean subtracted inside the module before the model (with std); empty: none, the module "
          "takes what the model was trained on"))
      .param(Param::numbers("std").default_value(std::vector<double>{}).doc("per-channel std the module divides by (with mean)"))
      .param(Param::integer("threads").default_value(0).min(0).not_fingerprinted().doc(
          "LibTorch intra-op threads; 0: the graph's --threads"))
      .output("out", "path: str[1], embedding_dim: i64[1]", "one record once the module is written")
      .example("export: {type: torch.export, params: {checkpoint: out/train/ckpt, out: out/model.ts.pt}}")
      .create<Export>();
}

}  // namespace embedflow::torchfam
