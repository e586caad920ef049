// Validated graph: every node resolved to its type, parameters typed and defaulted, edges bound
// to port indices, schemas unified across edges, and a topological order. validate() reports
// every problem at once, each located in the graph file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "embedflow/registry.hpp"
#include "embedflow_engine/graph_file.hpp"

namespace embedflow::engine {

struct PortRef {
  std::size_t node = 0;
  std::size_t port = 0;
};

struct ResolvedEdge {
  PortRef from, to;
  const EdgeSpec* spec = nullptr;
};

// What `cache:` on a node asks for: `true`, `false` or {enabled, hash: fast|full, compression}.
struct CacheSettings {
  bool enabled = false;
  bool full_hash = false;  // hash: full -> input files are hashed whole, not sampled
  int compression = 0;     // deflate level of the cache file, 0..9
};

struct ResolvedNode {
  const NodeSpec* spec = nullptr;
  const NodeType* type = nullptr;
  Params params;
  std::uint64_t seed = 0;
  std::vector<PortSchema> input_schemas;   // as arriving from upstream (or declared when unknown)
  std::vector<PortSchema> output_schemas;  // after substitution and the type's check hook
  std::vector<std::vector<std::size_t>> out_edges;  // per output port: edge indices
  std::vector<std::vector<std::size_t>> in_edges;   // per input port: edge indices
  DimBindings bindings;
  CacheSettings cache;
  const std::string& id() const { return spec->id; }
};

struct ResolvedGraph {
  GraphSpec spec;
  std::vector<ResolvedNode> nodes;
  std::vector<ResolvedEdge> edges;
  std::vector<std::size_t> order;  // topological
  const Registry* registry = nullptr;
};

// Resolves `spec` against the registry. Problems are appended; the graph is runnable only when
// none were added.
ResolvedGraph resolve(GraphSpec spec, const Registry& registry, std::vector<Diagnostic>& problems);

// "file:line:col: node 'x' (type): " prefix for runtime errors about node i.
std::string node_origin(const ResolvedGraph& g, std::size_t node);

}  // namespace embedflow::engine
