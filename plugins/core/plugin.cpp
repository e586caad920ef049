// The core plugin: generic stream plumbing every graph uses.
#include "core_types.hpp"

namespace {
void register_types(embedflow::Registry& r) {
  using namespace embedflow::core;
  r.add(range_type());
  r.add(select_type());
  r.add(rename_type());
  r.add(batch_type());
  r.add(unbatch_type());
  r.add(shuffle_type());
  r.add(epochs_type());
  r.add(limit_type());
  r.add(funnel_type());
  r.add(keep_best_type());
  r.add(sink_type());
  r.add(map_affine_type());
  r.add(attach_type());
  r.add(shard_type());
  r.add(aggregate_type());
  for (auto& c : aggregate_components()) r.add(std::move(c));
}
}  // namespace

EMBEDFLOW_PLUGIN("core", "0.1.0", "", register_types)
