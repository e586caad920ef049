// Glue shared by the metric learners: the training-stream node base (accumulate batches, learn
// at close, emit the transform record) and the transform record's layout.
#pragma once

#include <embedflow/embedflow.hpp>
#include <embedflow/features.hpp>

#include "learners.hpp"

namespace embedflow::metric {

// A transform record: y = G (x - mean).
inline const char* kTransformSchema = "G: f32[K,D], mean: f32[D]";
Record transform_record(const metriccore::Transform& t, const std::string& method);

// Base of the learner nodes: input 0 = train (embedding, label), input 1 (optional) =
// validation; learn() runs at close() and its Transform is emitted on output 0.
class Learner : public Node {
 public:
  void open(NodeContext& ctx) override;
  void process(std::size_t port, const RecordPtr& batch, Emitter& out) override;
  void close(Emitter& out) override;

 protected:
  virtual metriccore::Transform learn(NodeContext& ctx, const metriccore::Data& train, const metriccore::Data& validation) = 0;
  virtual bool needs_labels() const { return true; }
  // Iterative learners say how they ended; close() adds it to the transform record
  // (iterations i64, objective f64, converged bool, stop_reason str).
  void set_outcome(std::int64_t iterations, double objective, bool converged, const std::string& stop_reason);
  NodeContext* ctx_ = nullptr;
  std::string out_;  // optional report prefix

 private:
  FeatureSet train_, validation_;
  std::vector<double> train_x_, validation_x_;
  FieldNames fields_;
  bool has_outcome_ = false, converged_ = false;
  std::int64_t iterations_ = 0;
  double objective_ = 0;
  std::string stop_reason_;
};

metriccore::Data as_data(const FeatureSet& f, std::vector<double>& storage);

// The learners' `fields` parameter and its check (SDK check_fields on train and validation);
// `train_schema` is what the learner reads, written with the default names.
void add_learner_fields(NodeTypeBuilder& b, const std::string& train_schema);

}  // namespace embedflow::metric
