// eval.knn_classifier — k-nearest-neighbour classification of a test set by a training set, as
// scikit-learn's KNeighborsClassifier (brute force): the k nearest training rows under any
// distance or kernel eval.retrieval offers (exact: a stable argsort of double-precision scores,
// ties by training row), a vote with uniform or distance weights, and vote ties settled by the
// smallest label (scikit-learn's rule) or by the label of the nearest neighbour among the tied.
// Reports accuracy, per-class accuracy (the recall of each true label) and the confusion matrix
// (rows: true label, columns: predicted) in <out>.json, <out>.md and <out>_confusion.png, and
// emits one `metrics` record (method, accuracy, per-class accuracy, confusion) for eval.report.
//
// Inputs:  train    embedding f32[B,D], label i64[B] (names as `fields` says)
//          test     the same fields
// Outputs: metrics  method, accuracy, labels, class_accuracy, confusion (one record at end of stream)
//
// Caveats: runs at close() on both whole sets; memory is the features plus one query_block x
// gallery_block float buffer. `weights: distance` weighs by 1/distance (those at distance 0
// alone when there are any, as scikit-learn does); under a kernel by the similarity. k larger
// than the training set is an error (exit 2) naming the node. The Markdown confusion table
// is left out beyond 50 labels (the JSON and picture keep them).
//
//   seed: 1
//   nodes:
//     train: {type: io.hdf5_reader, params: {path: data/reid_128.h5, object: train, batch_size: 256}}
//     test:  {type: io.hdf5_reader, params: {path: data/reid_128.h5, object: validation, batch_size: 256}}
//     knn:   {type: eval.knn_classifier, params: {k: 5, distance: cosine, weights: distance, out: out/knn}}
//   edges:
//     - train.out -> knn.train
//     - test.out -> knn.test
#include "eval_types.hpp"
#include "knn_common.hpp"

namespace embedflow::eval {
namespace {

using namespace evalcore;

class KnnClassifier final : public Node {
 public:
  void open(NodeContext& ctx) override {
    const Params& p = ctx.params();
    settings_ = knn_settings(ctx);
    spec_.kind = parse_distance(p.string("distance"));
    spec_.gamma = p.number("gamma");
    if (is_kernel(spec_.kind) && !(spec_.gamma > 0))
      throw ConfigError(cat("distance '", p.string("distance"), "' needs gamma > 0"));
    settings_.distance = distance_name(spec_.kind);
    settings_.kernel = is_kernel(spec_.kind);
    settings_.gamma = spec_.gamma;
    query_block_ = p.integer("query_block");
    gallery_block_ = p.integer("gallery_block");
    threads_ = std::max(1, ctx.threads());
    fields_ = FieldNames::from(p);
    train_.what = "train";
    test_.what = "test";
  }
  void process(std::size_t port, const RecordPtr& batch, Emitter&) override {
    (port == 0 ? train_ : test_).append(*batch, true, fields_);
  }
  void close(Emitter& out) override {
    if (train_.rows() == 0) throw DataError("no training embeddings arrived before end of stream");
    if (test_.rows() == 0) throw DataError("no test embeddings arrived before end of stream");
    if (train_.dim != test_.dim)
      throw DataError(cat("test embeddings have ", test_.dim, " dims but training embeddings have ", train_.dim));
    if (settings_.k > train_.rows())
      throw ConfigError(cat("k = ", settings_.k, " is larger than the training set (", train_.rows(), " rows)"));
    settings_.train_rows = train_.rows();
    BlockScorer scorer(spec_, test_.view(), train_.view());
    const ExactNeighbours nn = exact_knn(scorer, settings_.k, query_block_, gallery_block_, threads_);
    std::vector<double> values(nn.score.size());
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = score_to_value(spec_, nn.score[i]);
    out.emit(0, knn_report(settings_, test_.label, knn_predict(settings_, nn.index, values, train_.label)));
  }

 private:
  KnnSettings settings_;
  DistanceSpec spec_;
  int threads_ = 1;
  std::int64_t query_block_ = 1024, gallery_block_ = 4096;
  FieldNames fields_;
  FeatureSet train_, test_;
};

}  // namespace

NodeType knn_classifier_type() {
  NodeTypeBuilder b("eval.knn_classifier");
  b.doc("k-nearest-neighbour classification of a test set by a training set (scikit-learn's KNeighborsClassifier): "
        "accuracy, per-class accuracy, confusion matrix.")
      .example("knn: {type: eval.knn_classifier, params: {k: 5, distance: cosine, out: out/knn}}")
      .param(Param::choice("distance", distance_names()).default_value("euclidean")
                 .doc("neighbour measure (any of eval.retrieval's); kernels rank by decreasing similarity"))
      .param(Param::number("gamma").default_value(1.0).min(0).doc("kernel width: k = exp(-gamma * d)"))
      .param(Param::integer("query_block").default_value(1024).min(1).not_fingerprinted().doc("test rows per distance block"))
      .param(Param::integer("gallery_block").default_value(4096).min(1).not_fingerprinted().doc("training rows per distance block"))
      .param(Param::path("out").optional().doc("output prefix: <out>.json, <out>.md, <out>_confusion.png"))
      .param(Param::string("name").optional().doc("method name in tables (default: the node id)"))
      .input("train", "*", "training rows: embedding f32[B,D], label i64[B] (names as `fields` says)")
      .input("test", "*", "test rows, the same fields")
      .output("metrics", kKnnMetricsSchema, "one summary record at end of stream");
  add_knn_vote_params(b);
  add_fields_param(b);
  b.check([](SchemaContext& c) {
    check_fields(c, {{"train", "embedding: f32[N,D], label: i64[N]"}, {"test", "embedding: f32[B,D], label: i64[B]"}});
  });
  return b.create<KnnClassifier>();
}

}  // namespace embedflow::eval
