// Shared by the class-aware batchers image.class_batches and image.pk_batches: a source that
// starts once its one table (side port `table`) arrives, keeps the rows whose label passes the
// `classes` param and emits batches over `epochs` epochs with the graph's back-pressure; and the
// ports, params and schema check both declare.
#pragma once

#include <atomic>
#include <string>

#include "core/classes.hpp"
#include "core/sampling.hpp"

namespace embedflow::image {

class ClassBatcher : public Node {
 public:
  void on_side(std::size_t, const RecordPtr&, Emitter&) override;

 protected:
  // one_table_only: why a second table is an error, e.g. "pk_batches samples from one table per run".
  explicit ClassBatcher(std::string one_table_only) : one_table_only_(std::move(one_table_only)) {}
  // Reads params epochs and classes.
  void open_batcher(NodeContext& ctx);
  // Loads the table, keeping the rows of classes_; fewer than `needed` classes is a DataError that
  // names the param asking for them. Returns the number of classes.
  std::size_t load_table(int needed, const char* needed_param);

  NodeContext* ctx_ = nullptr;
  ClassSet classes_;
  ClassTable table_;
  std::int64_t epochs_ = 1, epoch_ = 0;
  bool loaded_ = false;

 private:
  std::string one_table_only_;
  std::atomic<int> tables_{0};
};

// Declares what both batchers declare after their own params: the classes filter, the table side
// port, the output `out` (out_doc describes its batches) and the schema check.
void add_class_batcher_ports(NodeTypeBuilder& b, const std::string& out_doc);

}  // namespace embedflow::image
