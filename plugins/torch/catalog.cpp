#include "catalog.hpp"

#include <embedflow/yaml.hpp>

namespace embedflow::torchfam {

PortSchema model_input_schema(const PortSchema& batch) {
  if (batch.is_any()) return PortSchema::any();
  for (const auto& name : kImageFields) {
    const FieldSchema* f = batch.find(name);
    if (!f) continue;
    FieldSchema in = *f;
    in.name = "image";
    if (in.dtype == DType::u8) {
      in.dtype = DType::f32;
      if (in.shape && in.shape->size() == 4 && in.shape->back().kind != Dim::Kind::rest)
        in.shape = std::vector<Dim>{(*in.shape)[0], (*in.shape)[3], (*in.shape)[1], (*in.shape)[2]};
    } else if (in.dtype) {
      in.dtype = DType::f32;  // f64 images are converted too
    }
    PortSchema out;
    out.add(std::move(in));
    return out;
  }
  return PortSchema::any();
}

Dim produced_dim(const PortSchema& produces, const std::string& field) {
  const FieldSchema* f = produces.find(field);
  if (!f || !f->shape || f->shape->size() != 2) return Dim{};
  const Dim& d = (*f->shape)[1];
  return d.kind == Dim::Kind::fixed ? d : Dim{};
}

std::int64_t flattened_size(const PortSchema& input) {
  if (input.is_any() || input.fields().empty()) return -1;
  const FieldSchema& f = input.fields().front();
  if (!f.shape || f.shape->size() < 2) return -1;
  std::int64_t n = 1;
  for (std::size_t i = 1; i < f.shape->size(); ++i) {
    if ((*f.shape)[i].kind != Dim::Kind::fixed) return -1;
    n *= (*f.shape)[i].value;
  }
  return n;
}

FieldSchema embedding_field(const std::string& name, Dim dim) {
  return FieldSchema{name, DType::f32, std::vector<Dim>{Dim{Dim::Kind::symbol, -1, "N"}, dim}};
}

std::string spec_to_text(const Value& spec) { return spec.str(); }

Value spec_from_text(const std::string& text, const std::string& what) {
  Value v;
  try {
    v = parse_yaml(text, what);
  } catch (const ConfigError& e) {
    throw DataError(cat(what, " is not YAML (", e.what(), "): ", text.substr(0, 200)));
  }
  if (!v.is_map() || !v.get("type")) throw DataError(cat(what, " has no type: ", text.substr(0, 200)));
  return v;
}

}  // namespace embedflow::torchfam
