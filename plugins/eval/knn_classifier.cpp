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
#include <embedflow/plot/heatmap.hpp>

#include <limits>
#include <map>

#include "eval_types.hpp"
#include "knn.hpp"
#include "report.hpp"

namespace embedflow::eval {
namespace {

using namespace evalcore;

constexpr std::size_t kMaxMarkdownLabels = 50;

class KnnClassifier final : public Node {
 public:
  void open(NodeContext& ctx) override {
    const Params& p = ctx.params();
    spec_.kind = parse_distance(p.string("distance"));
    spec_.gamma = p.number("gamma");
    if (is_kernel(spec_.kind) && !(spec_.gamma > 0))
      throw ConfigError(cat("distance '", p.string("distance"), "' needs gamma > 0"));
    k_ = static_cast<int>(p.integer("k"));
    weights_ = p.string("weights") == "distance" ? KnnWeights::distance : KnnWeights::uniform;
    tie_rule_ = p.string("tie_rule") == "nearest" ? KnnTieRule::nearest : KnnTieRule::smallest_label;
    query_block_ = p.integer("query_block");
    gallery_block_ = p.integer("gallery_block");
    threads_ = std::max(1, ctx.threads());
    out_ = p.has("out") ? p.string("out") : "";
    name_ = p.has("name") ? p.string("name") : ctx.id();
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
    if (k_ > train_.rows())
      throw ConfigError(cat("k = ", k_, " is larger than the training set (", train_.rows(), " rows)"));
    BlockScorer scorer(spec_, test_.view(), train_.view());
    const ExactNeighbours nn = exact_knn(scorer, k_, query_block_, gallery_block_, threads_);
    const std::int64_t n = test_.rows();
    std::vector<std::int64_t> predicted(static_cast<std::size_t>(n));
    std::vector<std::int64_t> labels(static_cast<std::size_t>(k_));
    std::vector<double> values(static_cast<std::size_t>(k_));
    for (std::int64_t i = 0; i < n; ++i) {
      for (int r = 0; r < k_; ++r) {
        const std::size_t at = static_cast<std::size_t>(i) * static_cast<std::size_t>(k_) + static_cast<std::size_t>(r);
        labels[static_cast<std::size_t>(r)] = train_.label[static_cast<std::size_t>(nn.index[at])];
        values[static_cast<std::size_t>(r)] = score_to_value(spec_, nn.score[at]);
      }
      predicted[static_cast<std::size_t>(i)] =
          knn_vote(labels.data(), values.data(), k_, weights_, is_kernel(spec_.kind), tie_rule_);
    }
    // Labels of the confusion matrix: every true and predicted label, in increasing order.
    std::map<std::int64_t, std::size_t> slot;
    for (auto y : test_.label) slot.emplace(y, 0);
    for (auto y : predicted) slot.emplace(y, 0);
    std::vector<std::int64_t> names;
    for (auto& [label, s] : slot) s = names.size(), names.push_back(label);
    const std::size_t L = names.size();
    std::vector<std::vector<double>> confusion(L, std::vector<double>(L, 0.0));
    std::int64_t correct = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const auto t = test_.label[static_cast<std::size_t>(i)], p = predicted[static_cast<std::size_t>(i)];
      confusion[slot[t]][slot[p]] += 1;
      correct += t == p;
    }
    const double accuracy = static_cast<double>(correct) / static_cast<double>(n);
    std::vector<double> class_accuracy(L, 0.0), support(L, 0.0);
    for (std::size_t c = 0; c < L; ++c) {
      for (std::size_t p = 0; p < L; ++p) support[c] += confusion[c][p];
      class_accuracy[c] = support[c] > 0 ? confusion[c][c] / support[c] : std::numeric_limits<double>::quiet_NaN();
    }
    log_info(name_, "kNN k=", k_, " (", distance_name(spec_.kind), ", ", weights_ == KnnWeights::distance ? "distance" : "uniform",
             " weights) on ", n, " test rows against ", train_.rows(), ": accuracy ", percent(accuracy), "%");
    if (!out_.empty()) write_outputs(names, confusion, class_accuracy, support, accuracy, predicted);

    Record m;
    m.set("method", Array::string_scalar(name_));
    m.set("accuracy", Array::scalar<double>(accuracy));
    const auto l = static_cast<std::int64_t>(L);
    m.set("labels", Array::from_vector<std::int64_t>({l}, names));
    m.set("class_accuracy", Array::from_vector<double>({l}, class_accuracy));
    std::vector<std::int64_t> flat;
    for (const auto& row : confusion)
      for (double v : row) flat.push_back(static_cast<std::int64_t>(v));
    m.set("confusion", Array::from_vector<std::int64_t>({l, l}, flat));
    out.emit(0, std::move(m));
  }

 private:
  void write_outputs(const std::vector<std::int64_t>& names, const std::vector<std::vector<double>>& confusion,
                     const std::vector<double>& class_accuracy, const std::vector<double>& support, double accuracy,
                     const std::vector<std::int64_t>& predicted) const {
    const std::size_t L = names.size();
    const char* weights = weights_ == KnnWeights::distance ? "distance" : "uniform";
    const char* tie = tie_rule_ == KnnTieRule::nearest ? "nearest" : "smallest_label";
    JsonWriter j;
    j.begin_object().field("method", name_).field("k", k_).field("distance", distance_name(spec_.kind));
    if (is_kernel(spec_.kind)) j.field("gamma", spec_.gamma);
    j.field("weights", std::string(weights)).field("tie_rule", std::string(tie));
    j.field("train_rows", train_.rows()).field("test_rows", test_.rows()).field("accuracy", accuracy);
    j.key("per_class").begin_array();
    for (std::size_t c = 0; c < L; ++c)
      j.begin_object()
          .field("label", names[c])
          .field("support", static_cast<std::int64_t>(support[c]))
          .field("accuracy", class_accuracy[c])
          .end_object();
    j.end_array();
    // Integers written as integers: numbers() keeps 6 significant digits, too few for re-id ids.
    auto integers = [&j](const std::vector<std::int64_t>& v) {
      j.begin_array();
      for (auto x : v) j.value(x);
      j.end_array();
    };
    j.key("labels");
    integers(names);
    j.key("confusion").begin_array();
    for (const auto& row : confusion) integers(std::vector<std::int64_t>(row.begin(), row.end()));
    j.end_array();
    j.key("predicted");
    integers(predicted);
    j.end_object();
    write_text_atomic(out_ + ".json", j.str() + "\n");

    std::string md = cat("### ", name_, " (kNN, k = ", k_, ", ", distance_name(spec_.kind), ", ", weights, " weights, ties: ",
                         tie, ")\n\nAccuracy: ", percent(accuracy), "% of ", test_.rows(), " test rows.\n\n");
    std::vector<std::vector<std::string>> rows;
    for (std::size_t c = 0; c < L; ++c)
      if (support[c] > 0)
        rows.push_back({std::to_string(names[c]), std::to_string(static_cast<std::int64_t>(support[c])), percent(class_accuracy[c])});
    md += cat("Per class (accuracy = the share of its test rows predicted right):\n\n",
              markdown_table({"label", "test rows", "accuracy %"}, rows));
    if (L <= kMaxMarkdownLabels) {
      std::vector<std::string> header{"true \\ predicted"};
      for (auto y : names) header.push_back(std::to_string(y));
      std::vector<std::vector<std::string>> cm;
      for (std::size_t r = 0; r < L; ++r) {
        std::vector<std::string> row{std::to_string(names[r])};
        for (double v : confusion[r]) row.push_back(std::to_string(static_cast<std::int64_t>(v)));
        cm.push_back(row);
      }
      md += cat("\nConfusion matrix (rows: true label, columns: predicted):\n\n", markdown_table(header, cm));
    } else {
      md += cat("\nThe confusion matrix (", L, " labels) is in ", out_, ".json and ", out_, "_confusion.png.\n");
    }
    write_text_atomic(out_ + ".md", md);

    HeatMap h;
    h.title = cat(name_, ": kNN confusion (accuracy ", percent(accuracy, 1), "%)");
    h.x_label = "predicted label";
    h.y_label = "true label";
    for (auto y : names) h.row_names.push_back(std::to_string(y)), h.col_names.push_back(std::to_string(y));
    h.values = confusion;
    save_heatmap(out_ + "_confusion.png", h);
  }

  DistanceSpec spec_;
  int k_ = 5, threads_ = 1;
  KnnWeights weights_ = KnnWeights::uniform;
  KnnTieRule tie_rule_ = KnnTieRule::smallest_label;
  std::int64_t query_block_ = 1024, gallery_block_ = 4096;
  std::string out_, name_;
  FieldNames fields_;
  FeatureSet train_, test_;
};

}  // namespace

NodeType knn_classifier_type() {
  NodeTypeBuilder b("eval.knn_classifier");
  b.doc("k-nearest-neighbour classification of a test set by a training set (scikit-learn's KNeighborsClassifier): "
        "accuracy, per-class accuracy, confusion matrix.")
      .example("knn: {type: eval.knn_classifier, params: {k: 5, distance: cosine, out: out/knn}}")
      .param(Param::integer("k").default_value(5).min(1).doc("neighbours that vote"))
      .param(Param::choice("distance", distance_names()).default_value("euclidean")
                 .doc("neighbour measure (any of eval.retrieval's); kernels rank by decreasing similarity"))
      .param(Param::number("gamma").default_value(1.0).min(0).doc("kernel width: k = exp(-gamma * d)"))
      .param(Param::choice("weights", {"uniform", "distance"}).default_value("uniform")
                 .doc("vote weights: 1 each, or 1/distance (the similarity under a kernel)"))
      .param(Param::choice("tie_rule", {"smallest_label", "nearest"}).default_value("smallest_label")
                 .doc("a tied vote goes to the smallest label (scikit-learn) or to the tied label with the nearest neighbour"))
      .param(Param::integer("query_block").default_value(1024).min(1).not_fingerprinted().doc("test rows per distance block"))
      .param(Param::integer("gallery_block").default_value(4096).min(1).not_fingerprinted().doc("training rows per distance block"))
      .param(Param::path("out").optional().doc("output prefix: <out>.json, <out>.md, <out>_confusion.png"))
      .param(Param::string("name").optional().doc("method name in tables (default: the node id)"))
      .input("train", "*", "training rows: embedding f32[B,D], label i64[B] (names as `fields` says)")
      .input("test", "*", "test rows, the same fields")
      .output("metrics", "method: str[], accuracy: f64[], labels: i64[L], class_accuracy: f64[L], confusion: i64[L,L]",
              "one summary record at end of stream");
  add_fields_param(b);
  b.check([](SchemaContext& c) {
    check_fields(c, {{"train", "embedding: f32[N,D], label: i64[N]"}, {"test", "embedding: f32[B,D], label: i64[B]"}});
  });
  return b.create<KnnClassifier>();
}

}  // namespace embedflow::eval
