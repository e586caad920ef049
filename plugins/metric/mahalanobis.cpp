// metric.mahalanobis — the closed-form Mahalanobis metric of the re-identification report:
// A = inverse of the training covariance (total, or within-class), shrunk towards a scaled
// identity, emitted as G = A^(1/2) for metric.transform (||Gx - Gy||^2 = d_A(x, y)).
//
// Inputs:  train      embedding f32[B,D], label i64[B] (labels only for within_class)
// Outputs: transform  G f32[D,D], mean f32[D] (one record at end of stream)
//
// Caveats: with D close to or above the number of rows the covariance is singular: use
// shrinkage > 0, or metric.pca first. The report found this metric hurts re-id ranking:
// it whitens away the directions that separate identities along with the nuisance ones.
//
//   seed: 1
//   nodes:
//     train: {type: io.hdf5_reader, params: {path: data/reid_128.h5, object: train, batch_size: 256}}
//     maha:  {type: metric.mahalanobis, params: {shrinkage: 0.1}}
//     query: {type: io.hdf5_reader, params: {path: data/reid_128.h5, object: query, batch_size: 256}}
//     apply: {type: metric.transform}
//     eval:  {type: eval.retrieval}
//   edges:
//     - train.out -> maha.train
//     - maha.transform -> apply.transform
//     - query.out -> apply.in
//     - apply.out -> eval.query
#include "learner_common.hpp"
#include "metric_types.hpp"

namespace embedflow::metric {
namespace {

class Mahalanobis final : public Learner {
 protected:
  bool needs_labels() const override { return false; }
  metriccore::Transform learn(NodeContext& ctx, const metriccore::Data& train, const metriccore::Data&) override {
    const bool within = ctx.params().string("covariance") == "within_class";
    if (within && !train.label) throw DataError("covariance: within_class needs a 'label' field on the training stream");
    return metriccore::mahalanobis(train, ctx.params().number("shrinkage"),
                                   within ? metriccore::CovarianceKind::within_class : metriccore::CovarianceKind::total);
  }
};

}  // namespace

NodeType mahalanobis_type() {
  NodeTypeBuilder b("metric.mahalanobis");
  b      .doc("Mahalanobis metric from the (shrunk) inverse training covariance; emits G = A^(1/2).")
      .example("maha: {type: metric.mahalanobis, params: {shrinkage: 0.1}}")
      .param(Param::number("shrinkage").default_value(0.0).range(0, 1)
                 .doc("blend with a scaled identity: (1-s) C + s tr(C)/D I"))
      .param(Param::choice("covariance", {"total", "within_class"}).default_value("total")
                 .doc("covariance of all rows, or of rows minus their class mean"))
      .input("train", "*", "training features: embedding f32[B,D] (label i64[B] for within_class; names as `fields` says)")
      .output("transform", "G: f32[D,D], mean: f32[D]", "the learned map, once at end of stream")
;
  add_learner_fields(b, "embedding: f32[B,D]");
  return b.create<Mahalanobis>();
}

}  // namespace embedflow::metric
