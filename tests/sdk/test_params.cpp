#include <catch2/catch.hpp>

#include <embedflow/embedflow.hpp>

using namespace embedflow;

namespace {

Value yaml_map(std::vector<std::pair<std::string, Value>> entries) {
  Value::Map m;
  int line = 1;
  for (auto& [k, v] : entries) {
    v.at(SourceLocation{"g.yaml", line++, 5});
    m.emplace_back(k, v);
  }
  return Value::map(std::move(m));
}

const std::vector<ParamSpec> kSpecs = {
    Param::integer("batch_size").default_value(32).min(1).doc("records per batch"),
    Param::number("lr").min(0.0),
    Param::choice("mode", {"count", "print"}).default_value("count"),
    Param::integers("ks").default_value(std::vector<std::int64_t>{1, 5}).min(1),
    Param::string("name").optional(),
    Param::boolean("flag").default_value(false),
};

struct QuantileLike : Component {
  explicit QuantileLike(const ComponentContext& c) : q(c.params().number("q")) {}
  double q;
};

}  // namespace

TEST_CASE("scalars read from YAML text get YAML's kinds") {
  CHECK(Value::from_scalar_text("3", false).is_integer());
  CHECK(Value::from_scalar_text("-0.5", false).kind() == Value::Kind::number);
  CHECK(Value::from_scalar_text("1e-3", false).as_number() == Approx(0.001));
  CHECK(Value::from_scalar_text("true", false).as_boolean());
  CHECK(Value::from_scalar_text("3", true).is_string());
  CHECK(Value::from_scalar_text("abc", false).as_string() == "abc");
  CHECK(Value::from_scalar_text("~", false).is_null());
  CHECK(Value::number(2).str() == "2.0");
  CHECK(Value::from_scalar_text(Value::number(0.1).str(), false).as_number() == 0.1);
}

TEST_CASE("valid parameters get defaults and normalised types") {
  Params out;
  std::vector<Diagnostic> problems;
  validate_params(kSpecs, yaml_map({{"lr", Value::integer(1)}, {"ks", Value::integer(3)}}), nullptr, out, problems, "n");
  REQUIRE(problems.empty());
  CHECK(out.integer("batch_size") == 32);
  CHECK(out.value("lr").kind() == Value::Kind::number);  // an integer given for a float widens
  CHECK(out.integers("ks") == std::vector<std::int64_t>{3});  // a lone scalar is a one-element list
  CHECK(out.string("mode") == "count");
  CHECK_FALSE(out.has("name"));
}

TEST_CASE("every parameter problem is reported with its location") {
  Params out;
  std::vector<Diagnostic> problems;
  validate_params(kSpecs,
                  yaml_map({{"batch_sise", Value::integer(3)},
                            {"batch_size", Value::integer(0)},
                            {"mode", Value::string("prnt")},
                            {"ks", Value::list({Value::integer(2), Value::string("x")})},
                            {"flag", Value::string("yes")}}),
                  nullptr, out, problems, "train");
  std::vector<std::string> text;
  for (const auto& d : problems) text.push_back(d.str());
  REQUIRE(text.size() == 6);
  CHECK_THAT(text[0], Catch::StartsWith("g.yaml:1:5: node 'train': unknown parameter 'batch_sise'; did you mean 'batch_size'?"));
  CHECK_THAT(text[1], Catch::Contains("g.yaml:2:5") && Catch::Contains("'batch_size' = 0 is out of range [1, inf]"));
  CHECK_THAT(text[2], Catch::Contains("missing required parameter 'lr'"));
  CHECK_THAT(text[3], Catch::Contains("not one of {count, print}; did you mean 'print'?"));
  CHECK_THAT(text[4], Catch::Contains("'ks' expects an integer, got string x"));
  CHECK_THAT(text[5], Catch::Contains("'flag' expects a boolean"));
}

TEST_CASE("component parameters are validated through the registry") {
  Registry registry;
  registry.add(ComponentTypeBuilder("t.quantile", "aggregate").param(Param::number("q").range(0.0, 1.0)).create<QuantileLike>());
  registry.add(ComponentTypeBuilder("t.adam", "optimizer").create<QuantileLike>());
  std::vector<ParamSpec> specs = {Param::component("op", "aggregate")};

  Params out;
  std::vector<Diagnostic> problems;
  validate_params(specs, yaml_map({{"op", Value::map({{"type", Value::string("t.quantile")}, {"q", Value::number(0.25)}})}}),
                  &registry, out, problems, "n");
  REQUIRE(problems.empty());
  auto c = registry.instantiate(out.value("op"), 1, "n");
  REQUIRE(dynamic_cast<QuantileLike*>(c.get()));
  CHECK(dynamic_cast<QuantileLike*>(c.get())->q == 0.25);

  problems.clear();
  validate_params(specs, yaml_map({{"op", Value::map({{"type", Value::string("t.quantile")}, {"q", Value::number(2)}})}}),
                  &registry, out, problems, "n");
  REQUIRE(problems.size() == 1);
  CHECK_THAT(problems[0].message, Catch::Contains("(t.quantile)") && Catch::Contains("'q' = 2.0 is out of range"));

  problems.clear();
  validate_params(specs, yaml_map({{"op", Value::string("t.adam")}}), &registry, out, problems, "n");
  REQUIRE(problems.size() == 1);
  CHECK_THAT(problems[0].message, Catch::Contains("is a optimizer, not a aggregate") || Catch::Contains("not a aggregate"));

  problems.clear();
  validate_params(specs, yaml_map({{"op", Value::string("t.quantil")}}), &registry, out, problems, "n");
  REQUIRE(problems.size() == 1);
  CHECK_THAT(problems[0].message, Catch::Contains("unknown component type 't.quantil'; did you mean 't.quantile'?"));
}

TEST_CASE("the registry refuses duplicate and inconsistent declarations") {
  struct Nop : Node {};
  Registry r;
  r.set_current_plugin("one", "/p/libone.so", "1");
  r.add(NodeTypeBuilder("x.nop").input("in", "*").create<Nop>());
  r.set_current_plugin("two", "/p/libtwo.so", "1");
  CHECK_THROWS_WITH(r.add(NodeTypeBuilder("x.nop").create<Nop>()), Catch::Contains("already registered by plugin 'one'"));
  CHECK_THROWS_WITH(r.add(NodeTypeBuilder("nodot").create<Nop>()), Catch::Contains("family.name"));
  CHECK_THROWS_WITH(r.add(NodeTypeBuilder("x.bad").param(Param::integer("k").default_value(0).min(1)).create<Nop>()),
                    Catch::Contains("outside its range"));
  CHECK_THROWS_WITH(r.add(NodeTypeBuilder("x.twice").input("in", "*").input("in", "*").create<Nop>()),
                    Catch::Contains("declared twice"));
  CHECK(r.node_type("x.nop")->plugin == "one");
}

TEST_CASE("closest_match suggests near names only") {
  CHECK(closest_match("core.rnage", {"core.range", "core.limit"}) == "core.range");
  CHECK(closest_match("batch", {"core.batch", "core.sink"}) == "core.batch");
  CHECK(closest_match("zzzzzz", {"core.range"}).empty());
}
