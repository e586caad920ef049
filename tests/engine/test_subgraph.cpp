// Graph composition: `subgraphs:` defines a named piece of graph with parameters and ports
// (inline, or in a file of its own); a node whose type names it is an instance. Checked here:
// the expansion is exactly the graph one would write out by hand (same resolved graph, same
// cache fingerprints, same records, values checked by hand); parameters, graph variables and
// --set reach inside; problems name the line inside the subgraph and the use site; dot draws
// instances as clusters; hostile nesting stops at a bound.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <sstream>

#include "embedflow_engine/cache.hpp"
#include "embedflow_engine/describe.hpp"
#include "embedflow_engine/graph.hpp"
#include "embedflow_engine/graph_file.hpp"
#include "harness.hpp"

using namespace embedflow;
using namespace embedflow::test;
namespace fs = std::filesystem;

namespace {

// A range scaled twice by one subgraph: instance `a` scales by the graph variable `factor`,
// `b` by 3 and labels its count; `a`'s output also goes on to `end`.
const char* kComposed = R"(# Two scaled copies of a range.
seed: 3
vars: {factor: 2}
subgraphs:
  scaled:
    doc: scales one field and counts what passes
    params: {scale: ~, offset: 0.5}
    inputs: {in: scale}
    outputs: {out: scale.out}
    nodes:
      scale: {type: core.map_affine, params: {field: value, scale: "${scale}", offset: "${offset}"}, cache: true}
      count: {type: core.sink, params: {mode: count}}
    edges: [scale -> count]
nodes:
  numbers: {type: core.range, params: {count: 5}}
  a: {type: scaled, params: {scale: "${factor}"}}
  b: {type: scaled, params: {scale: 3, offset: 1}}
  end: {type: core.sink, params: {mode: count}}
edges: [numbers -> a, numbers -> b.in, a.out -> end]
)";

// The same graph written out by hand with the ids the expansion makes.
const char* kByHand = R"(# Two scaled copies of a range.
seed: 3
vars: {factor: 2}
nodes:
  numbers: {type: core.range, params: {count: 5}}
  a__scale: {type: core.map_affine, params: {field: value, scale: "${factor}", offset: 0.5}, cache: true}
  a__count: {type: core.sink, params: {mode: count}}
  b__scale: {type: core.map_affine, params: {field: value, scale: 3, offset: 1}, cache: true}
  b__count: {type: core.sink, params: {mode: count}}
  end: {type: core.sink, params: {mode: count}}
edges: [a__scale -> a__count, b__scale -> b__count, numbers -> a__scale, numbers -> b__scale, a__scale.out -> end]
)";

engine::ResolvedGraph resolved(const std::string& text, const std::vector<std::string>& sets = {}) {
  std::vector<Diagnostic> problems;
  engine::GraphSpec spec = engine::parse_graph_text(text, "g.yaml", problems);
  for (const auto& s : sets) engine::apply_override(spec, s, problems);
  engine::apply_vars(spec, problems);
  engine::ResolvedGraph g = engine::resolve(std::move(spec), plugins(), problems);
  std::string listed;
  for (const auto& p : problems) listed += p.str() + "\n";
  INFO(listed);
  REQUIRE(problems.empty());
  return g;
}

std::map<std::string, std::string> fingerprints(const engine::ResolvedGraph& g) {
  engine::Fingerprinter f(g);
  std::map<std::string, std::string> out;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) out[g.nodes[i].id()] = f.manifest(i).fingerprint;
  return out;
}

std::vector<double> values(const GraphRun& r, const std::string& output) {
  std::vector<double> out;
  for (const auto& rec : r.records(output)) out.push_back(rec->get("value").as_double(0));
  return out;
}

std::string problems_of(const std::string& text, const std::string& file = "g.yaml") {
  return GraphRunner(plugins(), text, file).validate().problem_text();
}

}  // namespace

TEST_CASE("a subgraph used twice is the graph written out by hand: same nodes, fingerprints and records") {
  const engine::ResolvedGraph composed = resolved(kComposed), by_hand = resolved(kByHand);
  REQUIRE(composed.nodes.size() == 6);
  std::vector<std::string> ids;
  for (const auto& n : composed.nodes) ids.push_back(n.id());
  CHECK(ids == std::vector<std::string>{"numbers", "a__scale", "a__count", "b__scale", "b__count", "end"});
  // The recorded graph (graph.resolved.yaml) and every cache fingerprint are the hand-written graph's.
  CHECK(engine::graph_to_yaml(composed.spec, "") == engine::graph_to_yaml(by_hand.spec, ""));
  CHECK(fingerprints(composed) == fingerprints(by_hand));
  CHECK(composed.nodes[1].seed == by_hand.nodes[1].seed);

  const char* outputs[] = {"a__scale.out", "b__scale.out"};
  GraphRunner run_composed(plugins(), kComposed), run_by_hand(plugins(), kByHand);
  for (const char* o : outputs) run_composed.collect(o), run_by_hand.collect(o);
  const GraphRun c = run_composed.run(), h = run_by_hand.run();
  INFO(c.message() << h.message());
  REQUIRE(c.exit_code == 0);
  REQUIRE(h.exit_code == 0);
  // value * scale + offset, by hand: a scales by factor 2 with the default offset 0.5, b by 3 + 1.
  CHECK(values(c, "a__scale.out") == std::vector<double>{0.5, 2.5, 4.5, 6.5, 8.5});
  CHECK(values(c, "b__scale.out") == std::vector<double>{1, 4, 7, 10, 13});
  for (const char* o : outputs) CHECK(c.lines(o) == h.lines(o));
}

TEST_CASE("instance parameters keep their types, text parts are substituted, and --set of a graph variable reaches inside") {
  const engine::ResolvedGraph g = resolved(kComposed, {"factor=5"});
  CHECK(g.nodes[1].params.all().at("scale").as_number() == 5.0);
  CHECK(g.nodes[3].params.all().at("offset").as_number() == 1.0);

  // A parameter inside a longer string takes its text; names that are not the subgraph's are
  // the graph's variables, substituted after.
  const std::string text = R"(vars: {run: r7}
subgraphs:
  named:
    params: {tag: ~}
    inputs: {in: show}
    nodes:
      show: {type: core.sink, params: {mode: count, out: "out/${run}/${tag}-count.txt"}}
nodes:
  numbers: {type: core.range, params: {count: 2}}
  first: {type: named, params: {tag: one}}
edges: [numbers -> first]
)";
  const engine::ResolvedGraph named = resolved(text);
  CHECK(named.nodes[1].params.all().at("out").as_string() == "out/r7/one-count.txt");
  // A node inside an instance is reached by its expanded id.
  const engine::ResolvedGraph set = resolved(kComposed, {"b__scale.offset=4"});
  CHECK(set.nodes[3].params.all().at("offset").as_number() == 4.0);
}

TEST_CASE("an instance's enabled: false leaves its nodes out, and what only they feed") {
  std::string text = kComposed;
  text.replace(text.find("params: {scale: 3, offset: 1}}"), 30, "params: {scale: 3, offset: 1}, enabled: false}");
  const GraphRun r = GraphRunner(plugins(), text).collect("a__scale.out").run();
  INFO(r.message());
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.log, Catch::Contains("left out") && Catch::Contains("b__scale") && Catch::Contains("b__count"));
  CHECK(values(r, "a__scale.out").size() == 5);
}

TEST_CASE("problems inside a subgraph name the line inside it and the instance that uses it") {
  const std::string text = R"(subgraphs:
  scaled:
    params: {scale: ~}
    inputs: {in: scale}
    outputs: {out: scale.out}
    nodes:
      scale: {type: core.map_affine, params: {field: value, scale: "${scale}", offst: 1}}
nodes:
  numbers: {type: core.range, params: {count: 5}}
  a: {type: scaled, params: {scael: 2}}
  b: {type: scaled, params: {scale: 3}}
  c: {type: scaledd}
  end: {type: core.sink}
edges: [numbers -> a, numbers -> b.inn, b -> end]
)";
  const std::string p = problems_of(text);
  INFO(p);
  // At the use site, with a suggestion.
  CHECK_THAT(p, Catch::Contains("g.yaml:10:37: node 'a': subgraph 'scaled' has no parameter 'scael'; did you mean 'scale'? "
                                "(parameters: scale)"));
  CHECK_THAT(p, Catch::Contains("g.yaml:10:3: node 'a': subgraph 'scaled' needs parameter 'scale' (declared at g.yaml:3:14)"));
  CHECK_THAT(p, Catch::Contains("g.yaml:14:23: node 'b': subgraph instance 'b' (scaled) has no input port 'inn'; did you mean "
                                "'in'? (inputs: in)"));
  CHECK_THAT(p, Catch::Contains("g.yaml:12:13: node 'c': unknown node type or subgraph 'scaledd'; did you mean 'scaled'?"));
  CHECK(p.find("unknown node type 'scaledd'") == std::string::npos);  // said once
  // Inside the subgraph: the line inside, once per instance, each naming its use site.
  CHECK_THAT(p, Catch::Contains("g.yaml:7:87: node 'a__scale': unknown parameter 'offst'; did you mean 'offset'? "
                                "(in subgraph 'scaled' at g.yaml:2:3, used as 'a' at g.yaml:10:3)"));
  CHECK_THAT(p, Catch::Contains("g.yaml:7:87: node 'b__scale': unknown parameter 'offst'; did you mean 'offset'? "
                                "(in subgraph 'scaled' at g.yaml:2:3, used as 'b' at g.yaml:11:3)"));
}

TEST_CASE("a subgraph port that names no node port is a located problem, used directly or from a nested instance") {
  // Found by fuzz_graph_file: a nested instance's only input, declared without a target, threw
  // while its edges were wired.
  const std::string text = R"(subgraphs:
  scaled:
    inputs: {in: ~}
    outputs: {out: scale.out}
    nodes:
      scale: {type: core.map_affine, params: {field: value}}
  twice:
    inputs: {in: [first, second.in]}
    outputs: {out: second.out}
    nodes:
      first: {type: scaled}
      second: {type: scaled}
nodes:
  numbers: {type: core.range, params: {count: 5}}
  a: {type: twice}
  b: {type: scaled}
  end: {type: core.sink}
edges: [numbers -> a, numbers -> b, a -> end]
)";
  const std::string p = problems_of(text);
  INFO(p);
  CHECK_THAT(p, Catch::Contains("g.yaml:3:18: a subgraph port names a node port inside it: 'node.port'"));
  // The instances' edges into it are dropped quietly (said once, above), and the nodes they
  // would have fed are unconnected, each located.
  CHECK_THAT(p, Catch::Contains("node 'a__first__scale': input 'in' of core.map_affine is not connected"));
  CHECK_THAT(p, Catch::Contains("node 'b__scale': input 'in' of core.map_affine is not connected"));
}

TEST_CASE("a subgraph that contains itself, or nests past the bound, is a located problem, not a hang") {
  const std::string loop = R"(subgraphs:
  outer:
    nodes: {inner_use: {type: inner}}
  inner:
    nodes: {back: {type: outer}}
nodes:
  x: {type: outer}
)";
  const std::string p = problems_of(loop);
  INFO(p);
  CHECK_THAT(p, Catch::Contains("g.yaml:5:26: node 'x__inner_use__back': subgraph 'outer' contains itself (outer -> inner -> outer)"));
  CHECK_THAT(p, Catch::Contains("used as 'x__inner_use' at g.yaml:3:13"));

  // Ten instances of ten instances of ... of a sink: 10^6 nodes asked for, stopped at the bound.
  std::string wide = "subgraphs:\n  s0:\n    nodes: {leaf: {type: core.sink}}\n";
  for (int level = 1; level <= 6; ++level) {
    wide += cat("  s", level, ":\n    nodes: {");
    for (int i = 0; i < 10; ++i) wide += cat(i ? ", " : "", "n", i, ": {type: s", level - 1, "}");
    wide += "}\n";
  }
  wide += "nodes:\n  top: {type: s6}\n";
  const std::string q = problems_of(wide);
  CHECK_THAT(q, Catch::Contains("subgraphs expand to more than 10000 nodes"));
  // One node, but each level's input feeds the level below's input ten times: 10^8 ports asked
  // for, stopped at the edge bound before they are listed.
  std::string fan = "subgraphs:\n  p0:\n    inputs: {in: [leaf, leaf, leaf, leaf, leaf, leaf, leaf, leaf, leaf, leaf]}\n"
                    "    nodes: {leaf: {type: core.sink}}\n";
  for (int level = 1; level <= 7; ++level)
    fan += cat("  p", level, ":\n    inputs: {in: [n.in, n.in, n.in, n.in, n.in, n.in, n.in, n.in, n.in, n.in]}\n"
               "    nodes: {n: {type: p", level - 1, "}}\n");
  fan += "nodes:\n  numbers: {type: core.range, params: {count: 1}}\n  top: {type: p7}\nedges: [numbers -> top]\n";
  CHECK_THAT(problems_of(fan), Catch::Contains("feeds more than 100000 ports"));
}

TEST_CASE("a subgraph from its own file: found beside the graph, its problems located in that file") {
  const fs::path dir = scratch_dir("subgraph_file");
  write_file(dir / "parts" / "scaled.yaml", R"(# scales one field
params: {scale: 1}
inputs: {in: scale}
outputs: {out: scale.out}
nodes:
  scale: {type: core.map_affine, params: {field: value, scale: "${scale}", ofset: 2}}
)");
  const std::string graph = R"(subgraphs: {scaled: parts/scaled.yaml}
nodes:
  numbers: {type: core.range, params: {count: 3}}
  twice: {type: scaled, params: {scale: 2}}
  end: {type: core.sink}
edges: [numbers -> twice, twice -> end]
)";
  write_file(dir / "g.yaml", graph);
  const std::string p = GraphRunner::from_file(plugins(), (dir / "g.yaml").string()).validate().problem_text();
  CHECK_THAT(p, Catch::Contains((dir / "parts" / "scaled.yaml").string() + ":6:83: node 'twice__scale': unknown parameter "
                                                                            "'ofset'; did you mean 'offset'?"));
  CHECK_THAT(p, Catch::Contains("used as 'twice' at " + (dir / "g.yaml").string() + ":4:3)"));

  write_file(dir / "parts" / "scaled.yaml", R"(params: {scale: 1}
inputs: {in: scale}
outputs: {out: scale.out}
nodes:
  scale: {type: core.map_affine, params: {field: value, scale: "${scale}"}}
)");
  const GraphRun ok = GraphRunner::from_file(plugins(), (dir / "g.yaml").string()).collect("twice__scale.out").run();
  INFO(ok.message());
  REQUIRE(ok.exit_code == 0);
  CHECK(values(ok, "twice__scale.out") == std::vector<double>{0, 2, 4});

  fs::remove(dir / "parts" / "scaled.yaml");
  CHECK_THAT(GraphRunner::from_file(plugins(), (dir / "g.yaml").string()).validate().problem_text(),
             Catch::Contains(":1:21: cannot open subgraph file '" + (dir / "parts" / "scaled.yaml").string() + "'") &&
                 !Catch::Contains("unknown node type"));
  REQUIRE(mkfifo((dir / "parts" / "scaled.yaml").c_str(), 0600) == 0);  // refused, never opened
  CHECK_THAT(GraphRunner::from_file(plugins(), (dir / "g.yaml").string()).validate().problem_text(),
             Catch::Contains("scaled.yaml' is a FIFO, not a regular file"));
}

TEST_CASE("dot draws each subgraph instance as a cluster, nested ones inside it") {
  const std::string text = R"(subgraphs:
  leaf:
    inputs: {in: show}
    nodes: {show: {type: core.sink}}
  pair:
    inputs: {in: [left, right]}
    nodes: {left: {type: leaf}, right: {type: leaf}}
nodes:
  numbers: {type: core.range, params: {count: 2}}
  both: {type: pair}
edges: [numbers -> both]
)";
  std::ostringstream dot;
  engine::write_dot(dot, resolved(text));
  const std::string d = dot.str();
  INFO(d);
  const auto at = [&](const std::string& s) { return d.find(s); };
  REQUIRE(at("subgraph \"cluster_both\" {") != std::string::npos);
  CHECK(at("label=\"both (pair)\"") != std::string::npos);
  REQUIRE(at("subgraph \"cluster_both__left\" {") != std::string::npos);
  CHECK(at("label=\"left (leaf)\"") != std::string::npos);
  // Nested: the inner clusters open inside the outer one, nodes keep their short ids there.
  CHECK(at("cluster_both\" {") < at("cluster_both__left\" {"));
  CHECK(at("cluster_both__left\" {") < at("cluster_both__right\" {"));
  CHECK(at("|show\\ncore.sink") != std::string::npos);
  // Two edges from numbers, one to each leaf's sink.
  std::size_t edges = 0;
  for (std::size_t p = d.find("n0:o0 ->"); p != std::string::npos; p = d.find("n0:o0 ->", p + 1)) ++edges;
  CHECK(edges == 2);
}

TEST_CASE("embedflow run loads the plugins of node types that only a subgraph file names") {
  if (!plugins().node_type("io.hdf5_writer")) {
    WARN("the io family is not built: the plugin choice for a subgraph file is not checked");
    return;
  }
  const fs::path dir = scratch_dir("subgraph_plugins");
  write_file(dir / "parts" / "save.yaml", cat("inputs: {in: write}\nnodes:\n  write: {type: io.hdf5_writer, params: {path: ",
                                              (dir / "numbers.h5").string(), ", group: numbers}}\n"));
  // The graph's own text names core types alone; io comes in through the subgraph file.
  const Result r = run_graph_file(dir, "g.yaml", R"(subgraphs: {save: parts/save.yaml}
nodes:
  numbers: {type: core.range, params: {count: 4}}
  keep: {type: save}
edges: [numbers -> keep]
)", {"--no-report"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(fs::file_size(dir / "numbers.h5") > 0);
}
