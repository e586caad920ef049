// Every node type's example (NodeType::example, shown by `embedflow inspect TYPE`), checked for
// every family this build has, so no example has to be pasted into a test by hand:
//  - a whole graph (`nodes:` and `edges:`) runs as pasted, in process (GraphRunner);
//  - a single node (`id: {type: ..., params: {...}}`), or each node of the type in a `nodes:`
//    fragment without edges, validates: a node without required inputs must resolve on its own
//    as a one-node graph; a node with required inputs gets its parameters validated and its check
//    hook run with those inputs connected and `any` arriving (NodeRunner).
// Examples use paths relative to the source tree (tests/...), as a user pastes them from there,
// and write under out/: they run in a scratch directory holding a link to the source's tests/.
// Families whose plugin is not built, and examples that need one, are named in the output (WARN)
// and skipped. A node type without an example fails the test, which names them all. Component
// types have no example to check.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <map>
#include <set>

#include <embedflow/yaml.hpp>

#include "harness.hpp"

using namespace embedflow;
using namespace embedflow::test;
namespace fs = std::filesystem;

namespace {

class ScopedCwd {
 public:
  explicit ScopedCwd(const fs::path& dir) : old_(fs::current_path()) { fs::current_path(dir); }
  ~ScopedCwd() { fs::current_path(old_); }

 private:
  fs::path old_;
};

// The node specs of type `type` in an example: its one node, or its `nodes:` map's.
std::vector<std::pair<std::string, Value>> nodes_of_type(const Value& example, const std::string& type) {
  std::vector<std::pair<std::string, Value>> found;
  const Value* nodes = example.get("nodes");
  for (const auto& [id, spec] : (nodes ? *nodes : example).as_map()) {
    const Value* t = spec.get("type");
    if (t && t->is_string() && t->as_string() == type) found.emplace_back(id, spec);
  }
  return found;
}

// Node types an example uses that no loaded plugin provides.
std::vector<std::string> missing_types(const Registry& registry, const Value& example) {
  std::vector<std::string> missing;
  const Value* nodes = example.get("nodes");
  for (const auto& [id, spec] : (nodes ? *nodes : example).as_map()) {
    const Value* t = spec.get("type");
    if (t && t->is_string() && !registry.node_type(t->as_string())) missing.push_back(t->as_string());
  }
  return missing;
}

void check_node(const Registry& registry, const NodeType& type, const std::string& id, const Value& spec) {
  INFO("node '" << id << "': " << spec.str());
  bool needs_input = false;
  for (const auto& port : type.inputs) needs_input = needs_input || !port.optional;
  if (!needs_input) {
    GraphRun r = GraphRunner(registry, "nodes:\n  " + id + ": " + spec.str() + "\n", type.name + " example").validate();
    CHECK(r.problem_text() == "");
    return;
  }
  NodeRunner::Options options;
  options.id = id;
  for (const auto& port : type.inputs)
    if (!port.optional) options.with_input(port.name, "*");
  const Value* params = spec.get("params");
  NodeRunner node(registry, type.name, params ? *params : Value(), options);
  CHECK(node.problem_text() == "");
}

}  // namespace

TEST_CASE("every node type's example validates, and whole-graph examples run as pasted") {
  const Registry& registry = plugins();
  const fs::path work = scratch_dir("examples");
  fs::create_directory_symlink(fs::path(source_dir()) / "tests", work / "tests");
  ScopedCwd cwd(work);

  std::set<std::string> loaded;
  for (const NodeType* t : registry.node_types()) loaded.insert(t->plugin);
  for (const auto& entry : fs::directory_iterator(fs::path(source_dir()) / "plugins"))
    if (fs::exists(entry.path() / "CMakeLists.txt") && !loaded.count(entry.path().filename().string()))
      WARN("the " << entry.path().filename().string() << " family is not built: its examples are not checked");

  // io.hdf5_reader's example reads the file io.hdf5_writer's example writes (the reader's leading
  // comment says so): run the writer's example first, fed by core.range.
  const NodeType* writer = registry.node_type("io.hdf5_writer");
  if (writer && registry.node_type("io.hdf5_reader") && !writer->example.empty()) {
    const Value example = parse_yaml(writer->example, "io.hdf5_writer example");
    const auto& [id, spec] = example.as_map().front();
    GraphRun made = GraphRunner(registry, "nodes:\n  numbers: {type: core.range, params: {count: 100}}\n  " + id + ": " +
                                              spec.str() + "\nedges: [numbers.out -> " + id + ".in]\n")
                        .run();
    INFO(made.message());
    REQUIRE(made.exit_code == 0);
  }

  std::vector<std::string> without_example;
  std::map<std::string, int> checked;  // per family
  for (const NodeType* type : registry.node_types()) {
    if (type->example.empty()) {
      without_example.push_back(type->name);
      continue;
    }
    INFO(type->name << " example:\n" << type->example);
    Value example;
    REQUIRE_NOTHROW(example = parse_yaml(type->example, type->name + " example"));
    REQUIRE(example.is_map());
    const auto missing = missing_types(registry, example);
    if (!missing.empty()) {
      WARN(type->name << "'s example needs " << missing.front() << ", whose plugin is not built: skipped");
      continue;
    }
    const auto nodes = nodes_of_type(example, type->name);
    CHECK(!nodes.empty());  // the example shows its own type
    if (example.get("nodes") && example.get("edges")) {
      GraphRun r = GraphRunner(registry, type->example, type->name + " example").run();
      INFO(r.message());
      CHECK(r.exit_code == 0);
    } else {
      for (const auto& [id, spec] : nodes) check_node(registry, *type, id, spec);
    }
    ++checked[type->plugin];
  }
  std::string names;
  for (const auto& n : without_example) names += (names.empty() ? "" : ", ") + n;
  if (!names.empty()) FAIL_CHECK(without_example.size() << " node types have no example: " << names);
  for (const auto& family : loaded) {
    INFO("family " << family);
    CHECK(checked[family] > 0);
  }
}
