#include "embedflow/features.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "embedflow/error.hpp"
#include "embedflow/node.hpp"
#include "embedflow/params.hpp"
#include "embedflow/suggest.hpp"

namespace embedflow {

namespace {
std::vector<std::int64_t> integers(const Array& a, const std::string& what, const char* field, std::int64_t n) {
  if (a.is_string() || a.dtype() == DType::f32 || a.dtype() == DType::f64)
    throw DataError(cat(what, ": field '", field, "' must be an integer array, got ", a.describe()));
  if (a.numel() != n)
    throw DataError(cat(what, ": field '", field, "' has ", a.numel(), " values for ", n, " embeddings (", a.describe(), ")"));
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = a.as_int(i);
  return v;
}
}  // namespace

void FeatureSet::append(const float* rows_data, std::int64_t n, std::int64_t d) {
  if (dim < 0) dim = d;
  if (d != dim) throw DataError(cat(what, ": embeddings have ", d, " dims, earlier ones had ", dim));
  x.insert(x.end(), rows_data, rows_data + n * d);
}

void FeatureSet::append(const Record& batch, bool need_label) { append(batch, need_label, FieldNames{}); }

void FeatureSet::append(const Record& batch, bool need_label, const FieldNames& names) {
  const std::string where = cat(what, " batch ", batches);
  const std::string& emb = names.embedding;
  const Array* e = batch.find(emb);
  if (!e) throw DataError(cat(where, ": no '", emb, "' field (fields: ", batch.describe(), ")"));
  if (e->rank() != 1 && e->rank() != 2)
    throw DataError(cat(where, ": '", emb, "' must be [B,D] or [D], got ", e->describe()));
  const std::int64_t n = e->rank() == 2 ? e->dim(0) : 1, d = e->rank() == 2 ? e->dim(1) : e->dim(0);
  if (d < 1) throw DataError(cat(where, ": '", emb, "' has no dims (", e->describe(), ")"));
  if (dim >= 0 && d != dim)
    throw DataError(cat(where, ": '", emb, "' has ", d, " dims, earlier ", what, " batches had ", dim));
  const std::size_t start = x.size();
  if (e->dtype() == DType::f32) {
    const float* p = e->data<float>();
    x.insert(x.end(), p, p + n * d);
  } else if (e->dtype() == DType::f64) {
    const double* p = e->data<double>();
    for (std::int64_t i = 0; i < n * d; ++i) x.push_back(static_cast<float>(p[i]));
  } else {
    throw DataError(cat(where, ": '", emb, "' must be f32 or f64, got ", e->describe()));
  }
  for (std::size_t i = start; i < x.size(); ++i)
    if (!std::isfinite(x[i]))
      throw DataError(cat(where, ": ", emb, " row ", (i - start) / static_cast<std::size_t>(d), " has a non-finite value"));
  dim = d;
  if (const Array* l = batch.find(names.label)) {
    if (!need_label && label.size() != static_cast<std::size_t>(rows() - n))
      throw DataError(cat(where, ": '", names.label, "' appears in some batches but not others"));
    auto v = integers(*l, where, names.label.c_str(), n);
    label.insert(label.end(), v.begin(), v.end());
  } else if (need_label) {
    throw DataError(cat(where, ": no '", names.label, "' field (fields: ", batch.describe(), ")"));
  }
  const Array* c = batch.find(names.camera);
  if (batches > 0 && (c != nullptr) != has_camera)
    throw DataError(cat(where, ": '", names.camera, "' appears in some batches but not others"));
  if (c) {
    has_camera = true;
    auto v = integers(*c, where, names.camera.c_str(), n);
    camera.insert(camera.end(), v.begin(), v.end());
  }
  const Array* idf = batch.find(names.id);
  if (batches > 0 && (idf != nullptr) != has_id)
    throw DataError(cat(where, ": '", names.id, "' appears in some batches but not others"));
  if (idf) {
    has_id = true;
    if (idf->numel() != n)
      throw DataError(cat(where, ": '", names.id, "' has ", idf->numel(), " values for ", n, " embeddings"));
    for (std::int64_t i = 0; i < n; ++i)
      id.push_back(idf->is_string() ? idf->string_at(i) : std::to_string(idf->as_int(i)));
  }
  ++batches;
}

const std::vector<std::string>& FieldNames::roles() {
  static const std::vector<std::string> r{"embedding", "label", "camera", "id"};
  return r;
}

const std::string& FieldNames::of(const std::string& role) const {
  if (role == "embedding") return embedding;
  if (role == "label") return label;
  if (role == "camera") return camera;
  if (role == "id") return id;
  throw ConfigError(cat("unknown field role '", role, "'"));
}

FieldNames FieldNames::from(const Params& params) {
  FieldNames n;
  if (!params.has("fields")) return n;
  const Value& v = params.value("fields");
  if (!v.is_map()) return n;  // check_fields reports it at load
  for (const auto& [role, name] : v.as_map()) {
    if (!name.is_string()) continue;
    if (role == "embedding") n.embedding = name.as_string();
    else if (role == "label") n.label = name.as_string();
    else if (role == "camera") n.camera = name.as_string();
    else if (role == "id") n.id = name.as_string();
  }
  return n;
}

void add_fields_param(NodeTypeBuilder& b) {
  b.param(Param::any("fields").optional().doc(
      "field names to read instead of the defaults, e.g. {embedding: feat, label: pid, camera: cam} (roles: embedding, "
      "label, camera, id)"));
}

DimBindings check_fields(SchemaContext& c, const std::vector<std::pair<std::string, std::string>>& ports) {
  const Params& p = c.params();
  const bool mapped = p.has("fields");
  FieldNames names;
  if (mapped) {
    const Value& v = p.value("fields");
    if (!v.is_map()) {
      c.error(cat("fields: expected a map from role (embedding, label, camera, id) to field name, got ", v.str()), "fields");
      return {};
    }
    std::map<std::string, std::string> taken;  // field name -> role
    for (const auto& [role, name] : v.as_map()) {
      const auto& roles = FieldNames::roles();
      if (std::find(roles.begin(), roles.end(), role) == roles.end()) {
        c.error(cat("fields: unknown role '", role, "'", did_you_mean(role, roles),
                    "; the roles are embedding, label, camera, id"),
                "fields");
        continue;
      }
      if (!name.is_string() || name.as_string().empty()) {
        c.error(cat("fields: role '", role, "' needs a field name (a string), got ", name.str()), "fields");
        continue;
      }
      auto [it, fresh] = taken.emplace(name.as_string(), role);
      if (!fresh) c.error(cat("fields: roles '", it->second, "' and '", role, "' both read field '", name.as_string(), "'"), "fields");
    }
    names = FieldNames::from(p);
  }
  DimBindings bindings;
  for (const auto& [port, text] : ports) {
    if (!c.connected(port)) continue;
    PortSchema required;
    const PortSchema declared = PortSchema::parse(text);
    for (const FieldSchema& f : declared.fields()) {
      FieldSchema renamed = f;
      const auto& roles = FieldNames::roles();
      if (std::find(roles.begin(), roles.end(), f.name) != roles.end()) renamed.name = names.of(f.name);
      required.add(renamed);
    }
    std::vector<std::string> found;
    unify(c.input(port), required, bindings, found);
    for (const auto& msg : found) c.error(cat("input '", port, "': ", msg), mapped ? "fields" : "");
  }
  return bindings;
}

}  // namespace embedflow
