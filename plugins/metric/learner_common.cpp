#include "learner_common.hpp"

#include <cblas.h>

namespace embedflow::metric {

Record transform_record(const metriccore::Transform& t, const std::string& method) {
  std::vector<float> g(t.G.begin(), t.G.end());
  std::vector<float> mean(static_cast<std::size_t>(t.in_dim), 0.0f);
  for (std::size_t i = 0; i < t.mean.size(); ++i) mean[i] = static_cast<float>(t.mean[i]);
  Record r;
  r.set("G", Array::from_vector<float>({t.out_dim, t.in_dim}, std::move(g)));
  r.set("mean", Array::from_vector<float>({t.in_dim}, std::move(mean)));
  r.set("method", Array::string_scalar(method));
  return r;
}

metriccore::Data as_data(const FeatureSet& f, std::vector<double>& storage) {
  storage.assign(f.x.begin(), f.x.end());
  return {storage.data(), f.rows(), static_cast<int>(std::max<std::int64_t>(f.dim, 0)), f.label.empty() ? nullptr : f.label.data()};
}

void Learner::open(NodeContext& ctx) {
  ctx_ = &ctx;
  train_.what = "train";
  validation_.what = "validation";
  out_ = ctx.params().has("out") ? ctx.params().string("out") : "";
  fields_ = FieldNames::from(ctx.params());
  openblas_set_num_threads(std::max(1, ctx.threads()));
}

void Learner::process(std::size_t port, const RecordPtr& batch, Emitter&) {
  (port == 0 ? train_ : validation_).append(*batch, needs_labels(), fields_);
}

void Learner::close(Emitter& out) {
  if (train_.rows() == 0) throw DataError("no training embeddings arrived before end of stream");
  if (validation_.rows() > 0 && validation_.dim != train_.dim)
    throw DataError(cat("validation embeddings have ", validation_.dim, " dims but training embeddings have ", train_.dim));
  const metriccore::Data train = as_data(train_, train_x_);
  const metriccore::Data validation = as_data(validation_, validation_x_);
  const metriccore::Transform t = learn(*ctx_, train, validation);
  Record r = transform_record(t, ctx_->id());
  if (has_outcome_) {
    r.set("iterations", Array::scalar<std::int64_t>(iterations_));
    r.set("objective", Array::scalar<double>(objective_));
    Array converged = Array::zeros(DType::boolean, {});
    converged.mutable_data<bool>()[0] = converged_;
    r.set("converged", std::move(converged));
    r.set("stop_reason", Array::string_scalar(stop_reason_));
  }
  out.emit(0, std::move(r));
}

void Learner::set_outcome(std::int64_t iterations, double objective, bool converged, const std::string& stop_reason) {
  has_outcome_ = true;
  iterations_ = iterations, objective_ = objective, converged_ = converged, stop_reason_ = stop_reason;
}

void add_learner_fields(NodeTypeBuilder& b, const std::string& train_schema) {
  add_fields_param(b);
  b.check([train_schema](SchemaContext& c) {
    std::string validation = train_schema;
    for (std::size_t at = validation.find("[B"); at != std::string::npos; at = validation.find("[B", at + 2)) validation[at + 1] = 'V';
    std::vector<std::pair<std::string, std::string>> ports{{"train", train_schema}};
    // The validation port exists on the learners that take one.
    try {
      (void)c.input("validation");
      ports.emplace_back("validation", validation);
    } catch (const ConfigError&) {
    }
    const DimBindings bound = check_fields(c, ports);
    // The transform's D is the training embedding's: bind it for the nodes downstream.
    auto d = bound.find("D");
    if (d != bound.end()) {
      PortSchema out = c.output("transform");
      c.set_output("transform", substitute(out, {}, bound));
    }
  });
}

}  // namespace embedflow::metric
