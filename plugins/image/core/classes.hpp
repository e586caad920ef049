// The `classes` parameter shared by the readers, image.class_filter and the batchers: which
// labels to keep, written as a list ([0, 1, 2]), a single label (3) or a range string
// ("0-4", "0-4,7,9"), so the metric-learning protocol "train on 0-4, test on 5-9" is
// `classes: "0-4"` on one reader and `classes: "5-9"` on the other.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <embedflow/embedflow.hpp>

namespace embedflow::image {

class ClassSet {
 public:
  ClassSet() = default;  // every label
  // Throws ConfigError describing the accepted forms when `v` is none of them.
  static ClassSet parse(const Value& v);
  // From a node's params: unset or null means every label.
  static ClassSet from_params(const Params& p, const std::string& name = "classes");

  bool all() const { return all_; }
  bool contains(std::int64_t label) const;
  const std::vector<std::int64_t>& labels() const { return labels_; }  // sorted, unique
  std::string str() const;  // "all" or "0-4,7"

 private:
  bool all_ = true;
  std::vector<std::int64_t> labels_;
};

// The parameter declaration every node with a `classes` filter uses.
ParamSpec classes_param(const std::string& doc_suffix = "");
// Check-hook helper: reports a malformed `classes` value at graph load.
void check_classes(SchemaContext& c, const std::string& name = "classes");

}  // namespace embedflow::image
