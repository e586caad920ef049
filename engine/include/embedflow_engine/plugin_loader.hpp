// Finds plugin libraries on the plugin path, checks each descriptor before calling into it, and
// registers its types. Libraries stay loaded for the life of the process: node objects, their
// vtables and std::function targets live in them.
#pragma once

#include <boost/dll/shared_library.hpp>

#include <memory>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "embedflow/registry.hpp"

namespace embedflow::engine {

struct LoadedPlugin {
  std::string name, version, file, libraries, toolchain, sdk_version;
};

class PluginLoader {
 public:
  // Directories in search order: explicit --plugin-path entries, then EMBEDFLOW_PLUGIN_PATH
  // (colon-separated), then the build/install plugin dir next to the executable.
  static std::vector<std::string> default_search_path(const std::vector<std::string>& explicit_dirs);

  explicit PluginLoader(std::vector<std::string> search_path);

  // Loads every libembedflow_*.so on the path into `registry` (the first file of a given name
  // wins, like PATH). A plugin that fails to load or is refused throws ConfigError naming the
  // file and why; nothing is skipped silently.
  void load_all(Registry& registry);
  // Loads, of the same files, only libembedflow_<family>.so for each family named (the plugin
  // files' naming convention); a family without such a file is left to load_all. Files already
  // loaded are not loaded again, by either function.
  void load_families(Registry& registry, const std::set<std::string>& families);
  // Loads one library file (used for tests and for explicit paths).
  void load_file(const std::string& path, Registry& registry);

  const std::vector<LoadedPlugin>& plugins() const { return plugins_; }
  const std::vector<std::string>& search_path() const { return search_path_; }

 private:
  // The plugin files on the search path, first of each name, in load order.
  std::vector<std::filesystem::path> plugin_files() const;

  std::vector<std::string> search_path_;
  std::set<std::string> loaded_names_;  // file names loaded so far
  std::vector<LoadedPlugin> plugins_;
  std::vector<std::shared_ptr<boost::dll::shared_library>> libraries_;
};

}  // namespace embedflow::engine
