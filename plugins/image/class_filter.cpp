// image.class_filter — keeps the records (or the rows of batches) whose label is in `classes`,
// e.g. classes: "0-4" for training and "5-9" for testing in the metric-learning reality-check
// protocol (train on half the classes, evaluate retrieval on the unseen half).
//
// Inputs: in — records with a scalar `label`, or batches / tables with label [B] (every field
//         sharing the leading dim B)
// Outputs: out — the records kept; batches keep their kept rows (a batch left empty is dropped)
// Caveats: parallel-safe; counts are logged at the end. The readers take the same `classes`
// parameter, which avoids decoding what would be dropped.
//
//   nodes:
//     images: {type: image.idx_reader, params: {split: test}}
//     unseen: {type: image.class_filter, params: {classes: "5-9"}}
//     count:  {type: core.sink, params: {mode: count, expect: 5000}}
//   edges: [images.out -> unseen.in, unseen.out -> count.in]
#include <atomic>

#include "core/arrays.hpp"
#include "core/classes.hpp"
#include "image_types.hpp"

namespace embedflow::image {
namespace {

class ClassFilter final : public Node {
 public:
  void open(NodeContext& ctx) override {
    ctx_ = &ctx;
    classes_ = ClassSet::from_params(ctx.params());
    field_ = ctx.params().string("label_field");
  }
  void process(std::size_t, const RecordPtr& in, Emitter& out) override {
    const Array& label = in->get(field_);
    if (label.rank() == 0) {
      seen_.fetch_add(1, std::memory_order_relaxed);
      if (!classes_.contains(label.as_int(0))) return;
      kept_.fetch_add(1, std::memory_order_relaxed);
      out.emit(in);
      return;
    }
    const std::vector<std::int64_t> labels = int_values(label, field_);
    std::vector<std::int64_t> rows;
    for (std::size_t i = 0; i < labels.size(); ++i)
      if (classes_.contains(labels[i])) rows.push_back(static_cast<std::int64_t>(i));
    seen_.fetch_add(labels.size(), std::memory_order_relaxed);
    kept_.fetch_add(rows.size(), std::memory_order_relaxed);
    if (rows.empty()) return;
    if (rows.size() == labels.size()) {
      out.emit(in);
      return;
    }
    try {
      out.emit(take_record_rows(*in, rows, static_cast<std::int64_t>(labels.size())));
    } catch (const DataError& e) {
      throw DataError(cat("record ", out.sequence(), ": ", e.what()));
    }
  }
  void close(Emitter&) override {
    log_info(ctx_->id(), "kept ", kept_.load(), " of ", seen_.load(), " images (classes ", classes_.str(), ")");
  }

 private:
  NodeContext* ctx_ = nullptr;
  ClassSet classes_;
  std::string field_;
  std::atomic<std::uint64_t> seen_{0}, kept_{0};
};

}  // namespace

NodeType class_filter_type() {
  return NodeTypeBuilder("image.class_filter")
      .deterministic()
      .doc("Keeps records, or rows of batches, whose label is in `classes` (e.g. \"0-4\").")
      .example(
          "nodes:\n"
          "  images: {type: image.idx_reader, params: {split: test}}\n"
          "  unseen: {type: image.class_filter, params: {classes: \"5-9\"}}\n"
          "  count:  {type: core.sink, params: {mode: count, expect: 5000}}\n"
          "edges: [images.out -> unseen.in, unseen.out -> count.in]\n")
      .param(Param::any("classes").doc("labels to keep: a label (3), a list ([0, 1, 2]) or a range string (\"0-4\", \"0-4,7,9\")"))
      .param(Param::string("label_field").default_value("label").doc("field holding the integer label"))
      .input("in", "*", "records with a scalar label, or batches / tables with label [B]")
      .output("out", "*", "the records (rows) kept")
      .parallel()
      .forward("in", "out")
      .check([](SchemaContext& c) { check_classes(c); })
      .create<ClassFilter>();
}

}  // namespace embedflow::image
