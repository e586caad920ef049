// YAML text -> GraphSpec -> ResolvedGraph, as `embedflow validate` does it, against the core
// plugin's node types. Problems are diagnostics; nothing may crash, recurse without bound or
// allocate without bound (alias bombs, self-aliases, huge graphs).
#include <cstdint>
#include <string>
#include <vector>

#include "embedflow/error.hpp"
#include "embedflow_engine/graph.hpp"
#include "embedflow_runs/testing.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const embedflow::Registry& registry =
      embedflow::runs::testing::plugin_registry({EMBEDFLOW_FUZZ_PLUGIN_DIR});
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<embedflow::Diagnostic> problems;
  try {
    embedflow::engine::GraphSpec spec = embedflow::engine::parse_graph_text(text, "fuzz.yaml", problems);
    if (problems.empty()) embedflow::engine::resolve(std::move(spec), registry, problems);
  } catch (const embedflow::Error&) {
  }
  for (const auto& p : problems) (void)p.str();
  return 0;
}
