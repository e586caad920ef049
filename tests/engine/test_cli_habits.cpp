// CLI habits users expect: `dot` shows only the parameters a graph sets (all with --all-params)
// and lays a large graph out top to bottom; trace timestamps keep microsecond precision and runs
// of tiny calls are merged; `inspect PLUGIN`, `inspect TYPE --json` with typed defaults;
// `cache --help`; `run --explain-cache --dry-run` plans without running.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>

#include "cli.hpp"

using namespace embedflow::test;
namespace fs = std::filesystem;
using nlohmann::json;

TEST_CASE("dot hides default parameters unless --all-params, and lays out large graphs top to bottom", "[habits]") {
  const fs::path dir = scratch_dir("dot");
  write_file(dir / "g.yaml", numbers_through("seed: 1\n", 5, "scaled", "{type: core.map_affine, params: {scale: 2.5}}"));
  Result r = run_cli({"dot", (dir / "g.yaml").string()});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("scale=2.5") != std::string::npos);
  CHECK(r.out.find("jitter=") == std::string::npos);  // a default
  CHECK(r.out.find("rankdir=LR") != std::string::npos);
  r = run_cli({"dot", (dir / "g.yaml").string(), "--all-params"});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("jitter=0.0") != std::string::npos);
  std::string big = "seed: 1\nnodes:\n  n0: {type: core.range, params: {count: 5}}\n";
  std::string edges = "edges:\n";
  for (int i = 1; i <= 14; ++i) {
    big += "  n" + std::to_string(i) + ": {type: core.map_affine}\n";
    edges += "  - n" + std::to_string(i - 1) + " -> n" + std::to_string(i) + "\n";
  }
  big += "  end: {type: core.sink, params: {mode: count}}\n";
  edges += "  - n14 -> end\n";
  write_file(dir / "big.yaml", big + edges);
  r = run_cli({"dot", (dir / "big.yaml").string()});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("rankdir=TB") != std::string::npos);
  CHECK(r.out.find("tooltip=") != std::string::npos);
}

TEST_CASE("trace: microsecond timestamps at three decimals; tiny repeated calls merged", "[habits]") {
  const fs::path dir = scratch_dir("trace");
  write_file(dir / "g.yaml", R"(seed: 1
nodes:
  numbers: {type: core.range, params: {count: 20000}}
  scaled:  {type: core.map_affine, params: {scale: 2.0}}
  slow:    {type: testing.progress, params: {delay_us: 30000}}
  limit:   {type: core.limit, params: {count: 3}}
  show:    {type: core.sink, params: {mode: count}}
edges: [numbers -> scaled, scaled -> show, numbers -> limit, limit -> slow, slow -> show]
)");
  const Result r = run_cli({"run", (dir / "g.yaml").string(), "--trace", (dir / "t.json").string(), "--threads", "1",
                            "--out", (dir / "out").string(), "--no-report"},
                           {"EMBEDFLOW_PLUGIN_PATH=" + plugin_dir() + ":" + EMBEDFLOW_TESTING_PLUGIN_DIR});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  std::ifstream in(dir / "t.json");
  const json trace = json::parse(in);
  std::size_t merged = 0, calls = 0, slow = 0;
  const std::string text = read_file(dir / "t.json");
  CHECK(text.find("e+") == std::string::npos);  // no exponent notation in timestamps
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    if (e["args"].contains("calls")) {
      ++merged;
      calls += e["args"]["calls"].get<std::size_t>();
      CHECK(e["args"]["busy_us"].get<double>() <= e["dur"].get<double>() + 1e-3);
    }
    if (e["name"] == "slow" && e["args"]["call"] == "process") {
      ++slow;
      CHECK(e["dur"].get<double>() >= 30000);  // a long call stays its own span
      CHECK_FALSE(e["args"].contains("calls"));
    }
  }
  CHECK(slow == 3);
  CHECK(merged > 0);
  CHECK(calls > merged);  // each merged span stands for several calls
}

TEST_CASE("inspect PLUGIN, inspect TYPE --json with typed defaults, cache --help, --explain-cache --dry-run", "[habits]") {
  Result r = run_cli({"inspect", "core"});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("core.batch") != std::string::npos);
  CHECK(r.out.find("image.") == std::string::npos);
  r = run_cli({"inspect", "core.map_affine", "--json"});
  REQUIRE(r.exit_code == 0);
  const json one = json::parse(r.out);
  REQUIRE(one["nodes"].size() == 1);
  CHECK(one["components"].empty());
  for (const auto& p : one["nodes"]["core.map_affine"]["params"]) {
    if (p["name"] == "scale") CHECK(p["default"] == 1.0);
    if (p["name"] == "field") CHECK(p["default"] == "value");
  }
  r = run_cli({"inspect", "core.batch", "--json"});
  REQUIRE(r.exit_code == 0);
  for (const auto& p : json::parse(r.out)["nodes"]["core.batch"]["params"])
    if (p["name"] == "drop_last") CHECK(p["default"] == false);
  r = run_cli({"inspect", "nosuchplugin"});
  CHECK(r.exit_code == 2);

  r = run_cli({"cache", "--help"});
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("usage: embedflow cache") != std::string::npos);

  const fs::path dir = scratch_dir("dry_run");
  write_file(dir / "g.yaml", R"(seed: 1
out: out/dry
nodes:
  numbers: {type: core.range, params: {count: 5}, cache: true}
  show:    {type: core.sink, params: {mode: print}}
edges: [numbers -> show]
)");
  r = run_cli({"run", (dir / "g.yaml").string(), "--explain-cache", "--dry-run", "--cache-dir", (dir / "cache").string()});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.empty());  // nothing printed: the sink never ran
  CHECK(r.err.find("dry run: 2 nodes would run") != std::string::npos);
  CHECK(r.err.find("numbers") != std::string::npos);  // the plan
  CHECK_FALSE(fs::exists(dir / "out/dry"));
  CHECK((!fs::exists(dir / "cache") || fs::is_empty(dir / "cache")));
}
