// An installed tree works on its own: `cmake --install` places the CLI, the SDK, the plugins
// (with RPATHs) and the report's chart library so PREFIX/bin/embedflow, with no plugin path set,
// lists every plugin the build made and runs graphs/quickstart.yaml, report included. And a
// graph file may name extra plugin directories relative to itself.
#include <catch2/catch.hpp>

#include "cli.hpp"

using namespace embedflow::test;
namespace fs = std::filesystem;

namespace {

// Runs a program from `dir` with EMBEDFLOW_PLUGIN_PATH removed from the environment, so only
// what the binary finds by itself is loaded.
Result run_bare(const fs::path& dir, const std::string& program, const std::vector<std::string>& args) {
  std::string cmd = "cd '" + dir.string() + "' && exec /usr/bin/env -u EMBEDFLOW_PLUGIN_PATH '" + program + "'";
  for (const auto& a : args) cmd += " '" + a + "'";
  return run_process({"/bin/sh", "-c", cmd});
}

}  // namespace

TEST_CASE("an installed tree finds its plugins and runs a graph", "[install]") {
  const fs::path dir = scratch_dir("install");
  const fs::path prefix = dir / "prefix";
  const Result install = run_process({"/usr/bin/cmake", "--install", binary_dir(), "--prefix", prefix.string()});
  INFO(install.out << install.err);
  REQUIRE(install.exit_code == 0);
  const std::string cli = (prefix / "bin/embedflow").string();

  const Result inspect = run_bare(dir, cli, {"inspect"});
  INFO(inspect.err);
  REQUIRE(inspect.exit_code == 0);
  std::size_t plugins = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(binary_dir()) / "plugins")) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("libembedflow_", 0) != 0 || entry.path().extension() != ".so") continue;
    const std::string family = name.substr(13, name.size() - 13 - 3);
    INFO(family << "\n" << inspect.out);
    CHECK(inspect.out.find("  " + family + " ") != std::string::npos);
    ++plugins;
  }
  CHECK(plugins >= 1);
  // Loaded from the installed tree, not from the build.
  CHECK(inspect.out.find(binary_dir() + "/plugins") == std::string::npos);
  CHECK(inspect.out.find((prefix / "lib").string()) != std::string::npos);

  const Result ran = run_bare(dir, cli, {"run", source_dir() + "/graphs/quickstart.yaml", "--out", "out/q"});
  INFO(ran.err);
  REQUIRE(ran.exit_code == 0);
  const Result built = run_bare(dir, EMBEDFLOW_CLI, {"run", source_dir() + "/graphs/quickstart.yaml", "--out", "out/b",
                                                     "--no-report"});
  REQUIRE(built.exit_code == 0);
  CHECK(ran.out == built.out);
  CHECK(fs::exists(dir / "out/q/run.json"));
  if (fs::exists(source_dir() + "/tools/report/node_modules")) {  // tools/setup installs the chart library
    CHECK(fs::exists(prefix / "share/embedflow/report/vega-embed.min.js"));
    CHECK(fs::exists(dir / "out/q/report.html"));
    CHECK(ran.err.find("no report written") == std::string::npos);
  }
}

TEST_CASE("plugin_dirs: a graph names plugin folders relative to itself", "[install]") {
  const fs::path dir = scratch_dir("plugin_dirs");
  fs::create_directories(dir / "project/plugins");
  fs::copy_file(fs::path(EMBEDFLOW_TESTING_PLUGIN_DIR) / "libembedflow_testing.so", dir / "project/plugins/libembedflow_testing.so");
  write_file(dir / "project/g.yaml", numbers_through("seed: 1\nplugin_dirs: [plugins]\nout: out/g\n", 5, "train",
                                                     "{type: testing.progress, params: {total: 5}}"));
  fs::create_directories(dir / "elsewhere");
  Result r = run_bare(dir / "elsewhere", EMBEDFLOW_CLI, {"run", "../project/g.yaml", "--no-report"});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  // Without the entry the type is unknown; a missing folder is named with the graph.
  write_file(dir / "project/bad.yaml", R"(seed: 1
plugin_dirs: [no_such_dir]
nodes:
  numbers: {type: core.range, params: {count: 5}}
  show:    {type: core.sink, params: {mode: count}}
edges: [numbers -> show]
)");
  r = run_bare(dir / "elsewhere", EMBEDFLOW_CLI, {"run", "../project/bad.yaml"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("../project/bad.yaml: plugin_dirs entry 'no_such_dir'") != std::string::npos);
}
