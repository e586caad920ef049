// eval.index_knn — k-nearest-neighbour classification through a faiss index (eval.index_build's,
// built over the training rows): eval.knn_classifier's vote, accuracy, per-class accuracy and
// confusion matrix, with neighbours found by the index instead of an exact scan, plus the index's
// recall@k against exact search on `recall_queries` evenly spaced test rows.
//
// Inputs:  test     embedding f32[B,D], label i64[B] (names as `fields` says)
//          index    (optional) an eval.index_build's record over the training rows; or set `path`
//          gallery  (optional) the training rows in index order: exact distances and recall for an
//                   ivf_pq index, which holds only codes
// Outputs: metrics  eval.knn_classifier's record plus recall (f64[], NaN when not measured)
//
// Neighbours are ordered by `rescore` (index_common.hpp): by default faiss's distances for flat,
// ivf and hnsw (they hold the rows, so these are exact up to float rounding) and, for ivf_pq
// with the gallery port, eval.knn_classifier's double-precision distances; ties by training row.
// A flat index predicts what scikit-learn's KNeighborsClassifier (brute force) predicts. An
// approximate index that finds fewer than k rows for a test row lets those it found vote.
//
// Caveats: `weights: distance` needs a distance: not under inner_product. Memory: the test rows
// and the index; flat and hnsw indexes lend their rows for rescoring and recall, an ivf index's
// are gathered into a copy when needed.
//
//   seed: 1
//   nodes:
//     train: {type: io.hdf5_reader, params: {path: data/reid_128.h5, object: train, batch_size: 1024}}
//     test:  {type: io.hdf5_reader, params: {path: data/reid_128.h5, object: validation, batch_size: 256}}
//     index: {type: eval.index_build, params: {kind: hnsw, M: 16, path: out/train_hnsw.faiss}}
//     knn:   {type: eval.index_knn, params: {k: 5, ef_search: 128, out: out/knn_hnsw}}
//   edges:
//     - train.out -> index.gallery
//     - index.index -> knn.index
//     - test.out -> knn.test
#include <limits>

#include "eval_types.hpp"
#include "index_candidates.hpp"
#include "index_common.hpp"
#include "knn_common.hpp"

namespace embedflow::eval {
namespace {

using namespace evalcore;

class IndexKnn final : public Node {
 public:
  void open(NodeContext& ctx) override {
    search_.open(ctx);
    settings_ = knn_settings(ctx);
    fields_ = FieldNames::from(ctx.params());
    node_ = ctx.id();
    test_.what = "test";
    train_.what = "gallery";
  }
  void process(std::size_t port, const RecordPtr& batch, Emitter&) override {
    if (port == 0) test_.append(*batch, true, fields_);
    else if (port == 1) search_.take_record(batch);
    else train_.append(*batch, false, fields_);
  }
  void close(Emitter& out) override {
    if (test_.rows() == 0) throw DataError("no test embeddings arrived before end of stream");
    const IndexedGallery g = search_.load(test_.dim, "test embeddings");
    if (settings_.k > g.index.rows())
      throw ConfigError(cat("k = ", settings_.k, " is larger than ", g.source, " (", g.index.rows(), " rows)"));
    const AnnMetric metric = g.index.metric();
    if (metric == AnnMetric::inner_product && settings_.weights == KnnWeights::distance)
      throw ConfigError(cat("weights: distance needs a distance, and ", g.source, " ranks by inner product"));
    const DistanceSpec spec = exact_spec(metric);
    settings_.distance = metric == AnnMetric::inner_product ? "inner_product" : distance_name(spec.kind);
    settings_.train_rows = g.index.rows();

    const bool rescore = search_.rescores(g, train_);
    const GalleryRows rows = search_.exact_rows(g, train_, rescore || search_.recall_queries() > 0);
    const std::int64_t fetch = std::min(g.index.rows(), settings_.k + (rescore ? kRescoreMargin : 0));
    const Candidates c = ordered_candidates(g, rows, test_.view(), fetch, search_, rescore, &timing_);
    const Candidates nn = first_valid(c, settings_.k, false);
    std::vector<double> values(nn.score.size());
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = score_to_value(spec, nn.score[i]);

    const RecallReport recall = measure_recall(g, rows, test_.view(), settings_.k, false, search_);
    publish_recall(node_, settings_.name, g, recall, search_, rescore, timing_);
    Record m = knn_report(settings_, test_.label, knn_predict(settings_, nn.index, values, g.label),
                          [&](JsonWriter& j) { write_recall_json(j, g, recall, search_, rescore, timing_); });
    m.set("recall", Array::scalar<double>(recall.measured ? recall.recall : std::numeric_limits<double>::quiet_NaN()));
    out.emit(0, std::move(m));
  }

 private:
  KnnSettings settings_;
  IndexSearch search_;
  SearchTiming timing_;
  FieldNames fields_;
  std::string node_;
  FeatureSet test_, train_;
};

}  // namespace

NodeType index_knn_type() {
  NodeTypeBuilder b("eval.index_knn");
  b.doc("k-nearest-neighbour classification through a faiss index over the training rows (eval.index_build's): "
        "eval.knn_classifier's accuracy, per-class accuracy and confusion matrix, and the index's recall@k.")
      .example("knn: {type: eval.index_knn, params: {path: out/train_hnsw.faiss, k: 5, ef_search: 128, out: out/knn_hnsw}}")
      .input("test", "*", "test rows: embedding f32[B,D], label i64[B] (names as `fields` says)")
      .optional_input("index", kIndexSchema, "an eval.index_build's index record over the training rows (or set path)")
      .optional_input("gallery", "*", "the training rows in index order, for exact distances and recall under ivf_pq")
      .output("metrics", kKnnMetricsSchema, "one summary record at end of stream, with recall");
  add_index_search_params(b);
  add_knn_vote_params(b);
  b.param(Param::path("out").optional().doc("output prefix: <out>.json, <out>.md, <out>_confusion.png"))
      .param(Param::string("name").optional().doc("method name in tables (default: the node id)"));
  add_fields_param(b);
  b.check([](SchemaContext& c) {
    check_fields(c, {{"test", "embedding: f32[B,D], label: i64[B]"}, {"gallery", "embedding: f32[N,D]"}});
  });
  b.check(check_index_source);
  return b.create<IndexKnn>();
}

}  // namespace embedflow::eval
