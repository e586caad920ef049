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
  openblas_set_num_threads(std::max(1, ctx.threads()));
}

void Learner::process(std::size_t port, const RecordPtr& batch, Emitter&) {
  (port == 0 ? train_ : validation_).append(*batch, needs_labels());
}

void Learner::close(Emitter& out) {
  if (train_.rows() == 0) throw DataError("no training embeddings arrived before end of stream");
  if (validation_.rows() > 0 && validation_.dim != train_.dim)
    throw DataError(cat("validation embeddings have ", validation_.dim, " dims but training embeddings have ", train_.dim));
  const metriccore::Data train = as_data(train_, train_x_);
  const metriccore::Data validation = as_data(validation_, validation_x_);
  const metriccore::Transform t = learn(*ctx_, train, validation);
  out.emit(0, transform_record(t, ctx_->id()));
}

}  // namespace embedflow::metric
