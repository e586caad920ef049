// metric.transform — applies a learned linear map to a stream of embeddings:
// embedding <- G (embedding - mean), other fields passed through untouched. G arrives on the
// `transform` side port from any metric.* learner; stream records wait until it has a value,
// and each record uses the latest G received.
//
// Inputs:  transform  (side) G f32[K,D], mean f32[D]
//          in         embedding f32[B,D] (+ any other fields)
// Outputs: out        embedding f32[B,K] (+ the other fields)
//
// Caveats: a D mismatch between G and the stream fails at the first record, naming both.
//
//   seed: 1
//   nodes:
//     train: {type: io.hdf5_reader, params: {path: data/reid_128.h5, object: train, batch_size: 256}}
//     pca:   {type: metric.pca, params: {components: 16}}
//     apply: {type: metric.transform}
//     sink:  {type: core.sink, params: {mode: print}}
//   edges:
//     - train.out -> pca.train
//     - pca.transform -> apply.transform
//     - train.out -> apply.in
//     - apply.out -> sink.in
#include "learner_common.hpp"
#include "metric_types.hpp"

namespace embedflow::metric {
namespace {

class Apply final : public Node {
 public:
  void open(NodeContext& ctx) override { ctx_ = &ctx; }
  void process(std::size_t, const RecordPtr& rec, Emitter& out) override {
    const RecordPtr side = ctx_->side(0);
    if (!side) throw DataError("no transform arrived on the side port before the first record");
    const Array& G = side->get("G");
    const Array& mean = side->get("mean");
    if (G.rank() != 2 || G.dtype() != DType::f32) throw DataError(cat("transform G must be f32[K,D], got ", G.describe()));
    const std::int64_t k = G.dim(0), d = G.dim(1);
    const Array& e = rec->get("embedding");
    const std::int64_t n = e.rank() == 2 ? e.dim(0) : 1, dim = e.rank() == 2 ? e.dim(1) : e.dim(0);
    if (dim != d)
      throw DataError(cat("embeddings have ", dim, " dims but the transform expects ", d, " (G is ", G.describe(), ")"));
    if (e.dtype() != DType::f32) throw DataError(cat("embedding must be f32, got ", e.describe()));
    metriccore::Transform t;
    t.in_dim = static_cast<int>(d);
    t.out_dim = static_cast<int>(k);
    t.G.assign(G.data<float>(), G.data<float>() + k * d);
    if (mean.numel() == d) t.mean.assign(mean.data<float>(), mean.data<float>() + d);
    std::vector<float> y = t.apply(e.data<float>(), n);
    Record r = *rec;
    r.set("embedding", Array::from_vector<float>(e.rank() == 2 ? Shape{n, k} : Shape{k}, std::move(y)));
    out.emit(0, std::move(r));
  }

 private:
  NodeContext* ctx_ = nullptr;
};

}  // namespace

NodeType transform_type() {
  return NodeTypeBuilder("metric.transform")
      .deterministic()
      .doc("Applies the latest learned transform G to each embedding: y = G (x - mean).")
      .example("apply: {type: metric.transform}")
      .side_input("transform", "G: f32[K,D], mean: f32[D]", "from metric.mahalanobis / lmnn / sgd_mahalanobis / pca")
      .input("in", "embedding: f32[B,D]", "embeddings; other fields pass through")
      .output("out", "embedding: f32[B,K]", "transformed embeddings")
      .check([](SchemaContext& c) {
        PortSchema s = c.input("in");
        if (s.is_any()) return;
        const FieldSchema* e = s.find("embedding");
        const FieldSchema* g = c.input("transform").find("G");
        FieldSchema out{"embedding", DType::f32, std::nullopt};
        if (e && e->shape && !e->shape->empty() && g && g->shape && g->shape->size() == 2)
          out.shape = std::vector<Dim>{e->shape->front(), g->shape->front()};
        s.add(out);
        c.set_output("out", s);
      })
      .create<Apply>();
}

}  // namespace embedflow::metric
