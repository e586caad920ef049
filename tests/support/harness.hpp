// Plugins loaded into the test's own process, for the in-process harness: NodeRunner (one node,
// embedflow/testing/node_runner.hpp) and GraphRunner (a whole graph,
// embedflow_runs/testing.hpp). Tests that include this link embedflow_runs_testing.
#pragma once

#include <cstdlib>
#include <string>

#include <embedflow/testing/node_runner.hpp>

#include "cli.hpp"
#include "embedflow_runs/testing.hpp"

namespace embedflow::test {

using embedflow::runs::testing::GraphRun;
using embedflow::runs::testing::GraphRunner;
using embedflow::testing::NodeRunner;
using embedflow::testing::format_records;

// The plugins of this build (build/plugins), loaded once per process.
inline const Registry& plugins() { return runs::testing::plugin_registry({plugin_dir()}); }

#ifdef EMBEDFLOW_TESTING_PLUGIN_DIR
// The same plus the tests' own plugin (testing.jittery and the other test-only node types).
inline const Registry& plugins_and_testing() {
  return runs::testing::plugin_registry({plugin_dir(), EMBEDFLOW_TESTING_PLUGIN_DIR});
}
#endif

// Sets an environment variable for one scope (nodes that read WORLD_SIZE / RANK at open).
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::string& value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = old, had_ = true;
    setenv(name_.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_.c_str(), old_.c_str(), 1);
    else unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_, old_;
  bool had_ = false;
};

}  // namespace embedflow::test
