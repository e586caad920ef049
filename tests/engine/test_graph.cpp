// Graph files and validation, in process: every error class, located and all at once.
#include <catch2/catch.hpp>

#include <embedflow/embedflow.hpp>

#include "cli.hpp"
#include "embedflow_engine/graph.hpp"
#include "embedflow_engine/plugin_loader.hpp"

using namespace embedflow;
using namespace embedflow::engine;

namespace {

const Registry& registry() {
  static Registry r;
  static PluginLoader loader({test::plugin_dir(), EMBEDFLOW_TESTING_PLUGIN_DIR});
  static bool loaded = (loader.load_all(r), true);
  (void)loaded;
  return r;
}

std::vector<std::string> problems_of(const std::string& yaml, std::vector<std::string> sets = {}) {
  std::vector<Diagnostic> problems;
  GraphSpec spec = parse_graph_text(yaml, "g.yaml", problems);
  for (const auto& s : sets) apply_override(spec, s, problems);
  // Shape problems do not stop resolution: the user sees every problem in one pass.
  resolve(std::move(spec), registry(), problems);
  std::vector<std::string> text;
  for (const auto& d : problems) text.push_back(d.str());
  return text;
}

}  // namespace

TEST_CASE("a valid graph resolves with schemas on every edge") {
  std::vector<Diagnostic> problems;
  GraphSpec spec = parse_graph_text(R"(# Two lines of
# description.
seed: 3
nodes:
  numbers: {type: core.range, params: {count: 8}}
  batches: {type: core.batch, params: {size: 4, drop_last: true}}
  show: {type: core.sink}
edges:
  - numbers.out -> batches.in
  - batches -> show
)", "g.yaml", problems);
  REQUIRE(problems.empty());
  CHECK(spec.description == "Two lines of\ndescription.");
  ResolvedGraph g = resolve(std::move(spec), registry(), problems);
  REQUIRE(problems.empty());
  CHECK(g.order.size() == 3);
  CHECK(g.nodes[1].output_schemas[0].str() == "index: i64[4], value: f64[4]");
  CHECK(g.nodes[0].seed != g.nodes[1].seed);
}

TEST_CASE("unknown node types suggest the closest name") {
  auto p = problems_of("nodes:\n  a: {type: core.rnage, params: {count: 1}}\n");
  REQUIRE(p.size() == 1);
  CHECK(p[0] == "g.yaml:2:13: node 'a': unknown node type 'core.rnage'; did you mean 'core.range'? (embedflow inspect lists the types)");
}

TEST_CASE("parameter errors are all reported with their positions") {
  auto p = problems_of(R"(nodes:
  a: {type: core.range, params: {count: -1, stat: 2}}
  b: {type: core.sink, params: {mode: 3}}
  c: {type: core.batch}
edges: [a.out -> b.in, a.out -> c.in]
)");
  REQUIRE(p.size() == 4);
  CHECK(p[0] == "g.yaml:2:51: node 'a': unknown parameter 'stat'; did you mean 'start'?");
  CHECK(p[1] == "g.yaml:2:41: node 'a': parameter 'count' = -1 is out of range [0, inf]");
  CHECK(p[2] == "g.yaml:3:39: node 'b': parameter 'mode' expects a string, got integer 3");
  CHECK_THAT(p[3], Catch::StartsWith("g.yaml:4:3: node 'c': missing required parameter 'size'"));
}

TEST_CASE("unknown ports, unconnected inputs and bad edges") {
  auto p = problems_of(R"(nodes:
  a: {type: core.range, params: {count: 1}}
  b: {type: core.limit, params: {count: 1}}
  c: {type: core.sink}
edges:
  - a.output -> b.in
  - a.out -> c.inn
  - a.out -> zz.in
  - a.out => c.in
)");
  REQUIRE(p.size() == 6);
  CHECK_THAT(p[0], Catch::StartsWith("g.yaml:9:5: bad edge 'a.out => c.in'"));
  CHECK(p[1] == "g.yaml:6:5: node 'a': edge 'a.output -> b.in': core.range has no output port 'output'; did you mean 'out'? (outputs: out)");
  CHECK_THAT(p[2], Catch::StartsWith("g.yaml:7:5: node 'c': edge 'a.out -> c.inn': core.sink has no input port 'inn'; did you mean 'in'?"));
  CHECK(p[3] == "g.yaml:8:5: edge 'a.out -> zz.in': no node 'zz'");  // no far-fetched suggestion
  CHECK(p[4] == "g.yaml:3:3: node 'b': input 'in' of core.limit is not connected");
  CHECK(p[5] == "g.yaml:4:3: node 'c': input 'in' of core.sink is not connected");
}

TEST_CASE("an edge that omits the input port goes to the one input that must be connected") {
  // testing.trainer: `in`, and the optional `validation` (as torch.train).
  const std::string trainer = R"(vars: {on: true}
nodes:
  batches: {type: testing.batches, enabled: "${on}", params: {kind: pairs}}
  train: {type: testing.trainer, params: {model: {type: testing.encoder, dim: 8, channels: 1}, loss: {type: testing.pair_loss}}}
edges: [batches -> train]
)";
  const std::vector<std::string> none;
  CHECK(problems_of(trainer) == none);
  // A disabled branch takes the trainer it feeds through the unnamed port with it.
  CHECK(problems_of(trainer, {"on=false"}) == none);
  // Two inputs that must both be connected: the port has to be named.
  auto two = problems_of(R"(nodes:
  left:  {type: testing.vectors, params: {dim: 4}}
  check: {type: testing.pair_check}
edges: [left.out -> check]
)");
  REQUIRE_FALSE(two.empty());
  CHECK_THAT(two[0], Catch::StartsWith("g.yaml:4:9: node 'check': edge 'left.out -> check': name the input port; "
                                       "testing.pair_check has inputs: a, b"));
}

TEST_CASE("a dim mismatch across edges is caught at load") {
  const char* yaml = R"(nodes:
  left:  {type: testing.vectors, params: {dim: 128}}
  right: {type: testing.vectors, params: {dim: 64}}
  check: {type: testing.pair_check}
edges: [left.out -> check.a, right.out -> check.b]
)";
  auto p = problems_of(yaml);
  REQUIRE(p.size() == 1);
  CHECK_THAT(p[0], Catch::StartsWith("g.yaml:5:30: node 'check': edge 'right.out -> check.b': field 'embedding' dim D: is 64 here but 128"));
  CHECK(problems_of(yaml, {"right.dim=128"}).empty());
  auto typed = problems_of(yaml, {"right.dim=wide"});
  REQUIRE(typed.size() == 1);
  CHECK(typed[0] == "--set right.dim=wide: node 'right': parameter 'dim' expects an integer, got string wide");
}

TEST_CASE("dtype mismatches name both sides") {
  auto p = problems_of(R"(nodes:
  a: {type: core.range, params: {count: 1}}
  sel: {type: core.rename, params: {fields: {value: embedding}}}
  check: {type: testing.pair_check}
edges: [a.out -> sel.in, sel.out -> check.a, sel.out -> check.b]
)");
  REQUIRE(p.size() == 2);
  CHECK_THAT(p[0], Catch::Contains("field 'embedding': expects dtype f32, upstream gives f64"));
}

TEST_CASE("cycles are named") {
  auto p = problems_of(R"(nodes:
  src: {type: core.range, params: {count: 1}}
  a: {type: core.limit, params: {count: 1}}
  b: {type: core.limit, params: {count: 1}}
edges: [src.out -> a.in, a.out -> b.in, b.out -> a.in]
)");
  REQUIRE(p.size() == 1);
  CHECK_THAT(p[0], Catch::Contains("the graph has a cycle: a -> b -> a"));
}

TEST_CASE("a cycle with a node downstream of it names exactly the cycle's nodes, with their lines") {
  auto p = problems_of(R"(nodes:
  src: {type: core.range, params: {count: 1}}
  a: {type: core.funnel}
  b: {type: core.limit, params: {count: 1}}
  out: {type: core.sink}
edges:
  - src.out -> a.in
  - a.out -> b.in
  - b.out -> out.in
  - b.out -> a.in
)");
  REQUIRE(p.size() == 1);
  INFO(p[0]);
  // Located at an edge of the cycle; the sink fed by it is not on it.
  CHECK_THAT(p[0], Catch::StartsWith("g.yaml:8:") || Catch::StartsWith("g.yaml:10:"));
  CHECK_THAT(p[0], Catch::Contains("the graph has a cycle: a -> b -> a") ||
                       Catch::Contains("the graph has a cycle: b -> a -> b"));
  CHECK_THAT(p[0], Catch::Contains("a at line 3") && Catch::Contains("b at line 4"));
  CHECK_THAT(p[0], Catch::Contains("'a.out -> b.in' at line 8") && Catch::Contains("'b.out -> a.in' at line 10"));
  CHECK(p[0].find("-> out") == std::string::npos);
  CHECK(p[0].find("out.in") == std::string::npos);
}

TEST_CASE("malformed YAML and bad file shapes") {
  auto p = problems_of("nodes:\n  a: {type: core.range\n  b: 3\n");
  REQUIRE(p.size() == 1);
  CHECK_THAT(p[0], Catch::StartsWith("g.yaml:3:") && Catch::Contains("malformed YAML"));
  p = problems_of("nodez: {}\nseed: -4\n");
  REQUIRE(p.size() == 3);
  CHECK_THAT(p[0], Catch::Contains("unknown top-level key 'nodez'") && Catch::Contains("did you mean 'nodes'?"));
  CHECK_THAT(p[1], Catch::Contains("seed must be a non-negative integer"));
  CHECK_THAT(p[2], Catch::Contains("missing 'nodes'"));
  p = problems_of("nodes:\n  a: {type: core.range, parms: {count: 1}}\n");
  CHECK_THAT(p[0], Catch::Contains("unknown key 'parms'") && Catch::Contains("did you mean 'params'?"));
}

TEST_CASE("overrides reach nested component parameters") {
  const char* yaml = R"(nodes:
  a: {type: core.range, params: {count: 5}}
  agg: {type: core.aggregate, params: {op: core.quantile}}
edges: [a.out -> agg.in]
)";
  auto p = problems_of(yaml);
  REQUIRE(p.size() == 1);
  CHECK_THAT(p[0], Catch::Contains("parameter 'op' (core.quantile): missing required parameter 'q'"));
  CHECK(problems_of(yaml, {"agg.op.q=0.5"}).empty());
  auto bad = problems_of(yaml, {"agg.op.q=1.5"});
  REQUIRE(bad.size() == 1);
  CHECK_THAT(bad[0], Catch::Contains("'q' = 1.5 is out of range [0, 1]"));
  auto no_node = problems_of(yaml, {"ag.count=1"});
  CHECK_THAT(no_node[0], Catch::Contains("no node 'ag' in the graph; did you mean 'a'?"));
}

TEST_CASE("plugins with another ABI are refused naming both versions") {
  Registry r;
  PluginLoader loader({EMBEDFLOW_BAD_PLUGIN_DIR});
  CHECK_THROWS_WITH(loader.load_all(r), Catch::Contains("libembedflow_badabi.so") && Catch::Contains(cat("ABI ", EMBEDFLOW_ABI_VERSION + 41)) &&
                                            Catch::Contains(cat("this engine has ABI ", EMBEDFLOW_ABI_VERSION)));
  CHECK(r.node_types().empty());
}

TEST_CASE("a library that is not a plugin is refused with the reason") {
  Registry r;
  PluginLoader loader({});
  CHECK_THROWS_WITH(loader.load_file("/nonexistent/libembedflow_x.so", r), Catch::Contains("cannot load"));
  CHECK_THROWS_WITH(loader.load_file(test::binary_dir() + "/lib/libembedflow_sdk.so", r),
                    Catch::Contains("no 'embedflow_plugin_descriptor' symbol"));
}

TEST_CASE("YAML merge keys inside params: explicit keys win, earlier merged maps win, bad values are located") {
  std::vector<Diagnostic> problems;
  GraphSpec spec = parse_graph_text(R"(nodes:
  a: {type: core.range, params: &base {count: 3, start: 5.0, step: 2.0}}
  b: {type: core.range, params: {<<: *base, start: 1.0}}
  c: {type: core.range, params: {step: 7.0, <<: [{count: 9, start: 4.0}, *base]}}
  d: {type: core.range, params: {<<: {<<: *base, count: 2}}}
edges: []
)", "g.yaml", problems);
  REQUIRE(problems.empty());
  REQUIRE(spec.nodes.size() == 4);
  const Value& b = spec.nodes[1].params;
  CHECK(b.get("count")->as_integer() == 3);
  CHECK(b.get("start")->as_number() == 1.0);
  CHECK(b.get("step")->as_number() == 2.0);
  CHECK(!b.get("<<"));
  CHECK(b.as_map().size() == 3);  // no key twice
  const Value& c = spec.nodes[2].params;
  CHECK(c.get("step")->as_number() == 7.0);   // explicit, before the merge key
  CHECK(c.get("count")->as_integer() == 9);   // the first merged map wins over *base
  CHECK(c.get("start")->as_number() == 4.0);
  CHECK(c.as_map().size() == 3);
  const Value& d = spec.nodes[3].params;  // a merge inside a merged map
  CHECK(d.get("count")->as_integer() == 2);
  CHECK(d.get("step")->as_number() == 2.0);
  CHECK(d.as_map().size() == 3);

  auto p = problems_of("nodes:\n  a: {type: core.range, params: {count: 3, <<: 5}}\n");
  REQUIRE(!p.empty());
  CHECK(p[0] == "g.yaml:2:48: '<<' (a YAML merge key) takes a map or a list of maps, e.g. <<: *defaults");
}

// Component contracts (testing.* types in testing_plugin.cpp mirror a model, a composite, losses,
// a trainer and an embedder): every mismatch is a located validation error before data flows.
namespace {
const char* kContractGraph = R"(vars: {kind: pairs, channels: 1, model: {type: testing.encoder, dim: 8, channels: 1}, loss: {type: testing.pair_loss}, gallery_dim: 8}
nodes:
  batches: {type: testing.batches, params: {kind: "${kind}", channels: "${channels}"}}
  train:
    type: testing.trainer
    params:
      model: "${model}"
      loss: "${loss}"
  best: {type: core.limit, params: {count: 1}}
  images: {type: testing.batches, params: {kind: labels}}
  embed: {type: testing.embedder}
  gallery: {type: testing.vectors, params: {dim: "${gallery_dim}", batch: 2}}
  score: {type: testing.pair_check}
edges:
  - batches -> train
  - train.model -> best
  - best -> embed.model
  - images -> embed.in
  - embed -> score.a
  - gallery -> score.b
)";

std::string joined(const std::vector<std::string>& p) {
  std::string s;
  for (const auto& m : p) s += m + "\n";
  return s;
}
}  // namespace

TEST_CASE("component contracts: a model's embedding size travels through snapshots to its consumers") {
  std::vector<Diagnostic> problems;
  ResolvedGraph g = resolve(parse_graph_text(kContractGraph, "g.yaml", problems), registry(), problems);
  REQUIRE(joined([&] { std::vector<std::string> t; for (auto& d : problems) t.push_back(d.str()); return t; }()) == "");
  const ResolvedNode* embed = nullptr;
  const ResolvedNode* best = nullptr;
  for (const auto& n : g.nodes) {
    if (n.id() == "embed") embed = &n;
    if (n.id() == "best") best = &n;
  }
  REQUIRE(embed);
  REQUIRE(best);
  // core.limit forwards what the snapshots carry; the embedder's D comes from it.
  REQUIRE(best->output_schemas[0].carried("model"));
  CHECK(best->output_schemas[0].carried("model")->str() == "embedding: f32[N,8]");
  CHECK(embed->output_schemas[0].str() == "embedding: f32[B,8]");
}

TEST_CASE("component contracts: a downstream size mismatch is found at validation") {
  auto p = problems_of(kContractGraph, {"gallery_dim=784"});
  REQUIRE(p.size() == 1);
  CHECK_THAT(p[0], Catch::StartsWith("g.yaml:20:") && Catch::Contains("node 'score'") &&
                       Catch::Contains("dim D: is 784 here but 8"));
  // A composite derives its size from its parts: 8 + 24.
  p = problems_of(kContractGraph, {"model={type: testing.stack, a: {type: testing.encoder, dim: 8}, "
                                   "b: {type: testing.encoder, dim: 24}}", "gallery_dim=32"});
  CHECK(p.empty());
  p = problems_of(kContractGraph, {"model={type: testing.stack, a: {type: testing.encoder, dim: 8}, "
                                   "b: {type: testing.encoder, dim: 24}}"});
  REQUIRE(p.size() == 1);
  CHECK_THAT(p[0], Catch::Contains("is 8 here but 32"));
}

TEST_CASE("component contracts: input channels and consumed fields are checked at the parameter") {
  // The encoder takes 3 channels; the batches have 1. Located at the override, and at the model
  // parameter where the variable is used.
  auto p = problems_of(kContractGraph, {"model={type: testing.encoder, dim: 8, channels: 3}"});
  REQUIRE(p.size() == 1);
  CHECK_THAT(p[0], Catch::StartsWith("--set model={type: testing.encoder, dim: 8, channels: 3}: ") &&
                       Catch::Contains("node 'train': param 'model': testing.encoder reads in: "
                                       "field 'image' dim 1: expects 3, upstream gives 1") &&
                       Catch::EndsWith("(${model} at g.yaml:7:14)"));
  // A label loss fed pair batches: neither label nor pair_labels, and no image.
  p = problems_of(kContractGraph, {"loss={type: testing.label_loss}"});
  std::string all = joined(p);
  CHECK_THAT(all, Catch::Contains("param 'loss': testing.label_loss reads batch: needs field 'image'"));
  CHECK_THAT(all, Catch::Contains("needs one of {label, pair_labels} but it has {a_image, b_image, pair_label}"));
  // The same loss on label batches is fine; the pair loss on them is not.
  CHECK(problems_of(kContractGraph, {"loss={type: testing.label_loss}", "kind=labels"}).empty());
  p = problems_of(kContractGraph, {"kind=labels"});
  CHECK_THAT(joined(p), Catch::Contains("testing.pair_loss reads batch: needs field 'a_image'"));
  // Nested parts report with their path.
  p = problems_of(kContractGraph, {"model={type: testing.stack, a: {type: testing.encoder, channels: 2}, "
                                   "b: {type: testing.encoder}}", "gallery_dim=16"});
  REQUIRE(p.size() == 1);
  CHECK_THAT(p[0], Catch::Contains("param 'model': testing.stack param 'a' (testing.encoder) reads in: field 'image' dim 1: "
                                   "expects 2, upstream gives 1"));
}

TEST_CASE("component contracts are declared once and shown by inspect") {
  const ComponentType* t = registry().component_type("testing.label_loss");
  REQUIRE(t);
  REQUIRE(t->contract.size() == 3);
  CHECK(t->contract[1].kind == ContractSpec::Kind::one_of);
  CHECK(t->contract[1].schemas.size() == 2);
  CHECK_THROWS_WITH(ComponentTypeBuilder("x.y", "loss").consumes_one_of("batch", "label: i64[N]"),
                    Catch::Contains("two or more alternatives"));
  CHECK_THROWS_WITH(ComponentTypeBuilder("x.y", "loss").consumes("batch", "label: i64[N"), Catch::Contains("label"));
}

TEST_CASE("hostile YAML in graph files and --set values is a located problem") {
  auto p = problems_of("vars: {loop: &L {x: *L}}\nnodes:\n  a: {type: core.range, params: {count: 1}}\n");
  REQUIRE(!p.empty());
  CHECK_THAT(p[0], Catch::StartsWith("g.yaml:1:") && Catch::Contains("nested deeper than 256"));
  p = problems_of("nodes:\n  a: {type: core.range, params: {count: 1}}\n", {"a.count=&a [*a]"});
  REQUIRE(!p.empty());
  CHECK_THAT(p[0], Catch::StartsWith("--set a.count=&a [*a]: value is not valid YAML") && Catch::Contains("nested deeper"));
  p = problems_of("nodes:\n  a: {type: core.range, params: {count: 1}}\n---\nnodes: {}\n");
  REQUIRE(p.size() == 1);
  CHECK_THAT(p[0], Catch::StartsWith("g.yaml:4:1: a second YAML document"));
}

TEST_CASE("repeated keys and self-edges are located problems, not silent choices") {
  auto p = problems_of("nodes:\n  a: {type: core.range, params: {count: 3, count: 5}}\n");
  REQUIRE(p.size() == 1);
  CHECK(p[0] == "g.yaml:2:44: key 'count' is given twice (first at line 2)");
  p = problems_of("nodes:\n  a: {type: core.range, params: {count: 3}}\nnodes:\n  b: {type: core.range, params: {count: 3}}\n");
  REQUIRE(!p.empty());
  CHECK_THAT(p[0], Catch::StartsWith("g.yaml:3:1: key 'nodes' is given twice (first at line 1)"));
  p = problems_of("nodes:\n  a: {type: core.limit, type: core.sink, params: {count: 3}}\n");
  REQUIRE(!p.empty());
  CHECK_THAT(p[0], Catch::StartsWith("g.yaml:2:25: node 'a': key 'type' is given twice"));
  p = problems_of("nodes:\n  n: {type: core.range, params: {count: 3}}\n  a: {type: core.limit, params: {count: 3}}\n"
                  "edges:\n  - n -> a\n  - a -> a\n");
  REQUIRE(p.size() == 1);
  CHECK(p[0] == "g.yaml:6:5: node 'a': edge 'a -> a' connects the node to itself");
}

TEST_CASE("graph size is bounded: too many nodes or edges is one located problem") {
  std::string many = "nodes:\n";
  for (std::size_t i = 0; i <= kMaxGraphNodes; ++i) many += "  n" + std::to_string(i) + ": {type: core.range}\n";
  auto p = problems_of(many);
  REQUIRE(p.size() == 1);
  CHECK(p[0] == "g.yaml:2:3: the graph has 10001 nodes; at most 10000 are allowed");
  std::string edges = "nodes:\n  n: {type: core.range}\n  s: {type: core.sink}\nedges: [";
  for (std::size_t i = 0; i <= kMaxGraphEdges; ++i) edges += i ? ", n -> s" : "n -> s";
  edges += "]\n";
  p = problems_of(edges);
  REQUIRE(!p.empty());
  CHECK_THAT(p[0], Catch::StartsWith("g.yaml:4:8: the graph has 100001 edges; at most 100000 are allowed"));
}

TEST_CASE("variables refer to other variables, an override follows through, and a cycle is located") {
  const std::string yaml = R"(vars: {out: out/a, n: 4, dir: "${out}/numbers", file: "${dir}/n-${n}.txt", count: "${n}"}
nodes:
  numbers: {type: core.range, params: {count: "${count}"}}
  save:    {type: testing.progress, params: {total: "${n}"}}
edges:
  - numbers.out -> save.in
)";
  auto resolved = [&](std::vector<std::string> sets) {
    std::vector<Diagnostic> problems;
    GraphSpec spec = parse_graph_text(yaml, "g.yaml", problems);
    for (const auto& s : sets) apply_override(spec, s, problems);
    ResolvedGraph g = resolve(std::move(spec), registry(), problems);
    REQUIRE(problems.empty());
    std::map<std::string, std::string> vars;
    for (const auto& [k, v] : g.spec.vars) vars[k] = v.is_string() ? v.as_string() : v.str();
    return std::make_pair(vars, g.nodes[0].params.integer("count"));
  };
  auto [vars, count] = resolved({});
  CHECK(vars["file"] == "out/a/numbers/n-4.txt");
  CHECK(count == 4);  // a whole-value reference keeps the number's type through two variables
  auto [moved, count2] = resolved({"out=elsewhere", "n=6"});
  CHECK(moved["dir"] == "elsewhere/numbers");
  CHECK(moved["file"] == "elsewhere/numbers/n-6.txt");
  CHECK(count2 == 6);

  auto p = problems_of(R"(vars: {a: "${b}/x", b: "${c}", c: "${a}"}
nodes:
  numbers: {type: core.range, params: {count: 1}}
)");
  REQUIRE(p.size() == 1);
  CHECK_THAT(p[0], Catch::Contains("g.yaml:1:") && Catch::Contains("variables refer to each other in a cycle: a -> b -> c -> a"));

  // A chain of 200 variables each naming the next: a located problem at a bounded depth.
  std::string chain = "vars: {";
  for (int i = 0; i < 200; ++i) chain += "v" + std::to_string(i) + ": \"${v" + std::to_string(i + 1) + "}\", ";
  chain += "v200: 1}\nnodes:\n  numbers: {type: core.range, params: {count: \"${v0}\"}}\n";
  p = problems_of(chain);
  REQUIRE(!p.empty());
  CHECK_THAT(p[0], Catch::Contains("is reached through more than 64 variables referring to one another"));
}

TEST_CASE("a graph whose variables repeat a long string through aliases is a located error, not a gigabyte") {
  // 10 KB of text, four levels of ten aliases: about 11 KB of graph that would expand to 100 MB.
  std::string yaml = "vars:\n  s: &s \"" + std::string(10000, 'x') + "\"\n";
  std::string prev = "s";
  for (int level = 1; level <= 4; ++level) {
    const std::string name = "l" + std::to_string(level);
    yaml += "  " + name + ": &" + name + " [";
    for (int i = 0; i < 10; ++i) yaml += (i ? ", *" : "*") + prev;
    yaml += "]\n";
    prev = name;
  }
  yaml += "nodes:\n  a: {type: core.range, params: {count: 1}}\n  s: {type: core.sink}\nedges: [a -> s]\n";
  REQUIRE(yaml.size() < 12000);
  auto p = problems_of(yaml);
  REQUIRE(p.size() == 1);
  CHECK_THAT(p[0], Catch::StartsWith("g.yaml:") && Catch::Contains("expands to more than 16777216 bytes") &&
                       Catch::Contains("kMaxYamlBytes"));
}

TEST_CASE("variables naming variables twice, thirty deep, are a located error, not a gigabyte") {
  // Found by fuzzing: each variable twice the one before, so 32 bytes at the bottom would be
  // 32 GB at the top. Substitution stops past 1 MiB with one problem at the variable.
  std::string yaml = "vars:\n  v0: \"" + std::string(32, 'x') + "\"\n";
  for (int i = 1; i <= 30; ++i)
    yaml += "  v" + std::to_string(i) + ": \"${v" + std::to_string(i - 1) + "}${v" + std::to_string(i - 1) + "}\"\n";
  yaml += "nodes:\n  a: {type: core.range, params: {count: 1}}\n  s: {type: core.sink, params: {mode: \"${v30}\"}}\n"
          "edges: [a -> s]\n";
  auto p = problems_of(yaml);
  REQUIRE(p.size() == 1);
  // v15 is the first to pass 1 MiB (32 x 2^15 bytes), on line 17.
  CHECK_THAT(p[0], Catch::StartsWith("g.yaml:17:") && Catch::Contains("variables expand to more than 1048576 bytes"));

  // The same with lists: each variable a list naming the one before twice. Found by the fuzzer
  // too: 2^24 small values took 790 MB. Past 10,000 values it stops.
  yaml = "vars:\n  v0: 1\n";
  for (int i = 1; i <= 24; ++i)
    yaml += "  v" + std::to_string(i) + ": [\"${v" + std::to_string(i - 1) + "}\", \"${v" + std::to_string(i - 1) + "}\"]\n";
  yaml += "nodes:\n  a: {type: core.range, params: {count: 1}}\n  s: {type: core.sink, params: {mode: \"${v24}\"}}\n"
          "edges: [a -> s]\n";
  p = problems_of(yaml);
  REQUIRE(p.size() == 1);
  CHECK_THAT(p[0], Catch::StartsWith("g.yaml:") && Catch::Contains("or 10000 values"));
}

TEST_CASE("a graph file holding bytes that are not UTF-8 is refused at their line, before the YAML parser sees them") {
  // Found by fuzzing: a 354-byte graph whose flow map held a run of 0xa0 bytes kept yaml-cpp
  // busy for a minute and gigabytes. Invalid UTF-8 is located instead, at once.
  std::string yaml = "nodes:\n  numbers: {type: core.range, params: {count: 3, start: 1.0}}\n  show: {type: core.sink, params: {mode: p";
  yaml += std::string(40, '\xa0');
  yaml += "rint}}\nedges: [numbers.out -> show.in]\n";
  const auto p = problems_of(yaml);
  REQUIRE(p.size() == 1);
  CHECK(p[0] == "g.yaml:3:43: invalid UTF-8 (byte 0xa0) (a graph file is UTF-8 text)");
  // A NUL byte (a binary file, or UTF-16 text) likewise, on its line.
  const auto nul = problems_of(std::string("nodes:\n  a: {type: core.range}\n\0", 32));
  REQUIRE(nul.size() == 1);
  CHECK_THAT(nul[0], Catch::StartsWith("g.yaml:3:1: NUL byte"));
}

TEST_CASE("a problem with an overridden variable names the override as well as the graph line") {
  const std::string yaml = R"(vars: {n: 4, count: "${n}"}
nodes:
  numbers: {type: core.range, params: {count: "${count}"}}
  save:    {type: testing.progress, params: {total: "${n}"}}
edges:
  - numbers.out -> save.in
)";
  auto p = problems_of(yaml, {"n=abc"});
  REQUIRE(p.size() == 2);
  // Through a variable made from the overridden one, and directly.
  CHECK_THAT(p[0], Catch::StartsWith("--set n=abc: node 'numbers': parameter 'count' expects an integer, got string abc") &&
                       Catch::EndsWith("(${count} at g.yaml:3:47)"));
  CHECK_THAT(p[1], Catch::StartsWith("--set n=abc: node 'save': parameter 'total' expects an integer") &&
                       Catch::EndsWith("(${n} at g.yaml:4:53)"));
  // The same value written in the file is located at the file alone.
  auto written = problems_of(R"(vars: {n: abc}
nodes:
  numbers: {type: core.range, params: {count: "${n}"}}
)");
  REQUIRE(written.size() == 1);
  CHECK_THAT(written[0], Catch::StartsWith("g.yaml:3:") && !Catch::Contains("--set"));
  // A problem elsewhere in a node that uses an override is located at the file alone.
  auto other = problems_of(R"(vars: {n: 4}
nodes:
  numbers: {type: core.range, params: {count: -1, step: "${n}"}}
)", {"n=3"});
  REQUIRE(other.size() == 1);
  CHECK_THAT(other[0], Catch::StartsWith("g.yaml:3:") && !Catch::Contains("--set"));
}
