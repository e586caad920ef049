// Core node types in the test's own process: core.shuffle and core.batch / core.unbatch one node
// at a time (NodeRunner); core.funnel, core.aggregate with its components, core.shard and
// core.keep_best in graphs (GraphRunner), where fan-in, --set overrides and the engine's located
// errors are part of what is checked.
#include <catch2/catch.hpp>

#include <map>

#include "harness.hpp"

using namespace embedflow;
using namespace embedflow::test;

namespace {

// core.range's records, made by the node itself.
std::vector<RecordPtr> range(const std::string& params) {
  NodeRunner numbers(plugins(), "core.range", params);
  numbers.run_source();
  return numbers.outputs("out");
}

}  // namespace

TEST_CASE("core.shuffle says when its buffer is smaller than the stream") {
  const auto numbers = range("{count: 300}");
  NodeRunner partial(plugins(), "core.shuffle", "{buffer_size: 100}", NodeRunner::Options().with_id("mixed"));
  partial.run("in", numbers);
  CHECK(partial.outputs("out").size() == 300);
  CHECK_THAT(partial.log(), Catch::Contains("mixed: partial shuffle: 300 records through a buffer of 100"));
  NodeRunner whole(plugins(), "core.shuffle", "{buffer_size: 300}", NodeRunner::Options().with_id("mixed"));
  whole.run("in", numbers);
  CHECK(whole.outputs("out").size() == 300);
  CHECK_THAT(whole.log(), !Catch::Contains("partial shuffle"));
}

TEST_CASE("batch and unbatch round-trip, with and without the last partial batch") {
  auto round_trip = [](const std::string& batch_params) {
    NodeRunner batches(plugins(), "core.batch", batch_params, NodeRunner::Options().with_id("batches"));
    batches.run("in", range("{count: 10}"));
    NodeRunner rows(plugins(), "core.unbatch", "", NodeRunner::Options().with_id("rows"));
    rows.run("in", batches.outputs("out"));
    return format_records(rows.outputs("out"));
  };
  auto out = round_trip("{size: 4}");
  REQUIRE(out.size() == 10);
  CHECK(out[9] == "{index: 9, value: 9}");
  CHECK(round_trip("{size: 4, drop_last: true}").size() == 8);
}

TEST_CASE("core.funnel gives a side port several writers; a side port with two edges is a validation error") {
  // The node's own example, as pasted from its source.
  GraphRun example = GraphRunner(plugins(), R"(nodes:
  low:  {type: core.range, params: {count: 2}}
  high: {type: core.range, params: {count: 3, start: 10}}
  both: {type: core.funnel}
  show: {type: core.sink, params: {mode: count, expect: 5}}
edges: [low.out -> both.in, high.out -> both.in, both.out -> show.in]
)", "example.yaml").run();
  CHECK(example.exit_code == 0);
  // Two writers into one side port through the funnel: each of their records reaches the latch,
  // in each writer's own order; the stream waits for the first value.
  GraphRun r = GraphRunner(plugins_and_testing(), R"(nodes:
  numbers: {type: core.range, params: {count: 200}}
  a: {type: core.range, params: {count: 3, start: 100}}
  b: {type: core.range, params: {count: 3, start: 200}}
  slow: {type: testing.jittery}
  both: {type: core.funnel}
  tagged: {type: core.attach, params: {prefix: "side_"}}
  show: {type: core.sink, params: {mode: print}}
edges: [numbers.out -> tagged.in, a.out -> slow.in, slow.out -> both.in, b.out -> both.in, both.out -> tagged.side, tagged.out -> show.in]
)").collect("tagged").threads(2).run();
  INFO(r.message());
  REQUIRE(r.exit_code == 0);
  auto out = r.lines("tagged");
  REQUIRE(out.size() == 200);
  std::map<std::string, int> last{{"1", -1}, {"2", -1}};
  for (const auto& line : out) {
    const auto at = line.find("side_value: ");
    REQUIRE(at != std::string::npos);
    const int v = std::stoi(line.substr(at + 12));
    INFO(line);
    CHECK(((v >= 100 && v < 103) || (v >= 200 && v < 203)));
    // A writer's values latch in its order: once 101 was seen, 100 never comes back.
    int& prev = last[std::to_string(v / 100)];
    CHECK(v >= prev);
    prev = v;
  }
  // Without the funnel the graph does not validate: a side port latches one writer.
  GraphRun bad = GraphRunner(plugins(), R"(nodes:
  numbers: {type: core.range, params: {count: 2}}
  a: {type: core.range, params: {count: 1}}
  b: {type: core.range, params: {count: 1}}
  tagged: {type: core.attach}
  show: {type: core.sink}
edges: [numbers.out -> tagged.in, a.out -> tagged.side, b.out -> tagged.side, tagged.out -> show.in]
)", "bad.yaml").validate();
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.problem_text(), Catch::Contains("bad.yaml:5:3: node 'tagged': side input 'side' has 2 edges; a side port takes one"));
}

TEST_CASE("components chosen in YAML are swapped by one edit") {
  GraphRunner g(plugins(), R"(nodes:
  numbers: {type: core.range, params: {count: 101}}
  agg: {type: core.aggregate, params: {op: {type: core.quantile, q: 0.5}}}
  show: {type: core.sink, params: {mode: print}}
edges: [numbers.out -> agg.in, agg.out -> show.in]
)");
  g.collect("agg");
  using Lines = std::vector<std::string>;
  CHECK(g.run().lines("agg") == Lines{"{value: 50, count: 101}"});
  CHECK(g.run({"agg.op.q=0.25"}).lines("agg") == Lines{"{value: 25, count: 101}"});
  CHECK(g.run({"agg.op={type: core.sum}"}).lines("agg") == Lines{"{value: 5050, count: 101}"});
  CHECK(g.run({"agg.op=core.max"}).lines("agg") == Lines{"{value: 100, count: 101}"});
}

TEST_CASE("core.shard gives each rank its rows of every batch; together the ranks hold each row once") {
  GraphRunner g(plugins(), R"(nodes:
  numbers: {type: core.range, params: {count: 10}}
  rows:    {type: core.batch, params: {size: 5}}
  shard:   {type: core.shard, params: {world_size: 3, rank: 0}}
  show:    {type: core.sink, params: {mode: print}}
edges: [numbers.out -> rows.in, rows.out -> shard.in, shard.out -> show.in]
)");
  g.collect("shard");
  // Batches of 5 over 3 ranks: rows [5r/3, 5(r+1)/3) = 0..0, 1..2, 3..4 of each.
  std::vector<std::vector<std::string>> expected{
      {"{index: [0], value: [0], unsharded_rows: [5]}", "{index: [5], value: [5], unsharded_rows: [5]}"},
      {"{index: [1, 2], value: [1, 2], unsharded_rows: [5, 5]}", "{index: [6, 7], value: [6, 7], unsharded_rows: [5, 5]}"},
      {"{index: [3, 4], value: [3, 4], unsharded_rows: [5, 5]}", "{index: [8, 9], value: [8, 9], unsharded_rows: [5, 5]}"}};
  for (int rank = 0; rank < 3; ++rank) {
    GraphRun r = g.run({"shard.rank=" + std::to_string(rank)});
    INFO("rank " << rank << ": " << r.message());
    REQUIRE(r.exit_code == 0);
    CHECK(r.lines("shard") == expected[static_cast<std::size_t>(rank)]);
  }
  // world_size 0 and rank -1 read torchrun's variables.
  {
    ScopedEnv world("WORLD_SIZE", "3"), rank("RANK", "2");
    GraphRun env = g.run({"shard.world_size=0", "shard.rank=-1"});
    REQUIRE(env.exit_code == 0);
    CHECK(env.lines("shard") == expected[2]);
  }
  // srun's variables when torchrun's are absent; torchrun's win when both are set.
  {
    ScopedEnv world("SLURM_NTASKS", "3"), rank("SLURM_PROCID", "1");
    GraphRun slurm = g.run({"shard.world_size=0", "shard.rank=-1"});
    REQUIRE(slurm.exit_code == 0);
    CHECK(slurm.lines("shard") == expected[1]);
    ScopedEnv tworld("WORLD_SIZE", "3"), trank("RANK", "2");
    GraphRun both = g.run({"shard.world_size=0", "shard.rank=-1"});
    REQUIRE(both.exit_code == 0);
    CHECK(both.lines("shard") == expected[2]);
    // An explicit parameter that disagrees with the launcher is a ConfigError naming the node.
    GraphRun conflict = g.run({"shard.world_size=3", "shard.rank=1"});
    CHECK(conflict.exit_code == 2);
    CHECK_THAT(conflict.error, Catch::Contains("node 'shard' (core.shard)") &&
                                   Catch::Contains("rank 1 disagrees with the launcher's RANK=2"));
    GraphRun agreeing = g.run({"shard.world_size=3", "shard.rank=2"});
    CHECK(agreeing.exit_code == 0);
  }
  // A world of one is rank 0 whatever RANK says, as torch.train has it.
  {
    ScopedEnv rank("RANK", "3");
    GraphRun alone = g.run({"shard.world_size=1", "shard.rank=-1"});
    REQUIRE(alone.exit_code == 0);
    CHECK(alone.lines("shard") == std::vector<std::string>{"{index: [0, 1, 2, 3, 4], value: [0, 1, 2, 3, 4], unsharded_rows: [5, 5, 5, 5, 5]}",
                                                           "{index: [5, 6, 7, 8, 9], value: [5, 6, 7, 8, 9], unsharded_rows: [5, 5, 5, 5, 5]}"});
  }
  {
    ScopedEnv world("WORLD_SIZE", "two");
    GraphRun malformed = g.run({"shard.world_size=0"});
    CHECK(malformed.exit_code == 2);
    CHECK_THAT(malformed.error, Catch::Contains("environment variable WORLD_SIZE='two' is not an integer"));
  }
  GraphRun outside = g.run({"shard.rank=3"});
  CHECK(outside.exit_code == 2);
  CHECK_THAT(outside.error, Catch::Contains("node 'shard' (core.shard)") && Catch::Contains("rank 3 is outside [0, 3)"));
  GraphRun small = g.run({"shard.world_size=6"});
  CHECK(small.exit_code == 1);
  CHECK_THAT(small.error, Catch::Contains("record 0 has 5 rows, fewer than the 6 ranks it is shared among"));
  GraphRun scalars = GraphRunner(plugins(), R"(nodes:
  numbers: {type: core.range, params: {count: 3}}
  shard:   {type: core.shard, params: {world_size: 2, rank: 0}}
  show:    {type: core.sink}
edges: [numbers.out -> shard.in, shard.out -> show.in]
)").run();
  CHECK(scalars.exit_code == 1);
  CHECK_THAT(scalars.error, Catch::Contains("record 0: core.shard splits batches, and field 'index' is a scalar"));

  GraphRun twice = GraphRunner(plugins(), R"(nodes:
  numbers: {type: core.range, params: {count: 10}}
  rows:    {type: core.batch, params: {size: 5}}
  first:   {type: core.shard, params: {world_size: 2, rank: 0}}
  second:  {type: core.shard, params: {world_size: 2, rank: 0}}
  show:    {type: core.sink}
edges: [numbers.out -> rows.in, rows.out -> first.in, first.out -> second.in, second.out -> show.in]
)", "twice.yaml").validate();
  CHECK(twice.exit_code == 2);
  CHECK_THAT(twice.problem_text(), Catch::Contains("twice.yaml:5:") && Catch::Contains("the input was sharded already"));
}

TEST_CASE("core.keep_best passes on the one record with the smallest or largest field, over fanned-in streams") {
  GraphRunner g(plugins(), R"(nodes:
  a: {type: core.range, params: {count: 3, start: 5.0}}
  b: {type: core.range, params: {count: 4, start: 1.5, step: -1.0}}
  c: {type: core.range, params: {count: 2, start: 9.0}}
  best: {type: core.keep_best, params: {field: value}}
  show: {type: core.sink, params: {mode: print}}
edges: [a.out -> best.in, b.out -> best.in, c.out -> best.in, best.out -> show.in]
)");
  g.collect("best");
  using Lines = std::vector<std::string>;
  GraphRun low = GraphRunner(g).threads(2).run();
  REQUIRE(low.exit_code == 0);
  CHECK(low.lines("best") == Lines{"{index: 3, value: -1.5}"});
  CHECK_THAT(low.log, Catch::Contains("of 9 (smallest value -1.5; all: "));
  GraphRun high = g.run({"best.mode=max"});
  REQUIRE(high.exit_code == 0);
  CHECK(high.lines("best") == Lines{"{index: 1, value: 10}"});

  GraphRun missing = g.run({"best.field=loss"});
  CHECK(missing.exit_code == 1);
  CHECK_THAT(missing.error, Catch::Contains("node 'best' (core.keep_best)") && Catch::Contains("has no field 'loss'"));

  GraphRun vector = GraphRunner(plugins(), R"(nodes:
  a: {type: core.range, params: {count: 4}}
  two: {type: core.batch, params: {size: 2}}
  best: {type: core.keep_best, params: {field: value}}
  show: {type: core.sink}
edges: [a.out -> two.in, two.out -> best.in, best.out -> show.in]
)").run();
  CHECK(vector.exit_code == 1);
  CHECK_THAT(vector.error, Catch::Contains("record 0: field 'value' must be one number, got f64[2]"));

  // NaN never wins (0 * inf); only NaN is an error.
  GraphRunner nan(plugins(), R"(nodes:
  zeros: {type: core.range, params: {count: 2, start: 0, step: 0}}
  nan: {type: core.map_affine, params: {scale: .inf}}
  three: {type: core.range, params: {count: 1, start: 3}}
  best: {type: core.keep_best, params: {field: value, mode: max}}
  show: {type: core.sink, params: {mode: print}}
edges: [zeros.out -> nan.in, nan.out -> best.in, three.out -> best.in, best.out -> show.in]
)");
  nan.collect("best");
  GraphRun with_nan = nan.run();
  REQUIRE(with_nan.exit_code == 0);
  CHECK(with_nan.lines("best") == Lines{"{index: 0, value: 3}"});
  GraphRun only_nan = nan.run({"three.count=0"});
  CHECK(only_nan.exit_code == 1);
  CHECK_THAT(only_nan.error, Catch::Contains("every one of the 2 records has value = NaN: none to keep"));

  // Exact ties go to the name that sorts first (here the `index` field), not to the first arrival:
  // the slow branch's index 0 beats the fast branch's 10 and 11 at any timing.
  GraphRunner tie(plugins_and_testing(), R"(nodes:
  slow_src: {type: core.range, params: {count: 3, start: 2, step: 0}}
  slow: {type: testing.jittery}
  fast_src: {type: core.range, params: {count: 2, start: 2, step: 0}}
  fast: {type: core.map_affine, params: {field: index, offset: 10}}
  best: {type: core.keep_best, params: {field: value, name_field: index}}
  show: {type: core.sink, params: {mode: print}}
edges: [slow_src.out -> slow.in, slow.out -> best.in, fast_src.out -> fast.in, fast.out -> best.in, best.out -> show.in]
)");
  tie.collect("best").threads(2);
  for (int run = 0; run < 3; ++run) {
    GraphRun r = tie.run();
    REQUIRE(r.exit_code == 0);
    CHECK(r.lines("best") == Lines{"{index: 0, value: 2}"});
  }

  GraphRun none = g.run({"a.count=0", "b.count=0", "c.count=0"});
  CHECK(none.exit_code == 0);
  CHECK(none.records("best").empty());
  CHECK_THAT(none.log, Catch::Contains("best: no records received"));
}

TEST_CASE("count parameters far above the stream cost what the stream holds") {
  // 10^12 records of buffer or batch would be terabytes if sized up front.
  const auto numbers = range("{count: 50}");
  NodeRunner shuffle(plugins(), "core.shuffle", "{buffer_size: 1000000000000}", NodeRunner::Options().with_id("mixed"));
  shuffle.run("in", numbers);
  CHECK(shuffle.outputs("out").size() == 50);
  NodeRunner batches(plugins(), "core.batch", "{size: 1000000000000}", NodeRunner::Options().with_id("batches"));
  batches.run("in", numbers);
  REQUIRE(batches.outputs("out").size() == 1);
  CHECK(batches.outputs("out")[0]->get("index").dim(0) == 50);
}
