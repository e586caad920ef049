#include "embedflow_runs/plugins.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <regex>
#include <tuple>

#include "embedflow/error.hpp"
#include "embedflow_engine/graph_file.hpp"

namespace embedflow::runs {
using namespace engine;
namespace fs = std::filesystem;

std::vector<std::string> spec_plugin_dirs(const GraphSpec& spec, const std::string& graph_file) {
  std::vector<std::string> dirs;
  for (const auto& d : spec.plugin_dirs) {
    fs::path p = fs::path(graph_file).parent_path() / d;
    std::error_code ec;
    if (!fs::is_directory(p, ec))
      throw ConfigError(cat(graph_file, ": plugin_dirs entry '", d, "' (", p.string(), "): no such directory"));
    dirs.push_back(p.string());
  }
  return dirs;
}

std::vector<std::string> graph_plugin_dirs(const std::string& graph_file) {
  std::vector<Diagnostic> ignored;  // the real parse reports them
  return spec_plugin_dirs(load_graph_file(graph_file, ignored), graph_file);
}

std::unique_ptr<PluginLoader> load_plugins(const std::vector<std::string>& user_dirs,
                                           const std::vector<std::string>& extra_dirs, Registry& registry) {
  return load_plugins_for(user_dirs, extra_dirs, registry, "");  // no type named: every plugin
}

std::set<std::string> named_types(const std::string& graph_text) {
  static const std::regex type_value(R"re(type["']?\s*[:=]\s*["']?([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)+))re");
  std::set<std::string> out;
  for (auto it = std::sregex_iterator(graph_text.begin(), graph_text.end(), type_value); it != std::sregex_iterator(); ++it)
    out.insert((*it)[1].str());
  return out;
}

std::unique_ptr<PluginLoader> load_plugins_for(const std::vector<std::string>& user_dirs,
                                               const std::vector<std::string>& extra_dirs, Registry& registry,
                                               const std::string& graph_text) {
  for (const auto& dir : user_dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) throw ConfigError(cat("--plugin-path ", dir, ": no such directory"));
  }
  std::vector<std::string> dirs = user_dirs;
  dirs.insert(dirs.end(), extra_dirs.begin(), extra_dirs.end());
  auto loader = std::make_unique<PluginLoader>(PluginLoader::default_search_path(dirs));
  const std::set<std::string> types = named_types(graph_text);
  // A type given by a variable ("type: ${arch}") cannot be told from the text.
  static const std::regex type_by_variable(R"re(type["']?\s*[:=]\s*["']?\$\{)re");
  // Nor are the types of a subgraph read from a file of its own (subgraphs: {score: parts/score.yaml}).
  const std::size_t subgraphs = graph_text.find("subgraphs");
  const bool subgraph_file = subgraphs != std::string::npos && (graph_text.find(".yaml", subgraphs) != std::string::npos ||
                                                                graph_text.find(".yml", subgraphs) != std::string::npos);
  const bool hidden = std::regex_search(graph_text, type_by_variable) || subgraph_file;
  std::set<std::string> families{"core"};
  for (const auto& t : types) families.insert(t.substr(0, t.find('.')));
  if (!types.empty() && !hidden && !families.count("torch") && !families.count("crowd")) {
    loader->load_families(registry, families);
    const bool all_found = std::all_of(types.begin(), types.end(), [&registry](const std::string& t) {
      return registry.node_type(t) != nullptr || registry.component_type(t) != nullptr;
    });
    if (all_found) return loader;
  }
  loader->load_all(registry);
  return loader;
}

const LoadedPlugins& loaded_plugins(const std::vector<std::string>& user_dirs,
                                    const std::vector<std::string>& extra_dirs, const std::string& graph_text) {
  using Key = std::tuple<std::vector<std::string>, std::vector<std::string>, std::string>;
  static std::mutex mutex;
  // Never destroyed: a library unloaded at exit would take code that node types still point at.
  static auto* loaded = new std::map<Key, std::unique_ptr<LoadedPlugins>>();
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = (*loaded)[Key{user_dirs, extra_dirs, graph_text}];
  if (!slot) {
    auto fresh = std::make_unique<LoadedPlugins>();
    fresh->loader = load_plugins_for(user_dirs, extra_dirs, fresh->registry, graph_text);
    slot = std::move(fresh);
  }
  return *slot;
}

}  // namespace embedflow::runs
