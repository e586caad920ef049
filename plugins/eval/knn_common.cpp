#include "knn_common.hpp"

#include <embedflow/plot/heatmap.hpp>

#include <limits>
#include <map>

namespace embedflow::eval {

using namespace evalcore;

namespace {

constexpr std::size_t kMaxMarkdownLabels = 50;

const char* weights_name(KnnWeights w) { return w == KnnWeights::distance ? "distance" : "uniform"; }
const char* tie_rule_name(KnnTieRule t) { return t == KnnTieRule::nearest ? "nearest" : "smallest_label"; }

struct Confusion {
  std::vector<std::int64_t> names;  // every true and predicted label, increasing
  std::vector<std::vector<double>> counts;
  std::vector<double> class_accuracy, support;
  double accuracy = 0;
};

Confusion confusion_of(const std::vector<std::int64_t>& truth, const std::vector<std::int64_t>& predicted) {
  Confusion c;
  std::map<std::int64_t, std::size_t> slot;
  for (auto y : truth) slot.emplace(y, 0);
  for (auto y : predicted) slot.emplace(y, 0);
  for (auto& [label, s] : slot) s = c.names.size(), c.names.push_back(label);
  const std::size_t L = c.names.size();
  c.counts.assign(L, std::vector<double>(L, 0.0));
  std::int64_t correct = 0;
  for (std::size_t i = 0; i < truth.size(); ++i) {
    c.counts[slot[truth[i]]][slot[predicted[i]]] += 1;
    correct += truth[i] == predicted[i];
  }
  c.accuracy = static_cast<double>(correct) / static_cast<double>(truth.size());
  c.class_accuracy.assign(L, 0.0);
  c.support.assign(L, 0.0);
  for (std::size_t r = 0; r < L; ++r) {
    for (std::size_t p = 0; p < L; ++p) c.support[r] += c.counts[r][p];
    c.class_accuracy[r] = c.support[r] > 0 ? c.counts[r][r] / c.support[r] : std::numeric_limits<double>::quiet_NaN();
  }
  return c;
}

void write_json(const KnnSettings& s, const Confusion& c, std::int64_t test_rows, const std::vector<std::int64_t>& predicted,
                const std::function<void(JsonWriter&)>& extra) {
  JsonWriter j;
  j.begin_object().field("method", s.name).field("k", s.k).field("distance", s.distance);
  if (s.kernel) j.field("gamma", s.gamma);
  j.field("weights", std::string(weights_name(s.weights))).field("tie_rule", std::string(tie_rule_name(s.tie_rule)));
  j.field("train_rows", s.train_rows).field("test_rows", test_rows).field("accuracy", c.accuracy);
  j.key("per_class").begin_array();
  for (std::size_t r = 0; r < c.names.size(); ++r)
    j.begin_object()
        .field("label", c.names[r])
        .field("support", static_cast<std::int64_t>(c.support[r]))
        .field("accuracy", c.class_accuracy[r])
        .end_object();
  j.end_array();
  // Integers written as integers: numbers() keeps 6 significant digits, too few for re-id ids.
  auto integers = [&j](const std::vector<std::int64_t>& v) {
    j.begin_array();
    for (auto x : v) j.value(x);
    j.end_array();
  };
  j.key("labels");
  integers(c.names);
  j.key("confusion").begin_array();
  for (const auto& row : c.counts) integers(std::vector<std::int64_t>(row.begin(), row.end()));
  j.end_array();
  j.key("predicted");
  integers(predicted);
  if (extra) extra(j);
  j.end_object();
  write_text_atomic(s.out + ".json", j.str() + "\n");
}

void write_markdown_and_chart(const KnnSettings& s, const Confusion& c, std::int64_t test_rows) {
  const std::size_t L = c.names.size();
  std::string md = cat("### ", s.name, " (kNN, k = ", s.k, ", ", s.distance, ", ", weights_name(s.weights),
                       " weights, ties: ", tie_rule_name(s.tie_rule), ")\n\nAccuracy: ", percent(c.accuracy), "% of ",
                       test_rows, " test rows.\n\n");
  std::vector<std::vector<std::string>> rows;
  for (std::size_t r = 0; r < L; ++r)
    if (c.support[r] > 0)
      rows.push_back({std::to_string(c.names[r]), std::to_string(static_cast<std::int64_t>(c.support[r])),
                      percent(c.class_accuracy[r])});
  md += cat("Per class (accuracy = the share of its test rows predicted right):\n\n",
            markdown_table({"label", "test rows", "accuracy %"}, rows));
  if (L <= kMaxMarkdownLabels) {
    std::vector<std::string> header{"true \\ predicted"};
    for (auto y : c.names) header.push_back(std::to_string(y));
    std::vector<std::vector<std::string>> cm;
    for (std::size_t r = 0; r < L; ++r) {
      std::vector<std::string> row{std::to_string(c.names[r])};
      for (double v : c.counts[r]) row.push_back(std::to_string(static_cast<std::int64_t>(v)));
      cm.push_back(row);
    }
    md += cat("\nConfusion matrix (rows: true label, columns: predicted):\n\n", markdown_table(header, cm));
  } else {
    md += cat("\nThe confusion matrix (", L, " labels) is in ", s.out, ".json and ", s.out, "_confusion.png.\n");
  }
  write_text_atomic(s.out + ".md", md);

  HeatMap h;
  h.title = cat(s.name, ": kNN confusion (accuracy ", percent(c.accuracy, 1), "%)");
  h.x_label = "predicted label";
  h.y_label = "true label";
  for (auto y : c.names) h.row_names.push_back(std::to_string(y)), h.col_names.push_back(std::to_string(y));
  h.values = c.counts;
  save_heatmap(s.out + "_confusion.png", h);
}

}  // namespace

void add_knn_vote_params(NodeTypeBuilder& b) {
  b.param(Param::integer("k").default_value(5).min(1).doc("neighbours that vote"))
      .param(Param::choice("weights", {"uniform", "distance"}).default_value("uniform")
                 .doc("vote weights: 1 each, or 1/distance (the similarity under a kernel)"))
      .param(Param::choice("tie_rule", {"smallest_label", "nearest"}).default_value("smallest_label")
                 .doc("a tied vote goes to the smallest label (scikit-learn) or to the tied label with the nearest neighbour"));
}

KnnSettings knn_settings(const NodeContext& ctx) {
  const Params& p = ctx.params();
  KnnSettings s;
  s.k = static_cast<int>(p.integer("k"));
  s.weights = p.string("weights") == "distance" ? KnnWeights::distance : KnnWeights::uniform;
  s.tie_rule = p.string("tie_rule") == "nearest" ? KnnTieRule::nearest : KnnTieRule::smallest_label;
  s.out = p.has("out") ? p.string("out") : "";
  s.name = p.has("name") ? p.string("name") : ctx.id();
  return s;
}

std::vector<std::int64_t> knn_predict(const KnnSettings& s, const std::vector<std::int64_t>& neighbours,
                                      const std::vector<double>& values, const std::vector<std::int64_t>& train_label) {
  const auto k = static_cast<std::size_t>(s.k);
  const std::size_t n = neighbours.size() / k;
  std::vector<std::int64_t> predicted(n), labels(k);
  for (std::size_t i = 0; i < n; ++i) {
    // An approximate index may find fewer than k rows (-1 after them); those found vote.
    std::size_t found = 0;
    while (found < k && neighbours[i * k + found] >= 0) {
      labels[found] = train_label[static_cast<std::size_t>(neighbours[i * k + found])];
      ++found;
    }
    if (found == 0) throw DataError(cat("no neighbour was found for test row ", i, " (an index searching too few cells?)"));
    predicted[i] = knn_vote(labels.data(), values.data() + i * k, static_cast<std::int64_t>(found), s.weights, s.kernel,
                            s.tie_rule);
  }
  return predicted;
}

Record knn_report(const KnnSettings& s, const std::vector<std::int64_t>& truth, const std::vector<std::int64_t>& predicted,
                  const std::function<void(JsonWriter&)>& extra) {
  const Confusion c = confusion_of(truth, predicted);
  const auto n = static_cast<std::int64_t>(truth.size());
  log_info(s.name, "kNN k=", s.k, " (", s.distance, ", ", weights_name(s.weights), " weights) on ", n,
           " test rows against ", s.train_rows, ": accuracy ", percent(c.accuracy), "%");
  if (!s.out.empty()) {
    write_json(s, c, n, predicted, extra);
    write_markdown_and_chart(s, c, n);
  }
  Record m;
  m.set("method", Array::string_scalar(s.name));
  m.set("accuracy", Array::scalar<double>(c.accuracy));
  const auto l = static_cast<std::int64_t>(c.names.size());
  m.set("labels", Array::from_vector<std::int64_t>({l}, c.names));
  m.set("class_accuracy", Array::from_vector<double>({l}, c.class_accuracy));
  std::vector<std::int64_t> flat;
  for (const auto& row : c.counts)
    for (double v : row) flat.push_back(static_cast<std::int64_t>(v));
  m.set("confusion", Array::from_vector<std::int64_t>({l, l}, flat));
  return m;
}

}  // namespace embedflow::eval
