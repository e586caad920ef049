// The CLI run from a given working directory, with the built plugins and the testing plugin on
// the plugin path: how the run-record and report tests call `embedflow` (outputs land relative
// to that directory, as a user's would).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "cli.hpp"

namespace embedflow::test {

inline Result run_in(const std::filesystem::path& dir, const std::vector<std::string>& args) {
  std::string cmd = "cd '" + dir.string() + "' && exec '" EMBEDFLOW_CLI "'";
  for (const auto& a : args) cmd += " '" + a + "'";
  return run_process({"/bin/sh", "-c", cmd},
                     {"EMBEDFLOW_PLUGIN_PATH=" + plugin_dir() + ":" + EMBEDFLOW_TESTING_PLUGIN_DIR});
}

}  // namespace embedflow::test
