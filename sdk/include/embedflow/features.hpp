// Accumulates the batches an evaluator or learner receives (embedding f32[B,D] or f32[D], label
// i64[B], optional camera i64[B], optional id i64[B] or str[B]) into contiguous arrays, with
// errors that name the port, the batch and the field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "embedflow/record.hpp"
#include "embedflow/schema.hpp"

namespace embedflow {

class NodeTypeBuilder;
class Params;
class SchemaContext;

// The field names an evaluator or learner reads, after its `fields` parameter renamed them:
// `fields: {embedding: feat, label: pid, camera: cam}` reads an h5py table's own columns without
// a chain of core.rename nodes. One mapping per node, applied to all of its feature inputs.
struct FieldNames {
  std::string embedding = "embedding", label = "label", camera = "camera", id = "id";
  static const std::vector<std::string>& roles();  // embedding, label, camera, id
  // The names in params' `fields` (defaults for roles it leaves out, or when it is unset).
  static FieldNames from(const Params& params);
  const std::string& of(const std::string& role) const;
};

// Declares the optional `fields` parameter (a map from role to field name).
void add_fields_param(NodeTypeBuilder& builder);

// Check hook part for the `fields` parameter: an unknown role, a non-string name or two roles on
// one field are errors located at `fields`. Then each (input port, required schema) pair, its
// schema written with the default names (`embedding: f32[B,D], label: i64[B]`), is renamed by
// the mapping and unified with what arrives on the port, which must be declared "*" (the engine
// cannot rename a declared schema); symbols bind across all the listed ports, so a 64-d gallery
// against 128-d queries is caught here. Problems are located at `fields` when the node sets it,
// else at the node. Returns the bindings (for output schemas with D).
DimBindings check_fields(SchemaContext& c, const std::vector<std::pair<std::string, std::string>>& ports);

// Row-major rows x cols floats, not owned.
struct MatrixView {
  const float* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  const float* row(std::int64_t i) const { return data + i * cols; }
};

struct FeatureSet {
  std::string what;  // "query", "gallery", "train": used in messages
  std::int64_t dim = -1;
  std::vector<float> x;
  std::vector<std::int64_t> label, camera;
  std::vector<std::string> id;
  bool has_camera = false, has_id = false;
  std::int64_t batches = 0;

  std::int64_t rows() const { return dim > 0 ? static_cast<std::int64_t>(x.size()) / dim : 0; }
  MatrixView view() const { return {x.data(), rows(), dim}; }
  // need_label: the batch must carry `label`. Cameras and ids must be present in every batch or
  // in none.
  void append(const Record& batch, bool need_label);
  // The same, reading the fields under the names `names` gives (messages use those names).
  void append(const Record& batch, bool need_label, const FieldNames& names);
  void append(const float* rows, std::int64_t n, std::int64_t d);  // labels left empty
};

}  // namespace embedflow
