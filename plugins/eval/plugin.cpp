// The eval plugin: retrieval, clustering, triplet, pair and reconstruction evaluators, the report
// that gathers several methods' metrics into one table and one CMC chart, and a 2-D scatter plot.
#include <cblas.h>

#include <string>

#include "eval_types.hpp"

namespace {
void register_types(embedflow::Registry& r) {
  using namespace embedflow::eval;
  r.add(retrieval_type());
  r.add(clustering_type());
  r.add(triplet_accuracy_type());
  r.add(view_invariance_type());
  r.add(pair_prediction_type());
  r.add(report_type());
  r.add(scatter_type());
  r.add(reconstruction_type());
  r.add(learning_curve_type());
  r.add(curve_chart_type());
  r.add(neighbour_average_type());
  r.add(knn_classifier_type());
  r.add(tsne_type());
  r.add(index_build_type());
  r.add(index_retrieval_type());
  r.add(index_knn_type());
}
}  // namespace

EMBEDFLOW_PLUGIN("eval", "0.1.0", "OpenBLAS " OPENBLAS_VERSION ", OpenCV, faiss " EMBEDFLOW_FAISS_VERSION, register_types)
