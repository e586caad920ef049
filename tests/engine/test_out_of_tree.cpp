// A user adds a stage without touching the engine: install the SDK, build the example plugin
// out of tree with find_package(embedflow), and run it from a graph file.
#include <catch2/catch.hpp>

#include "cli.hpp"

using namespace embedflow::test;

TEST_CASE("an out-of-tree plugin builds against the installed SDK and runs") {
  auto dir = scratch_dir("out_of_tree");
  std::string prefix = (dir / "prefix").string();
  Result install = run_process({"/usr/bin/cmake", "--install", binary_dir(), "--prefix", prefix, "--component", "Unspecified"});
  INFO(install.out << install.err);
  REQUIRE(install.exit_code == 0);
  Result configure = run_process({"/usr/bin/cmake", "-S", source_dir() + "/tools/example_plugin", "-B", (dir / "build").string(),
                                  "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_PREFIX_PATH=" + prefix});
  INFO(configure.out << configure.err);
  REQUIRE(configure.exit_code == 0);
  Result build = run_process({"/usr/bin/cmake", "--build", (dir / "build").string()});
  INFO(build.out << build.err);
  REQUIRE(build.exit_code == 0);

  Result run = run_cli({"run", source_dir() + "/tools/example_plugin/clip.yaml", "-q", "--plugin-path", (dir / "build").string()});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  CHECK_THAT(run.out, Catch::StartsWith("{index: 0, value: 2}\n{index: 1, value: 2}\n{index: 2, value: 2}\n{index: 3, value: 3}"));
  CHECK_THAT(run.out, Catch::EndsWith("{index: 9, value: 5}\n"));

  Result listed = run_cli({"inspect", "example.clip", "--plugin-path", (dir / "build").string()});
  CHECK_THAT(listed.out, Catch::Contains("Plugin: example 1.0.0"));
}
