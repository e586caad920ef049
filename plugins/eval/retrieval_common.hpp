// Glue shared by eval.retrieval and eval.clustering: their common parameters, reading them into
// evaluator options, and writing the JSON / Markdown / PNG outputs and the `metrics` record.
#pragma once

#include <embedflow/embedflow.hpp>
#include <embedflow/features.hpp>

#include <functional>
#include <string>

#include "report.hpp"
#include "retrieval.hpp"

namespace embedflow::eval {

// Schema of the `metrics` output, which eval.report consumes.
inline const char* kMetricsSchema = "method: str[], cmc: f64[R], map: f64[]";

// What eval.retrieval and eval.clustering read on their query and gallery ports, with the default
// field names (`fields` renames them; the ports themselves are declared "*").
inline const char* kQuerySchema = "embedding: f32[B,D], label: i64[B]";
inline const char* kGallerySchema = "embedding: f32[G,D], label: i64[G]";

void add_retrieval_params(NodeTypeBuilder& b);
// The parameters of how rankings are scored and written, which every retrieval evaluator shares:
// ranks, max_rank, exclude_same_camera, junk_label, bootstrap, ci_level, keep_top, out, name, fields.
void add_ranking_params(NodeTypeBuilder& b);
// Also checks `fields` and the query and gallery schemas (check_fields).
void check_retrieval_params(SchemaContext& c);

struct RetrievalSettings {
  evalcore::DistanceSpec spec;
  evalcore::RetrievalOptions options;
  std::string out;   // file prefix, empty: no files
  std::string name;  // method name in tables and legends
  std::string node;  // the node's id, for the results it publishes
  bool metrics_presented = false;  // the metrics output is connected (to eval.report, say)
  FieldNames fields;
  // The gallery port is unconnected: the queries are their own gallery, each ranked without
  // itself (options.exclude_self).
  bool self_retrieval = false;
  // The measure's name in the outputs when it is not spec.kind's (an index's inner product).
  std::string distance_label;
  static RetrievalSettings from(const NodeContext& ctx);
  // The part add_ranking_params declares (distance, blocks and self-retrieval left as defaults).
  static RetrievalSettings ranking(const NodeContext& ctx);
};

// Writes <out>.json, <out>.md, <out>_cmc.png (and <out>_ranklists.csv with keep_top) and
// returns the metrics record. `extra` adds fields to the JSON object (clustering scores).
Record write_retrieval_outputs(const RetrievalSettings& s, const evalcore::RetrievalResult& r,
                               const FeatureSet& query, const FeatureSet& gallery,
                               const std::function<void(JsonWriter&)>& extra = {});

// The gallery the queries rank against: `gallery`, or the queries themselves for self-retrieval
// (gallery port unconnected). A DataError when either has no rows or their dims differ.
const FeatureSet& checked_gallery(const FeatureSet& query, const FeatureSet& gallery, bool self);

// The labels of the query and gallery rows for evaluate_retrieval, with their cameras when both
// carry them (then exclude_same_camera can apply).
evalcore::RetrievalLabels retrieval_labels(const FeatureSet& query, const FeatureSet& gallery);

// "47.26 [46.10, 48.31]" from a fraction and an optional CI.
std::string percent_with_ci(double v, const evalcore::RetrievalSummary& s, const std::string& ci_name);

}  // namespace embedflow::eval
