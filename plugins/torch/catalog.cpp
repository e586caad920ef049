#include "catalog.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>

namespace embedflow::torchfam {

std::vector<std::string> loss_fields(const Value& spec) {
  const Value* type = spec.get("type");
  if (!type || !type->is_string()) return {};
  const std::string& t = type->as_string();
  if (t == "torch.contrastive" || t == "torch.dual_margin_contrastive") return kPairFields;
  if (t == "torch.triplet_margin") return kTripletFields;
  if (t == "torch.batch_hard_triplet" || t == "torch.semi_hard_triplet" || t == "torch.all_pairs_contrastive")
    return kLabelFields;
  if (t == "torch.sum") {
    std::vector<std::string> all;
    for (const char* slot : {"a", "b", "c", "d"})
      if (const Value* term = spec.get(slot))
        for (auto& f : loss_fields(*term))
          if (std::find(all.begin(), all.end(), f) == all.end()) all.push_back(f);
    return all;
  }
  return {};  // torch.l2_embedding uses whatever image fields the batch has
}

std::int64_t embedding_dim_of(const Value& spec) {
  const Value* type = spec.get("type");
  if (!type || !type->is_string()) return -1;
  const std::string& t = type->as_string();
  auto integer = [&](const char* name, std::int64_t fallback) {
    const Value* v = spec.get(name);
    return v && v->is_integer() ? v->as_integer() : fallback;
  };
  if (t == "torch.small_cnn" || t == "torch.mlp") return integer("embedding_dim", -1);
  if (t == "torch.conv_ae" || t == "torch.conv_vae") return integer("latent_dim", 16);
  if (t == "torch.resnet18" || t == "torch.resnet50") {
    std::int64_t d = integer("embedding_dim", 0);
    if (d > 0) return d;
    std::int64_t width = integer("width", 64);
    return (t == "torch.resnet18" ? 8 : 32) * width;  // the last stage's channels
  }
  if (t == "torch.concat") {
    const Value* mode = spec.get("mode");
    const Value* branch = spec.get("branch");
    std::int64_t v = branch ? embedding_dim_of(*branch) : -1;
    if (mode && mode->is_string() && mode->as_string() == "branch_only") return v;
    const Value* backbone = spec.get("backbone");
    std::int64_t i = backbone ? embedding_dim_of(*backbone) : -1;
    return i < 0 || v < 0 ? -1 : i + v;
  }
  if (t == "torch.blend") {
    const Value* head = spec.get("head");
    return head ? embedding_dim_of(*head) : -1;
  }
  return -1;
}

std::string spec_to_text(const Value& spec) { return spec.str(); }

namespace {
Value to_value(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Scalar: return Value::from_scalar_text(n.Scalar(), n.Tag() == "!");
    case YAML::NodeType::Sequence: {
      Value::List items;
      for (const auto& item : n) items.push_back(to_value(item));
      return Value::list(std::move(items));
    }
    case YAML::NodeType::Map: {
      Value::Map entries;
      for (const auto& kv : n) entries.emplace_back(kv.first.Scalar(), to_value(kv.second));
      return Value::map(std::move(entries));
    }
    default: return Value();
  }
}
}  // namespace

Value spec_from_text(const std::string& text) {
  YAML::Node n;
  try {
    n = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw DataError(cat("model spec is not YAML (", e.what(), "): ", text.substr(0, 200)));
  }
  Value v = to_value(n);
  if (!v.is_map() || !v.get("type")) throw DataError(cat("model spec has no type: ", text.substr(0, 200)));
  return v;
}

}  // namespace embedflow::torchfam
