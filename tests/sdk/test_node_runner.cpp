// The node test harness itself (embedflow/testing/node_runner.hpp), on node types declared here:
// validation and check-hook problems, schemas, side ports, sequence numbers, sources, seeds,
// components, captured log and stdout, and exceptions passed through untouched.
#include <catch2/catch.hpp>

#include <iostream>

#include <embedflow/embedflow.hpp>
#include <embedflow/testing/capture.hpp>
#include <embedflow/testing/node_runner.hpp>

using namespace embedflow;
using embedflow::testing::NodeRunner;

namespace {

RecordPtr number(double v) { return share(Record().set("value", Array::scalar<double>(v))); }
double value_of(const RecordPtr& r) { return r->get("value").item<double>(); }

// Multiplies `value` by `factor`; adds a per-record draw seeded from (node seed, sequence) when
// `noise` is set, as parallel nodes seed.
class Scale final : public Node {
 public:
  void open(NodeContext& ctx) override {
    factor_ = ctx.params().number("factor");
    noise_ = ctx.params().boolean("noise");
    seed_ = ctx.seed();
  }
  void process(std::size_t, const RecordPtr& in, Emitter& out) override {
    double v = value_of(in) * factor_;
    if (noise_) {
      Rng rng(derive_seed(seed_, out.sequence()));
      v += std::uniform_real_distribution<double>(0, 1)(rng);
    }
    if (v < 0) throw DataError(cat("record ", out.sequence(), ": negative value ", v));
    out.emit(number(v));
  }

 private:
  double factor_ = 1;
  bool noise_ = false;
  std::uint64_t seed_ = 0;
};

// Adds the latest side value to every stream value; counts side values in its log.
class AddSide final : public Node {
 public:
  void open(NodeContext& ctx) override { ctx_ = &ctx; }
  void on_side(std::size_t, const RecordPtr&, Emitter&) override { ++sides_; }
  void process(std::size_t, const RecordPtr& in, Emitter& out) override {
    out.emit(number(value_of(in) + value_of(ctx_->side(1))));
  }
  void close(Emitter&) override { log_info(ctx_->id(), sides_, " side values"); }

 private:
  NodeContext* ctx_ = nullptr;
  int sides_ = 0;
};

// Emits `count` records, two per produce() call, then prints how many it made.
class Pairs final : public Node {
 public:
  void open(NodeContext& ctx) override {
    count_ = ctx.params().integer("count");
    ctx.set_expected_items(static_cast<std::uint64_t>(count_));
    rng_ = &ctx.rng();
  }
  bool produce(Emitter& out) override {
    for (int k = 0; k < 2 && made_ < count_; ++k, ++made_)
      out.emit(share(Record().set("index", Array::scalar<std::int64_t>(made_))
                         .set("draw", Array::scalar<std::int64_t>(static_cast<std::int64_t>((*rng_)() % 1000)))));
    return made_ < count_;
  }
  void close(Emitter&) override { std::cout << "made " << made_ << "\n"; }

 private:
  std::int64_t count_ = 0, made_ = 0;
  Rng* rng_ = nullptr;
};

struct Offset : Component {
  explicit Offset(const ComponentContext& c) : amount(c.params().number("amount")), seed(c.seed()) {}
  double amount;
  std::uint64_t seed;
};

class UsesOffset final : public Node {
 public:
  void open(NodeContext& ctx) override { offset_ = ctx.component<Offset>("offset"); }
  void process(std::size_t, const RecordPtr& in, Emitter& out) override {
    out.emit(share(Record().set("value", Array::scalar<double>(value_of(in) + offset_->amount))
                       .set("seed", Array::scalar<std::int64_t>(static_cast<std::int64_t>(offset_->seed >> 2)))));
  }

 private:
  std::unique_ptr<Offset> offset_;
};

const Registry& registry() {
  static Registry r = [] {
    Registry reg;
    reg.add(NodeTypeBuilder("t.scale")
                .param(Param::number("factor").default_value(2.0).min(-10))
                .param(Param::boolean("noise").default_value(false))
                .input("in", "value: f64[]")
                .optional_input("extra", "value: f64[]")
                .output("out", "value: f64[]")
                .parallel()
                .check([](SchemaContext& c) {
                  if (c.params().number("factor") == 3) c.error("factor 3 is not allowed here", "factor");
                  if (c.connected("extra")) c.error("extra is connected");
                })
                .create<Scale>());
    reg.add(NodeTypeBuilder("t.add_side")
                .input("in", "value: f64[]")
                .side_input("side", "value: f64[]")
                .output("out", "value: f64[]")
                .create<AddSide>());
    reg.add(NodeTypeBuilder("t.pairs")
                .source()
                .param(Param::integer("count").default_value(5).min(0))
                .output("out", "index: i64[], draw: i64[]")
                .create<Pairs>());
    reg.add(ComponentTypeBuilder("t.offset", "offset").param(Param::number("amount").default_value(1.0)).create<Offset>());
    reg.add(NodeTypeBuilder("t.uses_offset")
                .param(Param::component("offset", "offset"))
                .input("in", "*")
                .output("out", "*")
                .create<UsesOffset>());
    return reg;
  }();
  return r;
}

std::vector<double> values(const std::vector<RecordPtr>& records) {
  std::vector<double> v;
  for (const auto& r : records) v.push_back(value_of(r));
  return v;
}

}  // namespace

TEST_CASE("NodeRunner: parameters and check hooks are validated as the engine does, all problems at once") {
  NodeRunner ok(registry(), "t.scale", "{factor: 4}");
  CHECK(ok.problems().empty());
  CHECK(ok.params().number("factor") == 4.0);
  CHECK(ok.params().boolean("noise") == false);  // defaults applied

  NodeRunner bad(registry(), "t.scale", "{factr: 4, noise: maybe}");
  REQUIRE(bad.problems().size() == 2);
  CHECK_THAT(bad.problem_text(), Catch::Contains("t.scale params:1:9: node 'node': unknown parameter 'factr'; did you mean 'factor'?"));
  CHECK_THAT(bad.problem_text(), Catch::Contains("parameter 'noise' expects a boolean"));
  CHECK_THROWS_AS(bad.open(), ConfigError);
  CHECK_THROWS_WITH(bad.push("in", number(1)), Catch::Contains("does not validate") && Catch::Contains("factr"));

  // A check hook's error points at the parameter; a connected optional port is seen as connected.
  NodeRunner hook(registry(), "t.scale", "{factor: 3}", NodeRunner::Options().with_id("s").with_input("extra", ""));
  REQUIRE(hook.problems().size() == 2);
  CHECK(hook.problems()[0].str() == "t.scale params:1:10: node 's': factor 3 is not allowed here");
  CHECK(hook.problems()[1].str() == "node 's': extra is connected");

  // What arrives is unified with what the port requires.
  NodeRunner wrong(registry(), "t.scale", "", NodeRunner::Options().with_input("in", "value: i64[]"));
  REQUIRE(wrong.problems().size() == 1);
  CHECK_THAT(wrong.problem_text(), Catch::Contains("input 'in'") && Catch::Contains("i64") && Catch::Contains("f64"));
  NodeRunner exact(registry(), "t.scale", "", NodeRunner::Options().with_input("in", "value: f64[], id: i64[]"));
  CHECK(exact.problems().empty());
  CHECK(exact.input_schema("in").str() == "value: f64[], id: i64[]");

  CHECK_THROWS_WITH(NodeRunner(registry(), "t.scal"), Catch::Contains("unknown node type 't.scal'; did you mean 't.scale'?"));
  CHECK_THROWS_WITH(NodeRunner(registry(), "t.scale", "{factor: [1"), Catch::Contains("t.scale params:"));
}

TEST_CASE("NodeRunner: records in, records out, with the sequence numbers the engine would give") {
  NodeRunner r(registry(), "t.scale", "{factor: 2.5}");
  r.run("in", {number(1), number(2), number(4)});
  CHECK(values(r.outputs("out")) == std::vector<double>{2.5, 5, 10});
  CHECK(r.sequences("out") == std::vector<std::uint64_t>{0, 1, 2});
  CHECK(testing::format_records(r.outputs("out")) == std::vector<std::string>{"{value: 2.5}", "{value: 5}", "{value: 10}"});
  CHECK_THROWS_AS(r.push("in", number(1)), std::logic_error);  // closed
  CHECK_THROWS_AS(r.outputs("nope"), std::invalid_argument);

  // Per-record seeds follow (graph seed, node id, sequence): same name and seed, same draws.
  auto noisy = [](const std::string& id, std::uint64_t seed) {
    NodeRunner n(registry(), "t.scale", "{noise: true}", NodeRunner::Options().with_id(id).with_seed(seed));
    n.run("in", {number(0), number(0)});
    CHECK(n.seed() == derive_seed(seed, id));
    return values(n.outputs("out"));
  };
  CHECK(noisy("a", 1) == noisy("a", 1));
  CHECK(noisy("a", 1) != noisy("b", 1));
  CHECK(noisy("a", 1) != noisy("a", 2));
  CHECK(noisy("a", 1)[0] != noisy("a", 1)[1]);
}

TEST_CASE("NodeRunner: exceptions from the node propagate untouched") {
  NodeRunner r(registry(), "t.scale", "{factor: -1}");
  r.push("in", number(0));
  CHECK_THROWS_AS(r.push("in", number(2)), DataError);
  CHECK_THROWS_WITH(r.push("in", number(3)), "record 2: negative value -3");
}

TEST_CASE("NodeRunner: stream records wait for the side port's first value; a side port left empty is an error") {
  NodeRunner r(registry(), "t.add_side", "", NodeRunner::Options().with_id("adder"));
  r.push("in", number(1));
  r.push("in", number(2));
  CHECK(r.outputs("out").empty());
  r.push("side", number(10));
  CHECK(values(r.outputs("out")) == std::vector<double>{11, 12});
  r.push("side", number(20));
  r.push("in", number(3));
  r.close();
  CHECK(values(r.outputs("out")) == std::vector<double>{11, 12, 23});
  CHECK(r.log() == "[info] adder: 2 side values\n");

  NodeRunner empty(registry(), "t.add_side");
  empty.push("in", number(1));
  CHECK_THROWS_WITH(empty.close(), "side input 'side' ended without a value; 1 records waited for it");
}

TEST_CASE("NodeRunner: a source runs to exhaustion; its draws, counts and prints are seen") {
  NodeRunner r(registry(), "t.pairs", "{count: 5}", NodeRunner::Options().with_id("src").with_seed(7));
  CHECK(r.produce());
  CHECK(r.outputs("out").size() == 2);
  r.run_source();
  CHECK(r.outputs("out").size() == 5);
  CHECK(r.sequences("out") == std::vector<std::uint64_t>{0, 1, 2, 3, 4});
  CHECK(r.expected_items() == 5);
  CHECK(r.out() == "made 5\n");
  Rng expected(derive_seed(7, "src"));
  for (const auto& rec : r.outputs("out"))
    CHECK(rec->get("draw").item<std::int64_t>() == static_cast<std::int64_t>(expected() % 1000));
  CHECK_THROWS_AS(NodeRunner(registry(), "t.scale").produce(), std::logic_error);
}

TEST_CASE("NodeRunner: components are built from the node's params with the engine's seeds") {
  NodeRunner r(registry(), "t.uses_offset", "{offset: {type: t.offset, amount: 0.5}}", NodeRunner::Options().with_id("u"));
  r.run("in", {number(1)});
  REQUIRE(r.outputs("out").size() == 1);
  CHECK(value_of(r.outputs("out")[0]) == 1.5);
  CHECK(r.outputs("out")[0]->get("seed").item<std::int64_t>() ==
        static_cast<std::int64_t>(derive_seed(derive_seed(derive_seed(0, "u"), "offset"), "t.offset") >> 2));
  NodeRunner bad(registry(), "t.uses_offset", "{offset: {type: t.offset, amout: 1}}");
  CHECK_THAT(bad.problem_text(), Catch::Contains("did you mean 'amount'"));
}

TEST_CASE("LogCapture and CoutCapture collect while they live and nest") {
  testing::LogCapture outer;
  {
    testing::LogCapture inner;
    log_info("x", "one");
    CHECK(inner.text() == "[info] x: one\n");
  }
  log_warning("y", "two");
  CHECK(outer.text() == "[info] x: one\n[warning] y: two\n");
  std::string printed;
  {
    testing::CoutCapture out;
    std::cout << "hello " << 3 << "\n";
    printed = out.text();
  }
  CHECK(printed == "hello 3\n");
}
