// Shared by image.pair_join and image.triplet_join: the id-indexed image table, rebuilt when the
// side port's value changes, the gather of one role (anchor, other, ...) of a join, the node body
// both joins run and the pass-through of the stream fields a join does not consume.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "core/sampling.hpp"

namespace embedflow::image {

class JoinTableCache {
 public:
  // The indexed table for the side value `side`; thread-safe, so a join could run in parallel.
  std::shared_ptr<const ImageTable> get(const RecordPtr& side, const std::string& what);

 private:
  std::mutex mutex_;
  std::shared_ptr<const ImageTable> table_;
};

// Sets <prefix>_id, <prefix>_image (the table rows of `ids`) and, when the table has labels,
// <prefix>_label on `out`. scalar: `ids` is one id and the fields lose their leading dim.
void join_role(const ImageTable& t, const Array& ids, const char* role, const std::string& prefix,
               const std::string& image_field, bool scalar, Record& out);

// Output schema of a join: for each prefix, <prefix>_id, <prefix>_image (the table's image dtype
// and inner dims) and <prefix>_label when the table has labels; the stream's leading dim (or
// none, for single ids) comes from `lead_field` of input `stream`.
PortSchema join_schema(SchemaContext& c, const std::string& stream, const std::string& lead_field,
                       const std::vector<std::string>& prefixes, std::vector<std::pair<std::string, DType>> extra);

// Tells the stream fields a join turns into others (anchor, other, label, ...) from the ones that
// pass through.
using ConsumedField = bool (*)(const std::string& name);

// Adds each field of `stream` that the join does not consume and does not produce itself to `out`
// (the join's value wins); shared buffers, nothing copied.
void pass_through_fields(const Record& stream, ConsumedField consumed, Record& out);

// The schema twin of pass_through_fields: `out` gains the fields of `stream` that pass through.
void add_pass_through_fields(const PortSchema& stream, ConsumedField consumed, PortSchema& out);

// The body of a join node: reads param image_field, indexes the table of side port 1 (waiting
// for it) and, for each stream record, sets the joined fields (join_fields) and passes the rest
// through.
class ImageJoinNode : public Node {
 public:
  explicit ImageJoinNode(ConsumedField consumed) : consumed_(consumed) {}
  void open(NodeContext& ctx) override;
  void process(std::size_t, const RecordPtr& in, Emitter& out) override;

 protected:
  // Sets the fields the join produces from stream record `in` on `out`; `sequence` is the record's
  // number, for errors that name it.
  virtual void join_fields(const ImageTable& table, const Record& in, std::uint64_t sequence, Record& out) const = 0;
  const std::string& image_field() const { return image_field_; }

 private:
  ConsumedField consumed_;
  NodeContext* ctx_ = nullptr;
  std::string image_field_;
  JoinTableCache cache_;
};

}  // namespace embedflow::image
