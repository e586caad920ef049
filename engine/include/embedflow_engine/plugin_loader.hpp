// Finds plugin libraries on the plugin path, checks each descriptor before calling into it, and
// registers its types. Libraries stay loaded for the life of the process: node objects, their
// vtables and std::function targets live in them.
#pragma once

#include <boost/dll/shared_library.hpp>

#include <memory>
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
  // Loads one library file (used for tests and for explicit paths).
  void load_file(const std::string& path, Registry& registry);

  const std::vector<LoadedPlugin>& plugins() const { return plugins_; }
  const std::vector<std::string>& search_path() const { return search_path_; }

 private:
  std::vector<std::string> search_path_;
  std::vector<LoadedPlugin> plugins_;
  std::vector<std::shared_ptr<boost::dll::shared_library>> libraries_;
};

}  // namespace embedflow::engine
