// Glue shared by eval.knn_classifier and eval.index_knn: the vote over each test row's
// neighbours, and from the predictions to accuracy, per-class accuracy and the confusion matrix
// in <out>.json, <out>.md, <out>_confusion.png and the `metrics` record.
#pragma once

#include <embedflow/embedflow.hpp>

#include <functional>
#include <string>
#include <vector>

#include "distance.hpp"
#include "knn.hpp"
#include "report.hpp"

namespace embedflow::eval {

inline const char* kKnnMetricsSchema =
    "method: str[], accuracy: f64[], labels: i64[L], class_accuracy: f64[L], confusion: i64[L,L]";

struct KnnSettings {
  std::string name, out;
  std::string distance;  // as the report names it
  bool kernel = false;
  double gamma = 1.0;    // written for kernels
  int k = 5;
  evalcore::KnnWeights weights = evalcore::KnnWeights::uniform;
  evalcore::KnnTieRule tie_rule = evalcore::KnnTieRule::smallest_label;
  std::int64_t train_rows = 0;
};

// Declares k, weights and tie_rule.
void add_knn_vote_params(NodeTypeBuilder& b);
// Reads k, weights, tie_rule, out and name (default: the node id).
KnnSettings knn_settings(const NodeContext& ctx);

// Each test row's predicted label from its k neighbours (rows x k train rows, nearest first, -1
// after the last one an approximate index found) and their values (distances, or kernel
// similarities). DataError when a row has none.
std::vector<std::int64_t> knn_predict(const KnnSettings& s, const std::vector<std::int64_t>& neighbours,
                                      const std::vector<double>& values, const std::vector<std::int64_t>& train_label);

// Logs the accuracy, writes the files when s.out is set and returns the metrics record. `extra`
// adds fields to the JSON object.
Record knn_report(const KnnSettings& s, const std::vector<std::int64_t>& truth, const std::vector<std::int64_t>& predicted,
                  const std::function<void(JsonWriter&)>& extra = {});

}  // namespace embedflow::eval
