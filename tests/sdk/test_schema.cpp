#include <catch2/catch.hpp>

#include <embedflow/embedflow.hpp>

using namespace embedflow;

TEST_CASE("schemas parse fields, dtypes and symbolic dims") {
  PortSchema s = PortSchema::parse("image: f32[B,1,28,28], label: i64[B], embedding: f32[B,$dim], meta: any, rest: u8[N,...]");
  REQUIRE(s.fields().size() == 5);
  CHECK(s.str() == "image: f32[B,1,28,28], label: i64[B], embedding: f32[B,$dim], meta: any, rest: u8[N,...]");
  CHECK(s.find("image")->shape->at(1).value == 1);
  CHECK(s.find("embedding")->shape->at(1).kind == Dim::Kind::param);
  CHECK_FALSE(s.find("meta")->dtype.has_value());
  CHECK(PortSchema::parse("*").is_any());
  CHECK_THROWS_WITH(PortSchema::parse("x: f16[2]"), Catch::Contains("unknown dtype 'f16'"));
  CHECK_THROWS_WITH(PortSchema::parse("x: f32[2,#]"), Catch::Contains("bad dimension"));
  CHECK_THROWS_WITH(PortSchema::parse("x: f32[...,2]"), Catch::Contains("last dim"));
}

TEST_CASE("unification binds symbols and reports mismatches") {
  PortSchema required = PortSchema::parse("anchor: f32[B,D], positive: f32[B,D]");
  DimBindings bindings;
  std::vector<std::string> problems;

  CHECK(unify(PortSchema::parse("anchor: f32[B,128], positive: f32[B,128], id: i64[B]"), required, bindings, problems));
  CHECK(bindings.at("D") == 128);

  bindings.clear();
  CHECK_FALSE(unify(PortSchema::parse("anchor: f32[B,128], positive: f32[B,64]"), required, bindings, problems));
  REQUIRE(problems.size() == 1);
  CHECK_THAT(problems[0], Catch::Contains("dim D") && Catch::Contains("64") && Catch::Contains("128"));

  problems.clear();
  bindings.clear();
  CHECK_FALSE(unify(PortSchema::parse("anchor: u8[B,128], positive: f32[B,128]"), required, bindings, problems));
  CHECK_THAT(problems[0], Catch::Contains("dtype f32") && Catch::Contains("u8"));

  problems.clear();
  CHECK_FALSE(unify(PortSchema::parse("anchor: f32[B,128]"), required, bindings, problems));
  CHECK_THAT(problems[0], Catch::Contains("needs field 'positive'"));

  problems.clear();
  CHECK_FALSE(unify(PortSchema::parse("image: f32[B,3,32,32]"), PortSchema::parse("image: f32[B,1,28,28]"), bindings, problems));
  CHECK(problems.size() == 3);  // channel, height and width

  problems.clear();
  CHECK_FALSE(unify(PortSchema::parse("image: f32[B,28]"), PortSchema::parse("image: f32[B,28,28]"), bindings, problems));
  CHECK_THAT(problems[0], Catch::Contains("rank"));

  // Unknown producers and "..." never fail.
  problems.clear();
  CHECK(unify(PortSchema::any(), required, bindings, problems));
  CHECK(unify(PortSchema::parse("x: f32[B,3,4,5]"), PortSchema::parse("x: f32[B,...]"), bindings, problems));
  CHECK(problems.empty());
}

TEST_CASE("substitution resolves params and bound symbols; batching adds a dim") {
  PortSchema s = PortSchema::parse("embedding: f32[B,$dim], label: i64[B]");
  PortSchema r = substitute(s, {{"dim", 64}}, {{"B", 32}});
  CHECK(r.str() == "embedding: f32[32,64], label: i64[32]");
  CHECK(batched(PortSchema::parse("x: f32[3]"), Dim{Dim::Kind::symbol, -1, "B"}).str() == "x: f32[B,3]");
  CHECK(unbatched(PortSchema::parse("x: f32[B,3]")).str() == "x: f32[3]");
}
