// The metric plugin: learners that emit a linear transform G (Mahalanobis, LMNN, SGD
// Mahalanobis, PCA) and metric.transform, which applies the latest G to a stream.
#include <cblas.h>

#include "metric_types.hpp"

namespace {
void register_types(embedflow::Registry& r) {
  using namespace embedflow::metric;
  r.add(mahalanobis_type());
  r.add(lmnn_type());
  r.add(sgd_mahalanobis_type());
  r.add(pca_type());
  r.add(transform_type());
}
}  // namespace

EMBEDFLOW_PLUGIN("metric", "0.1.0", "OpenBLAS " OPENBLAS_VERSION ", nanoflann", register_types)
