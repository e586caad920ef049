// The py plugin: stages written as Python functions.
#include "py_types.hpp"

namespace {
void register_types(embedflow::Registry& r) { r.add(embedflow::py_family::map_type()); }
}  // namespace

EMBEDFLOW_PLUGIN("py", "0.1.0", "", register_types)
