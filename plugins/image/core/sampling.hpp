// Batch plans for the class-aware batchers, as plain functions over label vectors (tested
// without a graph), and the image table those batchers and the joins hold in memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <embedflow/embedflow.hpp>

namespace embedflow::image {

// Rows grouped by label, labels ascending.
struct ClassIndex {
  std::vector<std::int64_t> labels;
  std::vector<std::vector<std::int64_t>> rows;  // rows[i]: the rows with labels[i], ascending
  static ClassIndex build(const std::vector<std::int64_t>& labels);
};

enum class Incomplete { pad, drop };

struct ClassBatchOptions {
  int classes_per_batch = 8;  // N
  int per_class = 4;          // K
  Incomplete incomplete = Incomplete::pad;
  bool drop_last = false;     // drop batches with fewer than N classes at the end of an epoch
};

// One epoch of class-stratified batches: each class's rows are shuffled and cut into groups of
// K (a short last group is padded with other rows of its class, or dropped); each batch takes
// one group from each of N distinct classes, choosing the classes with the most groups left
// (ties broken at random), which keeps N classes available as long as possible. Every row
// appears in exactly one group when its class size is a multiple of K (at least once with
// pad). When fewer than N classes have groups left, the remaining groups form batches of fewer
// classes unless drop_last. Batches list rows class by class, K consecutive rows each.
std::vector<std::vector<std::int64_t>> class_batch_plan(const ClassIndex& index, const ClassBatchOptions& o, Rng& rng);

// One PK batch (Hermans et al., "In Defense of the Triplet Loss"): P distinct classes drawn
// uniformly, K rows from each, without replacement when the class has at least K rows, else
// with replacement. Classes with no rows are never drawn; fewer than P classes is an error.
std::vector<std::int64_t> pk_batch(const ClassIndex& index, int p, int k, Rng& rng);

// A table record (every field with leading dim N) with its label column and an id -> row map.
struct ImageTable {
  RecordPtr record;
  std::int64_t rows = 0;
  std::vector<std::int64_t> ids, labels;  // labels empty when the table has none
  std::unordered_map<std::int64_t, std::int64_t> row_of;  // filled by index_ids()

  // Checks the fields line up and reads `id` (required when need_ids) and `label` (required
  // when need_labels). Errors name `what` (the node's port).
  static std::shared_ptr<ImageTable> from_record(const RecordPtr& r, bool need_ids, bool need_labels, const std::string& what);
  // Builds row_of; a repeated id is a DataError naming it.
  void index_ids();
  // Row of an id; a DataError naming the id (and `role`, e.g. "anchor") when absent.
  std::int64_t row(std::int64_t id, const char* role) const;
  // Every field gathered at `rows`.
  Record gather(const std::vector<std::int64_t>& rows) const;
};

// What the class-aware batchers hold: the table, the rows whose label passes `classes`, and
// those rows grouped by class (ClassIndex rows are positions in `rows`).
class ClassSet;
struct ClassTable {
  std::shared_ptr<ImageTable> table;
  std::vector<std::int64_t> rows;
  ClassIndex index;
  static ClassTable load(const RecordPtr& r, const ClassSet& classes, const std::string& what);
  // The batch for positions into `rows`: every table field gathered, plus epoch [B].
  Record batch(const std::vector<std::int64_t>& positions, std::int64_t epoch) const;
};
// Output schema of a batcher: the side table's fields with leading dim B, plus epoch i64[B].
void batcher_schema(SchemaContext& c);

}  // namespace embedflow::image
