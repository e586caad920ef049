// metric.pca — principal component analysis as a preprocessing transform: G = the top
// `components` eigenvectors of the training covariance (optionally whitened), with the training
// mean, emitted for metric.transform. Learners on 2048-d features are cheaper (and Mahalanobis
// better conditioned) after PCA.
//
// Inputs:  train      embedding f32[B,D]
// Outputs: transform  G f32[K,D], mean f32[D] (one record at end of stream)
//
// Caveats: components <= D (checked when the first batch arrives).
//
//   seed: 1
//   nodes:
//     train: {type: io.hdf5_reader, params: {path: data/reid_128.h5, object: train, batch_size: 256}}
//     pca:   {type: metric.pca, params: {components: 32}}
//     apply: {type: metric.transform}
//     out:   {type: core.sink}
//   edges:
//     - train.out -> pca.train
//     - pca.transform -> apply.transform
//     - train.out -> apply.in
//     - apply.out -> out.in
#include "learner_common.hpp"
#include "metric_types.hpp"

namespace embedflow::metric {
namespace {

class Pca final : public Learner {
 protected:
  bool needs_labels() const override { return false; }
  metriccore::Transform learn(NodeContext& ctx, const metriccore::Data& train, const metriccore::Data&) override {
    const auto k = ctx.params().integer("components");
    if (k > train.d) throw ConfigError(cat("components ", k, " exceeds the feature dimension ", train.d));
    return metriccore::pca(train, static_cast<int>(k), ctx.params().boolean("whiten"));
  }
};

}  // namespace

NodeType pca_type() {
  NodeTypeBuilder b("metric.pca");
  b      .doc("PCA preprocessing: emits the top principal directions and the mean as a transform.")
      .example("pca: {type: metric.pca, params: {components: 64}}")
      .param(Param::integer("components").default_value(64).min(1).doc("output dimension K"))
      .param(Param::boolean("whiten").default_value(false).doc("scale each component to unit variance"))
      .input("train", "*", "training features: embedding f32[B,D] (names as `fields` says)")
      .output("transform", "G: f32[$components,D], mean: f32[D]", "the learned map, once at end of stream")
;
  add_learner_fields(b, "embedding: f32[B,D]");
  return b.create<Pca>();
}

}  // namespace embedflow::metric
