// Shared by image.pair_join and image.triplet_join: the id-indexed image table, rebuilt when the
// side port's value changes, and the gather of one role (anchor, other, ...) of a join.
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

}  // namespace embedflow::image
