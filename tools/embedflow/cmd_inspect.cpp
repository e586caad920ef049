// `embedflow validate`, `embedflow inspect` and `embedflow dot`: what a graph file resolves to,
// and the node and component types the plugins register.
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli.hpp"
#include "embedflow/suggest.hpp"
#include "embedflow_engine/describe.hpp"

namespace embedflow::cli {
using namespace engine;
using namespace runs;
namespace fs = std::filesystem;

int cmd_validate(const std::vector<std::string>& args) {
  Common c;
  std::string graph;
  po::options_description desc("embedflow validate GRAPH [options]");
  desc.add_options()("help,h", "this help");
  if (int r = parse_graph_command("validate", desc, args, c, graph); r >= 0) return r;
  ResolvedGraph g;
  if (!load_graph(graph, c, std::nullopt, g)) return kExitInvalid;
  std::cout << graph << ": valid (" << g.nodes.size() << " nodes, " << g.edges.size() << " edges)\n";
  return kExitOk;
}

int cmd_inspect(const std::vector<std::string>& args) {
  Common c;
  std::string type;
  bool json = false;
  po::options_description desc("embedflow inspect [TYPE|PLUGIN] [options]");
  desc.add_options()("help,h", "this help")("type", po::value(&type), "node or component type, or a plugin name")
      ("json", po::bool_switch(&json), "schemas as JSON (every type, or the one named, or the plugin's)");
  add_common(desc, c);
  po::positional_options_description pos;
  pos.add("type", 1);
  po::variables_map vm;
  if (int r = parse_or_usage(desc, pos, args, vm, "inspect"); r >= 0) return r;
  configure_logging(c);
  const LoadedPlugins* plugins = load_cli_plugins(c);
  if (!plugins) return kExitInvalid;
  const Registry& registry = plugins->registry;
  const PluginLoader* loader = plugins->loader.get();
  const LoadedPlugin* plugin = nullptr;
  for (const auto& p : loader->plugins())
    if (p.name == type) plugin = &p;
  const bool known_type = registry.node_type(type) || registry.component_type(type);
  if (json && (type.empty() || known_type || plugin)) {
    write_schema_json(std::cout, registry, type);
    return kExitOk;
  }
  if (type.empty()) {
    print_type_list(std::cout, registry, loader->plugins());
    return kExitOk;
  }
  if (plugin && !known_type) {
    // The plugin's own types only, in the list's format.
    Registry mine;
    for (const NodeType* t : registry.node_types())
      if (t->plugin == type) mine.add(*t);
    for (const ComponentType* t : registry.component_types())
      if (t->plugin == type) mine.add(*t);
    print_type_list(std::cout, mine, {*plugin});
    return kExitOk;
  }
  if (const NodeType* t = registry.node_type(type)) {
    print_node_type(std::cout, *t);
    return kExitOk;
  }
  if (const ComponentType* t = registry.component_type(type)) {
    print_component_type(std::cout, *t);
    return kExitOk;
  }
  std::vector<std::string> names = registry.node_type_names();
  for (const auto& n : registry.component_type_names()) names.push_back(n);
  for (const auto& p : loader->plugins()) names.push_back(p.name);
  std::cerr << "embedflow inspect: no node or component type or plugin '" << type << "'" << did_you_mean(type, names)
            << "\n";
  return kExitInvalid;
}

int cmd_dot(const std::vector<std::string>& args) {
  Common c;
  std::string graph, output;
  DotOptions dot;
  po::options_description desc("embedflow dot GRAPH [options]");
  desc.add_options()("help,h", "this help")("output,o", po::value(&output), "write to this file instead of stdout")
      ("all-params", po::bool_switch(&dot.all_params), "show every parameter, defaults included");
  if (int r = parse_graph_command("dot", desc, args, c, graph); r >= 0) return r;
  ResolvedGraph g;
  if (!load_graph(graph, c, std::nullopt, g)) return kExitInvalid;
  if (output.empty()) {
    write_dot(std::cout, g, dot);
  } else {
    std::ofstream f(output);
    write_dot(f, g, dot);
    if (!f) {
      std::cerr << "embedflow dot: cannot write " << output << "\n";
      return kExitFailure;
    }
  }
  return kExitOk;
}

}  // namespace embedflow::cli
