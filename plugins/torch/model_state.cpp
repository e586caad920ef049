// Model state I/O (model.hpp): parameters and buffers in LibTorch archives (checkpoints,
// snapshots, `weights` files), snapshot records, and building a model from a spec.
#include <algorithm>
#include <cstdio>
#include <regex>
#include <sstream>

#include <openssl/evp.h>

#include "checkpoint.hpp"
#include "embedflow/file_kind.hpp"
#include "model.hpp"
#include "torch_types.hpp"
#include "zip_integrity.hpp"

namespace embedflow::torchfam {

void write_model_state(Model& model, torch::serialize::OutputArchive& archive) { write_state(model.state(), archive); }

namespace {

// SHA-256 over each tensor's name, dtype, shape and bytes (write_state's "digest").
std::string state_digest(const NamedTensors& state) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) throw Error("cannot start a SHA-256 digest");
  auto add = [&](const void* p, std::size_t n) { EVP_DigestUpdate(ctx.get(), p, n); };
  auto add_int = [&](std::int64_t v) {
    unsigned char b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(static_cast<std::uint64_t>(v) >> (8 * i));
    add(b, sizeof b);
  };
  for (const auto& [name, tensor] : state) {
    add_int(static_cast<std::int64_t>(name.size()));
    add(name.data(), name.size());
    const torch::Tensor t = tensor.detach().to(torch::kCPU).contiguous();
    add_int(static_cast<std::int64_t>(t.scalar_type()));
    add_int(t.dim());
    for (std::int64_t s : t.sizes()) add_int(s);
    add(t.data_ptr(), t.nbytes());
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(ctx.get(), md, &n);
  static const char* hex = "0123456789abcdef";
  std::string out = "sha256:";
  for (unsigned int i = 0; i < n; ++i) {
    out += hex[md[i] >> 4];
    out += hex[md[i] & 15];
  }
  return out;
}

}  // namespace

void write_state(const NamedTensors& state, torch::serialize::OutputArchive& archive) {
  std::string names;
  std::size_t i = 0;
  for (const auto& [name, t] : state) {
    names += name + "\n";
    archive.write("t" + std::to_string(i++), t.detach().to(torch::kCPU), /*is_buffer=*/true);
  }
  archive.write("names", c10::IValue(names));
  archive.write("digest", c10::IValue(state_digest(state)));
}

NamedTensors read_state(torch::serialize::InputArchive& archive, const std::string& what) {
  NamedTensors state;
  std::istringstream names(read_string(archive, "names", what));
  std::string name;
  for (std::size_t i = 0; std::getline(names, name);) {
    torch::Tensor t;
    try {
      archive.read("t" + std::to_string(i), t, /*is_buffer=*/true);
    } catch (const c10::Error&) {
      throw DataError(cat(what, ": no tensor entry t", i, " for '", name, "' (damaged?)"));
    }
    ++i;
    state.emplace_back(name, t);
  }
  c10::IValue stored;
  if (archive.try_read("digest", stored)) {
    if (!stored.isString()) throw DataError(cat(what, ": its 'digest' entry is not text (damaged?)"));
    const std::string computed = state_digest(state);
    if (stored.toStringRef() != computed)
      throw DataError(cat(what, ": its tensors do not match the digest written with them (", stored.toStringRef(),
                          " recorded, ", computed, " read): the weights were changed after saving"));
  }
  return state;
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
  const NamedTensors stored = read_state(*src, what);
  std::map<std::string, const torch::Tensor*> by_name;
  for (const auto& [name, t] : stored) by_name[name] = &t;
  NamedTensors state = model.state();
  if (state.size() != stored.size())
    throw DataError(cat(what, ": holds ", stored.size(), " tensors but ", model.owner(), " has ", state.size(),
                        " (a different architecture?)"));
  torch::NoGradGuard no_grad;
  for (auto& [name, t] : state) {
    auto it = by_name.find(name);
    if (it == by_name.end())
      throw DataError(cat(what, ": has no tensor '", name, "' that ", model.owner(), " needs (a different architecture?)"));
    const torch::Tensor& v = *it->second;
    if (v.sizes() != t.sizes())
      throw DataError(cat(what, ": tensor '", name, "' has shape ", v.sizes(), " but ", model.owner(), " expects ", t.sizes()));
    t.copy_(v);
  }
}

void load_archive(torch::serialize::InputArchive& archive, const std::filesystem::path& file, const std::string& what) {
  refuse_special_input(file, what);
  verify_zip_file(file, what);
  try {
    archive.load_from(file.string());
  } catch (const c10::Error& e) {
    throw DataError(cat(what, ": cannot read it: ", e.msg().substr(0, e.msg().find('\n'))));
  }
}

void load_archive(torch::serialize::InputArchive& archive, const void* data, std::size_t size, const std::string& what) {
  verify_zip_bytes(data, size, what);
  try {
    archive.load_from(static_cast<const char*>(data), size);
  } catch (const c10::Error& e) {
    throw DataError(cat(what, ": cannot read it: ", e.msg().substr(0, e.msg().find('\n'))));
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
