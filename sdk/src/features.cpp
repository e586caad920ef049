#include "embedflow/features.hpp"

#include <cmath>

#include "embedflow/error.hpp"

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

void FeatureSet::append(const Record& batch, bool need_label) {
  const std::string where = cat(what, " batch ", batches);
  const Array* e = batch.find("embedding");
  if (!e) throw DataError(cat(where, ": no 'embedding' field (fields: ", batch.describe(), ")"));
  if (e->rank() != 1 && e->rank() != 2)
    throw DataError(cat(where, ": 'embedding' must be [B,D] or [D], got ", e->describe()));
  const std::int64_t n = e->rank() == 2 ? e->dim(0) : 1, d = e->rank() == 2 ? e->dim(1) : e->dim(0);
  if (d < 1) throw DataError(cat(where, ": 'embedding' has no dims (", e->describe(), ")"));
  if (dim >= 0 && d != dim)
    throw DataError(cat(where, ": 'embedding' has ", d, " dims, earlier ", what, " batches had ", dim));
  const std::size_t start = x.size();
  if (e->dtype() == DType::f32) {
    const float* p = e->data<float>();
    x.insert(x.end(), p, p + n * d);
  } else if (e->dtype() == DType::f64) {
    const double* p = e->data<double>();
    for (std::int64_t i = 0; i < n * d; ++i) x.push_back(static_cast<float>(p[i]));
  } else {
    throw DataError(cat(where, ": 'embedding' must be f32 or f64, got ", e->describe()));
  }
  for (std::size_t i = start; i < x.size(); ++i)
    if (!std::isfinite(x[i]))
      throw DataError(cat(where, ": embedding row ", (i - start) / static_cast<std::size_t>(d), " has a non-finite value"));
  dim = d;
  if (const Array* l = batch.find("label")) {
    if (!need_label && label.size() != static_cast<std::size_t>(rows() - n))
      throw DataError(cat(where, ": 'label' appears in some batches but not others"));
    auto v = integers(*l, where, "label", n);
    label.insert(label.end(), v.begin(), v.end());
  } else if (need_label) {
    throw DataError(cat(where, ": no 'label' field (fields: ", batch.describe(), ")"));
  }
  const Array* c = batch.find("camera");
  if (batches > 0 && (c != nullptr) != has_camera)
    throw DataError(cat(where, ": 'camera' appears in some batches but not others"));
  if (c) {
    has_camera = true;
    auto v = integers(*c, where, "camera", n);
    camera.insert(camera.end(), v.begin(), v.end());
  }
  const Array* idf = batch.find("id");
  if (batches > 0 && (idf != nullptr) != has_id) throw DataError(cat(where, ": 'id' appears in some batches but not others"));
  if (idf) {
    has_id = true;
    if (idf->numel() != n) throw DataError(cat(where, ": 'id' has ", idf->numel(), " values for ", n, " embeddings"));
    for (std::int64_t i = 0; i < n; ++i)
      id.push_back(idf->is_string() ? idf->string_at(i) : std::to_string(idf->as_int(i)));
  }
  ++batches;
}

}  // namespace embedflow
