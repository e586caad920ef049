// The SDK's one YAML -> Value conversion: locations, merge keys, and the limits that turn
// hostile documents (self-referencing aliases, alias bombs, a second document) into errors.
#include <catch2/catch.hpp>

#include <embedflow/embedflow.hpp>
#include <embedflow/yaml.hpp>

#include <fstream>
#include <iterator>

using namespace embedflow;

TEST_CASE("YAML text becomes a located Value with merge keys resolved") {
  Value v = parse_yaml("base: &b {lr: 0.1, epochs: 2}\nrun:\n  <<: *b\n  epochs: 5\nname: '007'\n", "spec.yaml");
  REQUIRE(v.is_map());
  const Value* run = v.get("run");
  REQUIRE(run);
  CHECK(run->get("epochs")->as_integer() == 5);  // explicit keys win over merged ones
  CHECK(run->get("lr")->as_number() == 0.1);
  CHECK(v.get("name")->is_string());  // quoted: stays a string
  CHECK(v.get("name")->as_string() == "007");
  CHECK(run->get("epochs")->where().str() == "spec.yaml:4:11");
}

TEST_CASE("hostile YAML is an error with a location, not a crash") {
  // An alias that refers to itself is infinitely deep.
  CHECK_THROWS_WITH(parse_yaml("loop: &L {x: *L}\n", "g.yaml"),
                    Catch::StartsWith("g.yaml:") && Catch::Contains("nested deeper than 256"));
  CHECK_THROWS_WITH(parse_yaml("&a [*a]", "v"), Catch::Contains("nested deeper"));
  // "Billion laughs": nine levels of nine aliases is 9^9 values.
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n";
  std::string prev = "a";
  for (char level = 'b'; level <= 'i'; ++level) {
    std::string name(1, level);
    bomb += name + ": &" + name + " [";
    for (int i = 0; i < 9; ++i) bomb += (i ? ", *" : "*") + prev;
    bomb += "]\n";
    prev = name;
  }
  CHECK_THROWS_WITH(parse_yaml(bomb, "bomb.yaml"), Catch::Contains("expands to more than 100000 values"));
  CHECK_THROWS_WITH(parse_yaml("a: 1\n---\nb: 2\n", "two.yaml"),
                    Catch::StartsWith("two.yaml:3:1:") && Catch::Contains("a second YAML document"));
  CHECK_THROWS_WITH(parse_yaml("a: [1, 2\n", "bad.yaml"), Catch::StartsWith("bad.yaml:") && Catch::Contains("malformed YAML"));
  CHECK_THROWS_WITH(parse_yaml("a: {<<: 3}\n", "m.yaml"), Catch::Contains("merge key"));
  // Text on which yaml-cpp's LoadAll makes empty documents without end until memory runs out (a
  // fuzzer's find, fuzz/corpus/graph_file/regression-endless-documents.yaml): two are counted.
  std::ifstream in(std::string(EMBEDFLOW_SOURCE_DIR) + "/fuzz/corpus/graph_file/regression-endless-documents.yaml");
  const std::string endless{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  REQUIRE(!endless.empty());
  CHECK_THROWS_WITH(parse_yaml(endless, "endless.yaml"), Catch::StartsWith("endless.yaml:3:2:") &&
                                                             Catch::Contains("a second YAML document"));
  CHECK(parse_yaml("# a comment alone\n", "c.yaml").is_null());
}

TEST_CASE("a depth just inside the limit converts") {
  std::string deep;
  for (int i = 0; i < 200; ++i) deep += "[";
  deep += "1";
  for (int i = 0; i < 200; ++i) deep += "]";
  Value v = parse_yaml(deep, "deep.yaml");
  int depth = 0;
  const Value* cur = &v;
  while (cur->is_list()) {
    cur = &cur->as_list().front();
    ++depth;
  }
  CHECK(depth == 200);
  CHECK(cur->as_integer() == 1);
}

namespace {
// 10 KB of text repeated through four levels of ten aliases: 10^4 copies, 100 MB expanded, from
// about 11 KB of YAML and 11,111 values (well inside the value limit).
std::string string_bomb(const std::string& indent) {
  std::string y = indent + "s: &s \"" + std::string(10000, 'x') + "\"\n";
  std::string prev = "s";
  for (int level = 1; level <= 4; ++level) {
    const std::string name = "l" + std::to_string(level);
    y += indent + name + ": &" + name + " [";
    for (int i = 0; i < 10; ++i) y += (i ? ", *" : "*") + prev;
    y += "]\n";
    prev = name;
  }
  return y;
}
}  // namespace

TEST_CASE("YAML expansion is counted in bytes: a long string repeated through aliases is an error") {
  const std::string bomb = string_bomb("");
  REQUIRE(bomb.size() < 12000);
  CHECK_THROWS_WITH(parse_yaml(bomb, "strings.yaml"),
                    Catch::StartsWith("strings.yaml:") && Catch::Contains("expands to more than 16777216 bytes") &&
                        Catch::Contains("kMaxYamlBytes"));
  // The same text repeated a few times stays well inside the budget.
  Value ok = parse_yaml("s: &s \"" + std::string(10000, 'x') + "\"\nl: [*s, *s, *s]\n", "ok.yaml");
  CHECK(ok.get("l")->as_list().size() == 3);
}
