// The CLI end to end: exit codes, messages, inspect, dot, trace.
#include <catch2/catch.hpp>

#include <embedflow/embedflow.hpp>

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
  check_cli_fails({"run", "/nonexistent/g.yaml"}, 2, "/nonexistent/g.yaml: cannot open graph file");
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
  check_cli_fails({"run", (dir / "g.yaml").string(), testing_path()}, 1,
                  "g.yaml:3:3: node 'bomb' (testing.explode) failed in process: record 10 is poisoned");
}

TEST_CASE("a plugin with a mismatched ABI refuses to load, naming both versions") {
  check_cli_fails({"inspect", std::string("--plugin-path=") + EMBEDFLOW_BAD_PLUGIN_DIR}, 2,
                  embedflow::cat("libembedflow_badabi.so: built for embedflow ABI ", EMBEDFLOW_ABI_VERSION + 41,
                                 " but this engine has ABI ", EMBEDFLOW_ABI_VERSION));
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
  check_cli_fails({"inspect", "core.bach"}, 2, "did you mean 'core.batch'?");

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
# Runs of tiny calls are merged into one span that counts them.
assert sum(e["args"].get("calls", 1) for e in ev if e["name"] == "scaled" and e["args"]["call"] == "process") == 10
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
  CHECK_THAT(tty.out, Catch::Contains(" records ") && Catch::Contains("/s"));
  // No node reports progress with a total: no ETA, though the source knows its count (a source's
  // records never give the run's ETA; test_live_view.cpp).
  CHECK_THAT(tty.out, !Catch::Contains("ETA"));
  // The sink sleeps per record: it is the stage that bounds the run.
  CHECK_THAT(tty.out, Catch::Contains("bound by show"));
  Result quiet = run_process({"/usr/bin/script", "-qec", cli + " run -q " + g, "/dev/null"},
                             {"EMBEDFLOW_PLUGIN_PATH=" + plugin_dir()});
  CHECK_THAT(quiet.out, !Catch::Contains("ETA"));
  Result piped = run_cli({"run", g});
  CHECK_THAT(piped.err, !Catch::Contains("ETA"));
}

TEST_CASE("graph variables: typed substitution, string interpolation, --set overrides, unknown names") {
  auto dir = scratch_dir("vars");
  write_file(dir / "g.yaml", "vars: {n: 5, scale: 2.0, tag: run}\n"
                             "nodes:\n"
                             "  numbers: {type: core.range, params: {count: \"${n}\"}}\n"
                             "  scaled: {type: core.map_affine, params: {scale: \"${scale}\"}}\n"
                             "  show: {type: core.sink, params: {mode: print, out: \"" + (dir / "${tag}-${n}.txt").string() + "\"}}\n"
                             "edges: [numbers -> scaled, scaled -> show]\n");
  Result r = run_cli({"run", (dir / "g.yaml").string(), "-q"});
  REQUIRE(r.exit_code == 0);
  std::string five = read_file(dir / "run-5.txt");
  CHECK_THAT(five, Catch::Contains("value: 8"));  // index 4 * 2.0
  Result over = run_cli({"run", (dir / "g.yaml").string(), "-q", "--set", "n=3", "--set", "tag=again"});
  REQUIRE(over.exit_code == 0);
  CHECK(std::filesystem::exists(dir / "again-3.txt"));
  CHECK_THAT(read_file(dir / "again-3.txt"), Catch::Contains("value: 4"));
  CHECK_THAT(read_file(dir / "again-3.txt"), !Catch::Contains("value: 6"));

  // A variable of the wrong type for the parameter is reported like any ill-typed value.
  Result typed = run_cli({"validate", (dir / "g.yaml").string(), "--set", "n=many"});
  CHECK(typed.exit_code == 2);
  CHECK_THAT(typed.err, Catch::Contains("g.yaml:3:"));
  CHECK_THAT(typed.err, Catch::Contains("parameter 'count' expects an integer"));
  check_cli_fails({"validate", (dir / "g.yaml").string(), "--set", "scal=3"}, 2,
                  "no variable 'scal'; did you mean 'scale'?");

  write_file(dir / "bad.yaml", "vars: {n: 5}\nnodes:\n  numbers: {type: core.range, params: {count: \"${m}\"}}\n"
                               "  show: {type: core.sink}\nedges: [numbers -> show]\n");
  check_cli_fails({"validate", (dir / "bad.yaml").string()}, 2,
                  "bad.yaml:3:47: node 'numbers': unknown variable '${m}'");
}

TEST_CASE("enabled: false leaves out a branch and what only it fed") {
  auto dir = scratch_dir("enabled");
  // Two branches into one sink; the sink's input keeps the live branch. Disabling `a` takes
  // `a_scaled` (fed only by a) with it.
  write_file(dir / "g.yaml", "vars: {with_b: false}\n"
                             "nodes:\n"
                             "  a: {type: core.range, params: {count: 3}}\n"
                             "  a_scaled: {type: core.map_affine, params: {scale: 10.0}}\n"
                             "  b: {type: core.range, params: {count: 4}, enabled: \"${with_b}\"}\n"
                             "  show: {type: core.sink, params: {mode: count}}\n"
                             "edges: [a -> a_scaled, a_scaled -> show, b -> show]\n");
  Result only_a = run_cli({"run", (dir / "g.yaml").string()});
  REQUIRE(only_a.exit_code == 0);
  CHECK_THAT(only_a.out, Catch::Contains("count: 3"));
  CHECK_THAT(only_a.err, Catch::Contains("left out (enabled: false, or fed only by left-out nodes): b"));
  Result both = run_cli({"run", (dir / "g.yaml").string(), "--set", "with_b=true"});
  REQUIRE(both.exit_code == 0);
  CHECK_THAT(both.out, Catch::Contains("count: 7"));
  Result only_b = run_cli({"run", (dir / "g.yaml").string(), "--set", "with_b=true", "--set", "a.enabled=false"});
  REQUIRE(only_b.exit_code == 0);
  CHECK_THAT(only_b.out, Catch::Contains("count: 4"));
  CHECK_THAT(only_b.err, Catch::Contains(": a, a_scaled"));
  check_cli_fails({"validate", (dir / "g.yaml").string(), "--set", "with_b=maybe"}, 2, "enabled must be true or false");
}

TEST_CASE("damaged plugin files, FIFOs and missing plugin dirs are refused with a message") {
  auto dir = scratch_dir("damaged_plugins");
  // A plugin cut to half its bytes would fault (SIGBUS) inside dlopen; the ELF headers say so first.
  std::string whole = read_file(std::string(EMBEDFLOW_TESTING_PLUGIN_DIR) + "/libembedflow_testing.so");
  write_file(dir / "libembedflow_testing.so", whole.substr(0, whole.size() / 2));
  check_cli_fails({"inspect", "--plugin-path=" + dir.string()}, 2,
                  "libembedflow_testing.so: cannot load: truncated or damaged");
  std::filesystem::remove(dir / "libembedflow_testing.so");
  // A FIFO would block the read forever.
  REQUIRE(run_process({"/usr/bin/mkfifo", (dir / "libembedflow_fifo.so").string()}).exit_code == 0);
  check_cli_fails({"inspect", "--plugin-path=" + dir.string()}, 2,
                  "libembedflow_fifo.so: cannot load: not a regular file");
  Result missing = run_cli({"validate", source_dir() + "/graphs/quickstart.yaml", "--plugin-path=/nonexistent/plugins"});
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.err, Catch::Contains("--plugin-path /nonexistent/plugins: no such directory"));
  check_cli_fails({"run", source_dir() + "/graphs/quickstart.yaml", "--seed", "-5"}, 2,
                  "--seed must be a non-negative integer");
}

TEST_CASE("no built binary searches the working directory for libraries") {
  // An empty RUNPATH entry (or a relative one) is the working directory: running embedflow in a
  // downloaded data folder would load a libtbb.so.12 found there.
  Result r = run_python(R"(
import os, subprocess, sys
bad, seen = [], 0
for sub in ("bin", "lib", "plugins", "tests"):
    d = os.path.join(sys.argv[1], sub)
    for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        p = os.path.join(d, name)
        if not os.path.isfile(p) or os.path.islink(p) or open(p, "rb").read(4) != b"\x7fELF":
            continue
        out = subprocess.run(["readelf", "-d", p], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if "RUNPATH" in line or "RPATH" in line:
                seen += 1
                entries = line.split("[", 1)[1].rsplit("]", 1)[0].split(":")
                bad += [f"{p}: {line.strip()}" for e in entries if not e.startswith("/") and not e.startswith("$ORIGIN")]
print(seen)
print("\n".join(bad))
)", {binary_dir()});
  REQUIRE(r.exit_code == 0);
  CHECK(std::stoi(r.out) >= 5);
  CHECK(r.out.substr(r.out.find('\n') + 1) == "\n");
}
