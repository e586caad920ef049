// Model state I/O (model.hpp): parameters and buffers in LibTorch archives (checkpoints,
// snapshots, `weights` files), snapshot records, and building a model from a spec.
#include <algorithm>
#include <cstdio>
#include <regex>
#include <sstream>

#include "checkpoint.hpp"
#include "model.hpp"
#include "torch_types.hpp"

namespace embedflow::torchfam {

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

std::unique_ptr<Model> build_model(const Value& spec, std::uint64_t seed, const std::string& owner,
                                   const Registry& registry) {
  std::unique_ptr<Component> c = registry.instantiate(spec, seed, owner);
  auto* m = dynamic_cast<Model*>(c.get());
  if (!m) throw ConfigError(cat(owner, ": ", spec.str(), " is not a model"));
  c.release();
  return std::unique_ptr<Model>(m);
}

namespace fs = std::filesystem;

std::string checkpoint_name(std::int64_t step) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "step-%08lld.pt", static_cast<long long>(step));
  return buf;
}

std::vector<std::pair<std::int64_t, fs::path>> list_checkpoints(const fs::path& dir) {
  std::vector<std::pair<std::int64_t, fs::path>> out;
  if (!fs::is_directory(dir)) return out;
  static const std::regex re("step-([0-9]+)\\.pt");
  for (const auto& e : fs::directory_iterator(dir)) {
    std::smatch m;
    std::string name = e.path().filename().string();
    if (std::regex_match(name, m, re)) out.emplace_back(std::stoll(m[1].str()), e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

fs::path newest_checkpoint_file(const fs::path& dir) {
  auto all = list_checkpoints(dir);
  return all.empty() ? fs::path() : all.back().second;
}

}  // namespace embedflow::torchfam
