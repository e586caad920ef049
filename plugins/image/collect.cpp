// image.collect — gathers a whole stream into one record at end of stream: records are stacked
// and batches concatenated along the leading axis. Its output is a table for the side ports of
// image.class_batches, image.pk_batches, image.pair_join and image.triplet_join when the images
// do not come straight from a reader with batch_size: -1 (e.g. after image.files_reader with
// on_bad_image: skip and a filter, or from io.hdf5_reader).
//
// Inputs: in — records (all fields equally shaped) or batches
// Outputs: out — one record; every field gains (records) or keeps (batches) a leading dim N
// Caveats: holds the whole stream in memory (its size is the table's size, plus the inputs
// until they are concatenated). An empty stream emits nothing, so a side port fed by it fails
// with "ended without a value".
//
//   nodes:
//     images: {type: image.idx_reader, params: {split: test, limit: 100}}
//     table:  {type: image.collect}
//     show:   {type: core.sink, params: {mode: print}}
//   edges: [images.out -> table.in, table.out -> show.in]
#include "image_types.hpp"

namespace embedflow::image {
namespace {

class Collect final : public Node {
 public:
  void open(NodeContext& ctx) override { mode_ = ctx.params().string("input"); }
  void process(std::size_t, const RecordPtr& in, Emitter&) override {
    if (parts_.empty()) {
      const Array* label = in->find("label");
      batched_ = mode_ == "batches" || (mode_ == "auto" && label && label->rank() == 1);
    }
    parts_.push_back(in);
  }
  void close(Emitter& out) override {
    if (parts_.empty()) return;
    Record table;
    for (const auto& [name, value] : parts_.front()->fields()) {
      std::vector<Array> pieces;
      pieces.reserve(parts_.size());
      for (std::size_t i = 0; i < parts_.size(); ++i) {
        const Array* a = parts_[i]->find(name);
        if (!a) throw DataError(cat("record ", i, " has no field '", name, "' but record 0 has"));
        pieces.push_back(*a);
      }
      try {
        table.set(name, batched_ ? Array::concat(pieces) : Array::stack(pieces));
      } catch (const Error& e) {
        throw DataError(cat("field '", name, "' cannot be collected: ", e.what()));
      }
    }
    parts_.clear();
    out.emit(std::move(table));
  }

 private:
  std::string mode_;
  std::vector<RecordPtr> parts_;
  bool batched_ = false;
};

}  // namespace

NodeType collect_type() {
  return NodeTypeBuilder("image.collect")
      .deterministic()
      .doc("Gathers a stream of records or batches into one table record at end of stream (for the batchers' side ports).")
      .example(
          "nodes:\n"
          "  images: {type: image.idx_reader, params: {split: test, limit: 100}}\n"
          "  table:  {type: image.collect}\n"
          "  show:   {type: core.sink, params: {mode: print}}\n"
          "edges: [images.out -> table.in, table.out -> show.in]\n")
      .param(Param::choice("input", {"auto", "records", "batches"}).default_value("auto")
                 .doc("records: stack; batches: concatenate; auto: batches when `label` is a vector, else records"))
      .input("in", "*", "records or batches")
      .output("out", "*", "one record with a leading dim N on every field")
      .check([](SchemaContext& c) {
        const PortSchema& in = c.input("in");
        if (in.is_any()) return;
        const std::string mode = c.params().string("input");
        const FieldSchema* label = in.find("label");
        bool batches = mode == "batches" ||
                       (mode == "auto" && label && label->shape && label->shape->size() == 1);
        Dim n{Dim::Kind::symbol, -1, "N"};
        c.set_output("out", batches ? batched(unbatched(in), n) : batched(in, n));
      })
      .create<Collect>();
}

}  // namespace embedflow::image
