// The CLI end to end: exit codes, messages, inspect, dot, trace.
#include <catch2/catch.hpp>

#include "cli.hpp"

using namespace embedflow::test;

namespace {
std::string testing_path() { return std::string("--plugin-path=") + EMBEDFLOW_TESTING_PLUGIN_DIR; }
}  // namespace

TEST_CASE("the quickstart graph runs") {
  Result r = run_cli({"run", source_dir() + "/graphs/quickstart.yaml", "--quiet"});
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::StartsWith("{index: [0, 1, 2, 3], value: ["));
  CHECK_THAT(r.out, Catch::Contains("{index: [8, 9], value: ["));
}

TEST_CASE("validate lists every problem with exit code 2") {
  auto dir = scratch_dir("validate");
  write_file(dir / "g.yaml", "nodes:\n  a: {type: core.rnage}\n  b: {type: core.sink, params: {mode: loud}}\n");
  Result r = run_cli({"validate", (dir / "g.yaml").string()});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("g.yaml:2:13: node 'a': unknown node type 'core.rnage'; did you mean 'core.range'?"));
  CHECK_THAT(r.err, Catch::Contains("g.yaml:3:39: node 'b': parameter 'mode' = loud is not one of {count, print}"));
  CHECK_THAT(r.err, Catch::Contains("g.yaml:3:3: node 'b': input 'in' of core.sink is not connected"));
  CHECK_THAT(r.err, Catch::Contains("3 problems found"));

  Result ok = run_cli({"validate", source_dir() + "/graphs/quickstart.yaml"});
  CHECK(ok.exit_code == 0);
  CHECK_THAT(ok.out, Catch::Contains("valid (4 nodes, 3 edges)"));
}

TEST_CASE("usage errors and missing files exit 2") {
  CHECK(run_cli({}).exit_code == 2);
  CHECK(run_cli({"frobnicate"}).exit_code == 2);
  CHECK(run_cli({"run"}).exit_code == 2);
  CHECK(run_cli({"run", "x.yaml", "--threads", "many"}).exit_code == 2);
  Result missing = run_cli({"run", "/nonexistent/g.yaml"});
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.err, Catch::Contains("/nonexistent/g.yaml: cannot open graph file"));
  Result set = run_cli({"run", source_dir() + "/graphs/quickstart.yaml", "--set", "numbers.count=ten"});
  CHECK(set.exit_code == 2);
  CHECK_THAT(set.err, Catch::Contains("--set numbers.count=ten: node 'numbers': parameter 'count' expects an integer"));
}

TEST_CASE("a failing node stops the run with exit 1 naming it") {
  auto dir = scratch_dir("explode");
  write_file(dir / "g.yaml", R"(nodes:
  numbers: {type: core.range, params: {count: 1000000}}
  bomb: {type: testing.explode, params: {at: 10}}
  out: {type: core.sink, params: {mode: print, out: )" + (dir / "printed.txt").string() + R"(}}
edges: [numbers.out -> bomb.in, bomb.out -> out.in]
)");
  Result r = run_cli({"run", (dir / "g.yaml").string(), testing_path()});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("g.yaml:3:3: node 'bomb' (testing.explode) failed in process: record 10 is poisoned"));
}

TEST_CASE("a plugin with a mismatched ABI refuses to load, naming both versions") {
  Result r = run_cli({"inspect", std::string("--plugin-path=") + EMBEDFLOW_BAD_PLUGIN_DIR});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("libembedflow_badabi.so: built for embedflow ABI 42 but this engine has ABI 1"));
}

TEST_CASE("inspect describes types like gst-inspect, and dumps JSON") {
  Result r = run_cli({"inspect", "core.batch"});
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("size"));
  CHECK_THAT(r.out, Catch::Contains("REQUIRED  range [1, inf]"));
  CHECK_THAT(r.out, Catch::Contains("drop_last              bool  default false"));
  CHECK_THAT(r.out, Catch::Contains("libembedflow_core.so"));
  Result list = run_cli({"inspect"});
  CHECK_THAT(list.out, Catch::Contains("core.quantile                [aggregate]"));
  Result comp = run_cli({"inspect", "core.quantile"});
  CHECK_THAT(comp.out, Catch::Contains("q                      float  REQUIRED  range [0, 1]"));
  Result unknown = run_cli({"inspect", "core.bach"});
  CHECK(unknown.exit_code == 2);
  CHECK_THAT(unknown.err, Catch::Contains("did you mean 'core.batch'?"));

  Result json = run_cli({"inspect", "--json"});
  REQUIRE(json.exit_code == 0);
  auto dir = scratch_dir("json");
  write_file(dir / "schema.json", json.out);
  Result py = run_python(R"(
import json, sys
d = json.load(open(sys.argv[1]))
b = d["nodes"]["core.batch"]
assert b["concurrency"] == "serial", b
assert [p["name"] for p in b["params"]] == ["size", "drop_last"], b["params"]
assert b["params"][0]["required"] and b["params"][0]["min"] == 1
assert d["components"]["core.quantile"]["kind"] == "aggregate"
print("ok", len(d["nodes"]))
)", {(dir / "schema.json").string()});
  CHECK(py.exit_code == 0);
  CHECK_THAT(py.out + py.err, Catch::StartsWith("ok"));
}

TEST_CASE("dot draws nodes, ports and schemas") {
  Result r = run_cli({"dot", source_dir() + "/graphs/quickstart.yaml"});
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::StartsWith("digraph embedflow {"));
  CHECK_THAT(r.out, Catch::Contains("n0:o0 -> n1:i0"));
  CHECK_THAT(r.out, Catch::Contains("index: i64[B]\\lvalue: f64[B]\\l"));
  CHECK_THAT(r.out, Catch::Contains("core.map_affine"));
}

TEST_CASE("--trace writes Chrome trace events per node") {
  auto dir = scratch_dir("trace");
  std::string trace = (dir / "t.json").string();
  Result r = run_cli({"run", source_dir() + "/graphs/quickstart.yaml", "-q", "--trace", trace});
  REQUIRE(r.exit_code == 0);
  Result py = run_python(R"(
import json, sys
d = json.load(open(sys.argv[1]))
ev = [e for e in d["traceEvents"] if e["ph"] == "X"]
names = {e["name"] for e in ev}
assert names == {"numbers", "scaled", "batches", "show"}, names
assert sum(1 for e in ev if e["name"] == "scaled" and e["args"]["call"] == "process") == 10
assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in ev)
print("ok")
)", {trace});
  CHECK(py.exit_code == 0);
  CHECK_THAT(py.out + py.err, Catch::StartsWith("ok"));
}

TEST_CASE("a progress line shows on a terminal, not in pipes or with --quiet") {
  auto dir = scratch_dir("progress");
  write_file(dir / "g.yaml", R"(nodes:
  numbers: {type: core.range, params: {count: 3000}}
  show: {type: core.sink, params: {delay_us: 500}}
edges: [numbers.out -> show.in]
)");
  std::string g = (dir / "g.yaml").string();
  std::string cli = EMBEDFLOW_CLI;
  // script(1) gives the child a pseudo-terminal, as an interactive user would have.
  Result tty = run_process({"/usr/bin/script", "-qec", cli + " run " + g, "/dev/null"},
                           {"EMBEDFLOW_PLUGIN_PATH=" + plugin_dir()});
  REQUIRE(tty.exit_code == 0);
  CHECK_THAT(tty.out, Catch::Contains(" records  ") && Catch::Contains("/s  ") && Catch::Contains("%  ETA "));
  Result quiet = run_process({"/usr/bin/script", "-qec", cli + " run -q " + g, "/dev/null"},
                             {"EMBEDFLOW_PLUGIN_PATH=" + plugin_dir()});
  CHECK_THAT(quiet.out, !Catch::Contains("ETA"));
  Result piped = run_cli({"run", g});
  CHECK_THAT(piped.err, !Catch::Contains("ETA"));
}
