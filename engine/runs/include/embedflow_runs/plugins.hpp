// Which plugins a run loads, and the one cache of loaded plugins the CLI, the Python module and
// the in-process test harness share: a search path's plugins are loaded once per process and
// stay loaded (node types hold code from them until the process exits).
//
//   const LoadedPlugins& p = loaded_plugins(user_dirs, graph_plugin_dirs(graph), graph_text);  // ConfigError
//   ResolvedGraph g = prepare_graph(spec, problems, sets, seed, p.registry);   // embedflow_runs/session.hpp
//   request.plugins = p.loader->plugins();                                     // the record's versions
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "embedflow/registry.hpp"
#include "embedflow_engine/graph.hpp"
#include "embedflow_engine/plugin_loader.hpp"

namespace embedflow::runs {

// `plugin_dirs:` of a parsed graph, relative to the graph file's folder. Throws ConfigError
// naming an entry that is not a directory.
std::vector<std::string> spec_plugin_dirs(const engine::GraphSpec& spec, const std::string& graph_file);
// The same for a graph file (parse problems are left to the real parse).
std::vector<std::string> graph_plugin_dirs(const std::string& graph_file);

// Loads every plugin on the search path: `user_dirs` (each must exist: a typo would otherwise
// load the default plugins), then `extra_dirs`, then EMBEDFLOW_PLUGIN_PATH and the directory
// beside the executable. Throws ConfigError naming the directory or the plugin that failed.
// The returned loader keeps the libraries loaded; keep it as long as anything from `registry`.
std::unique_ptr<engine::PluginLoader> load_plugins(const std::vector<std::string>& user_dirs,
                                                   const std::vector<std::string>& extra_dirs, Registry& registry);

// The same, loading only what a graph needs when that can be told from its text (the graph
// file's text and the --set values): the plugin files of the families its `type:` values name
// (libembedflow_<family>.so), and core. Every plugin when a named type is not then registered
// (a plugin file named otherwise, a misspelt type: validation then names the closest), when a
// type is given by a variable (`type: ${arch}`), or when
// the graph names torch or crowd: their nodes build models from specs stored in checkpoints and
// snapshots, which may name any family. Starting a run that needs neither skips loading LibTorch.
std::unique_ptr<engine::PluginLoader> load_plugins_for(const std::vector<std::string>& user_dirs,
                                                       const std::vector<std::string>& extra_dirs, Registry& registry,
                                                       const std::string& graph_text);
// The type names ("family.name") a graph's text gives as `type:` values (or `...type=` in a --set).
std::set<std::string> named_types(const std::string& graph_text);

// A registry and the loader that keeps its plugins' libraries loaded.
struct LoadedPlugins {
  Registry registry;
  std::unique_ptr<engine::PluginLoader> loader;
};

// The plugins load_plugins_for loads for these arguments (every plugin when `graph_text` is
// empty), loaded on the first call with the same arguments and kept for the life of the process:
// never freed, since node types, their vtables and std::function targets live in the libraries.
// Thread-safe. Throws ConfigError as load_plugins_for does; a failed load is not kept.
const LoadedPlugins& loaded_plugins(const std::vector<std::string>& user_dirs,
                                    const std::vector<std::string>& extra_dirs, const std::string& graph_text = "");

}  // namespace embedflow::runs
