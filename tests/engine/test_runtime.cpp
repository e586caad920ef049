// Runtime behaviour through real graphs: determinism, ordering, fan-in/out, side ports,
// components, SIGINT and bounded memory.
#include <catch2/catch.hpp>

#include <map>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <sstream>
#include <thread>

#include "cli.hpp"

using namespace embedflow::test;

namespace {

std::string testing_path() { return std::string("--plugin-path=") + EMBEDFLOW_TESTING_PLUGIN_DIR; }

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

}  // namespace

TEST_CASE("the same seed gives identical output; threads do not change it") {
  auto dir = scratch_dir("determinism");
  write_file(dir / "g.yaml", R"(seed: 11
nodes:
  numbers: {type: core.range, params: {count: 2000}}
  noisy: {type: core.map_affine, params: {jitter: 1.0}}
  late: {type: testing.jittery}
  mixed: {type: core.shuffle, params: {buffer_size: 100}}
  show: {type: core.sink, params: {mode: print}}
edges: [numbers.out -> noisy.in, noisy.out -> late.in, late.out -> mixed.in, mixed.out -> show.in]
)");
  std::string g = (dir / "g.yaml").string();
  Result a = run_cli({"run", g, "-q", "--threads", "2", testing_path()});
  Result b = run_cli({"run", g, "-q", "--threads", "2", testing_path()});
  Result c = run_cli({"run", g, "-q", "--threads", "1", testing_path()});
  Result d = run_cli({"run", g, "-q", "--threads", "2", "--seed", "12", testing_path()});
  REQUIRE(a.exit_code == 0);
  REQUIRE(lines(a.out).size() == 2000);
  CHECK(a.out == b.out);
  CHECK(a.out == c.out);
  CHECK(a.out != d.out);
  // The shuffle really permuted: the first printed record is not index 0 in both seeds.
  CHECK(lines(a.out)[0] != lines(d.out)[0]);
}

TEST_CASE("core.shuffle says when its buffer is smaller than the stream") {
  auto dir = scratch_dir("partial-shuffle");
  auto graph = [&](int buffer) {
    write_file(dir / "g.yaml", "nodes:\n  numbers: {type: core.range, params: {count: 300}}\n"
                              "  mixed: {type: core.shuffle, params: {buffer_size: " + std::to_string(buffer) + "}}\n"
                              "  count: {type: core.sink, params: {mode: count, expect: 300}}\n"
                              "edges: [numbers.out -> mixed.in, mixed.out -> count.in]\n");
    return run_cli({"run", (dir / "g.yaml").string()});
  };
  Result partial = graph(100);
  REQUIRE(partial.exit_code == 0);
  CHECK_THAT(partial.err, Catch::Contains("mixed: partial shuffle: 300 records through a buffer of 100"));
  Result whole = graph(300);
  REQUIRE(whole.exit_code == 0);
  CHECK_THAT(whole.err, !Catch::Contains("partial shuffle"));
}

TEST_CASE("a parallel node's output keeps input order") {
  auto dir = scratch_dir("order");
  write_file(dir / "g.yaml", R"(nodes:
  numbers: {type: core.range, params: {count: 500}}
  late: {type: testing.jittery}
  pick: {type: core.select, params: {fields: [index]}}
  show: {type: core.sink, params: {mode: print}}
edges: [numbers.out -> late.in, late.out -> pick.in, pick.out -> show.in]
)");
  Result r = run_cli({"run", (dir / "g.yaml").string(), "-q", "--threads", "2", testing_path()});
  REQUIRE(r.exit_code == 0);
  auto out = lines(r.out);
  REQUIRE(out.size() == 500);
  for (int i = 0; i < 500; ++i) REQUIRE(out[static_cast<std::size_t>(i)] == "{index: " + std::to_string(i) + "}");
}

TEST_CASE("fan-out copies a stream; fan-in merges streams; end of stream reaches every node") {
  auto dir = scratch_dir("fan");
  write_file(dir / "g.yaml", R"(nodes:
  numbers: {type: core.range, params: {count: 1000}}
  head: {type: core.limit, params: {count: 10}}
  all: {type: testing.jittery}
  merged: {type: core.sink, params: {expect: 1010}}
  copy: {type: core.sink, params: {expect: 1000}}
edges:
  - numbers.out -> head.in
  - numbers.out -> all.in
  - numbers.out -> copy.in
  - head.out -> merged.in
  - all.out -> merged.in
)");
  Result r = run_cli({"run", (dir / "g.yaml").string(), "-q", testing_path()});
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("count: 1010"));
  CHECK_THAT(r.out, Catch::Contains("count: 1000"));
}

TEST_CASE("batch and unbatch round-trip, with and without the last partial batch") {
  auto dir = scratch_dir("batch");
  write_file(dir / "g.yaml", R"(nodes:
  numbers: {type: core.range, params: {count: 10}}
  batches: {type: core.batch, params: {size: 4}}
  rows: {type: core.unbatch}
  show: {type: core.sink, params: {mode: print}}
edges: [numbers.out -> batches.in, batches.out -> rows.in, rows.out -> show.in]
)");
  Result r = run_cli({"run", (dir / "g.yaml").string(), "-q"});
  REQUIRE(r.exit_code == 0);
  auto out = lines(r.out);
  REQUIRE(out.size() == 10);
  CHECK(out[9] == "{index: 9, value: 9}");
  Result dropped = run_cli({"run", (dir / "g.yaml").string(), "-q", "--set", "batches.drop_last=true"});
  CHECK(lines(dropped.out).size() == 8);
}

TEST_CASE("side ports latch the latest value and stream records wait for it") {
  auto dir = scratch_dir("side");
  write_file(dir / "g.yaml", R"(nodes:
  numbers: {type: core.range, params: {count: 5}}
  setting: {type: core.range, params: {count: 1, start: 42}}
  slow: {type: testing.jittery}
  tagged: {type: core.attach, params: {prefix: "side_"}}
  show: {type: core.sink, params: {mode: print}}
edges: [numbers.out -> tagged.in, setting.out -> slow.in, slow.out -> tagged.side, tagged.out -> show.in]
)");
  Result r = run_cli({"run", (dir / "g.yaml").string(), "-q", testing_path()});
  REQUIRE(r.exit_code == 0);
  auto out = lines(r.out);
  REQUIRE(out.size() == 5);
  CHECK(out[0] == "{index: 0, value: 0, side_index: 0, side_value: 42}");
  CHECK(out[4] == "{index: 4, value: 4, side_index: 0, side_value: 42}");

  // A required side port that ends empty is an error, not a hang.
  Result empty = run_cli({"run", (dir / "g.yaml").string(), "-q", "--set", "setting.count=0", testing_path()});
  CHECK(empty.exit_code == 1);
  // How many stream records were already waiting when the side stream ended depends on timing.
  CHECK_THAT(empty.err, Catch::Contains("node 'tagged'") && Catch::Contains("side input 'side' ended without a value"));
}

TEST_CASE("core.funnel gives a side port several writers; a side port with two edges is a validation error") {
  auto dir = scratch_dir("funnel");
  // The node's own example, as pasted from its source.
  write_file(dir / "example.yaml", R"(nodes:
  low:  {type: core.range, params: {count: 2}}
  high: {type: core.range, params: {count: 3, start: 10}}
  both: {type: core.funnel}
  show: {type: core.sink, params: {mode: count, expect: 5}}
edges: [low.out -> both.in, high.out -> both.in, both.out -> show.in]
)");
  Result example = run_cli({"run", (dir / "example.yaml").string(), "-q"});
  CHECK(example.exit_code == 0);
  // Two writers into one side port through the funnel: each of their records reaches the latch,
  // in each writer's own order; the stream waits for the first value.
  write_file(dir / "g.yaml", R"(nodes:
  numbers: {type: core.range, params: {count: 200}}
  a: {type: core.range, params: {count: 3, start: 100}}
  b: {type: core.range, params: {count: 3, start: 200}}
  slow: {type: testing.jittery}
  both: {type: core.funnel}
  tagged: {type: core.attach, params: {prefix: "side_"}}
  show: {type: core.sink, params: {mode: print}}
edges: [numbers.out -> tagged.in, a.out -> slow.in, slow.out -> both.in, b.out -> both.in, both.out -> tagged.side, tagged.out -> show.in]
)");
  Result r = run_cli({"run", (dir / "g.yaml").string(), "-q", "--threads", "2", testing_path()});
  REQUIRE(r.exit_code == 0);
  auto out = lines(r.out);
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
  write_file(dir / "bad.yaml", R"(nodes:
  numbers: {type: core.range, params: {count: 2}}
  a: {type: core.range, params: {count: 1}}
  b: {type: core.range, params: {count: 1}}
  tagged: {type: core.attach}
  show: {type: core.sink}
edges: [numbers.out -> tagged.in, a.out -> tagged.side, b.out -> tagged.side, tagged.out -> show.in]
)");
  Result bad = run_cli({"validate", (dir / "bad.yaml").string()});
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err + bad.out, Catch::Contains("bad.yaml:5:3: node 'tagged': side input 'side' has 2 edges; a side port takes one"));
}

TEST_CASE("components chosen in YAML are swapped by one edit") {
  auto dir = scratch_dir("components");
  write_file(dir / "g.yaml", R"(nodes:
  numbers: {type: core.range, params: {count: 101}}
  agg: {type: core.aggregate, params: {op: {type: core.quantile, q: 0.5}}}
  show: {type: core.sink, params: {mode: print}}
edges: [numbers.out -> agg.in, agg.out -> show.in]
)");
  std::string g = (dir / "g.yaml").string();
  CHECK(run_cli({"run", g, "-q"}).out == "{value: 50, count: 101}\n");
  CHECK(run_cli({"run", g, "-q", "--set", "agg.op.q=0.25"}).out == "{value: 25, count: 101}\n");
  CHECK(run_cli({"run", g, "-q", "--set", "agg.op={type: core.sum}"}).out == "{value: 5050, count: 101}\n");
  CHECK(run_cli({"run", g, "-q", "--set", "agg.op=core.max"}).out == "{value: 100, count: 101}\n");
}

TEST_CASE("SIGINT and SIGTERM drain the graph, close outputs and exit 130 / 143") {
  int sig = GENERATE(SIGINT, SIGTERM);
  auto dir = scratch_dir(sig == SIGINT ? "sigint" : "sigterm");
  std::string printed = (dir / "printed.txt").string();
  write_file(dir / "g.yaml", R"(nodes:
  numbers: {type: core.range, params: {count: 1000000000}}
  show: {type: core.sink, params: {mode: print, out: )" + printed + R"(, delay_us: 20}}
edges: [numbers.out -> show.in]
)");
  Child child = spawn_cli({"run", (dir / "g.yaml").string(), "-q"});
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  kill(child.pid, sig);
  Result r = wait_child(child);
  CHECK(r.exit_code == 128 + sig);
  // The sink closed its file: every line is complete and numbered without gaps.
  auto out = lines(read_file(printed));
  REQUIRE(out.size() > 10);
  for (std::size_t i = 0; i < out.size(); ++i) REQUIRE(out[i] == "{index: " + std::to_string(i) + ", value: " + std::to_string(i) + "}");
}

TEST_CASE("memory stays bounded: 10M messages into a slow sink peak like 1M") {
  auto dir = scratch_dir("memory");
  // 1 KiB per message: an unbounded queue would grow by gigabytes.
  write_file(dir / "g.yaml", R"(max_in_flight: 256
nodes:
  numbers: {type: core.range, params: {count: 1000000, payload_bytes: 1024}}
  show: {type: core.sink, params: {delay_us: 1}}
edges: [numbers.out -> show.in]
)");
  std::string g = (dir / "g.yaml").string();
  Result small = run_cli({"run", g, "-q", "--threads", "2"});
  Result large = run_cli({"run", g, "-q", "--threads", "2", "--set", "numbers.count=10000000"});
  REQUIRE(small.exit_code == 0);
  REQUIRE(large.exit_code == 0);
  CHECK_THAT(large.out, Catch::Contains("count: 10000000"));
  INFO("peak RSS 1M: " << small.max_rss_kb << " KiB, 10M: " << large.max_rss_kb << " KiB");
  CHECK(static_cast<double>(large.max_rss_kb) <= 1.10 * static_cast<double>(small.max_rss_kb));
}

TEST_CASE("core.shard gives each rank its rows of every batch; together the ranks hold each row once") {
  auto dir = scratch_dir("shard");
  write_file(dir / "g.yaml", R"(nodes:
  numbers: {type: core.range, params: {count: 10}}
  rows:    {type: core.batch, params: {size: 5}}
  shard:   {type: core.shard, params: {world_size: 3, rank: 0}}
  show:    {type: core.sink, params: {mode: print}}
edges: [numbers.out -> rows.in, rows.out -> shard.in, shard.out -> show.in]
)");
  const std::string g = (dir / "g.yaml").string();
  // Batches of 5 over 3 ranks: rows [5r/3, 5(r+1)/3) = 0..0, 1..2, 3..4 of each.
  std::vector<std::vector<std::string>> expected{
      {"{index: [0], value: [0], unsharded_rows: [5]}", "{index: [5], value: [5], unsharded_rows: [5]}"},
      {"{index: [1, 2], value: [1, 2], unsharded_rows: [5, 5]}", "{index: [6, 7], value: [6, 7], unsharded_rows: [5, 5]}"},
      {"{index: [3, 4], value: [3, 4], unsharded_rows: [5, 5]}", "{index: [8, 9], value: [8, 9], unsharded_rows: [5, 5]}"}};
  for (int rank = 0; rank < 3; ++rank) {
    Result r = run_cli({"run", g, "-q", "--set", "shard.rank=" + std::to_string(rank)});
    INFO("rank " << rank << ": " << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(lines(r.out) == expected[static_cast<std::size_t>(rank)]);
  }
  // world_size 0 and rank -1 read torchrun's variables.
  Result env = run_cli({"run", g, "-q", "--set", "shard.world_size=0", "--set", "shard.rank=-1"}, {"WORLD_SIZE=3", "RANK=2"});
  REQUIRE(env.exit_code == 0);
  CHECK(lines(env.out) == expected[2]);

  // A world of one is rank 0 whatever RANK says, as torch.train has it.
  Result alone = run_cli({"run", g, "-q", "--set", "shard.world_size=1", "--set", "shard.rank=-1"}, {"RANK=3"});
  REQUIRE(alone.exit_code == 0);
  CHECK(lines(alone.out) == std::vector<std::string>{"{index: [0, 1, 2, 3, 4], value: [0, 1, 2, 3, 4], unsharded_rows: [5, 5, 5, 5, 5]}",
                                                      "{index: [5, 6, 7, 8, 9], value: [5, 6, 7, 8, 9], unsharded_rows: [5, 5, 5, 5, 5]}"});
  Result malformed = run_cli({"run", g, "-q", "--set", "shard.world_size=0"}, {"WORLD_SIZE=two"});
  CHECK(malformed.exit_code == 2);
  CHECK_THAT(malformed.err, Catch::Contains("environment variable WORLD_SIZE='two' is not an integer"));
  Result outside = run_cli({"run", g, "-q", "--set", "shard.rank=3"});
  CHECK(outside.exit_code == 2);
  CHECK_THAT(outside.err, Catch::Contains("node 'shard' (core.shard)") && Catch::Contains("rank 3 is outside [0, 3)"));
  Result small = run_cli({"run", g, "-q", "--set", "shard.world_size=6"});
  CHECK(small.exit_code == 1);
  CHECK_THAT(small.err, Catch::Contains("record 0 has 5 rows, fewer than the 6 ranks it is shared among"));
  write_file(dir / "scalars.yaml", R"(nodes:
  numbers: {type: core.range, params: {count: 3}}
  shard:   {type: core.shard, params: {world_size: 2, rank: 0}}
  show:    {type: core.sink}
edges: [numbers.out -> shard.in, shard.out -> show.in]
)");
  Result scalars = run_cli({"run", (dir / "scalars.yaml").string(), "-q"});
  CHECK(scalars.exit_code == 1);
  CHECK_THAT(scalars.err, Catch::Contains("record 0: core.shard splits batches, and field 'index' is a scalar"));

  write_file(dir / "twice.yaml", R"(nodes:
  numbers: {type: core.range, params: {count: 10}}
  rows:    {type: core.batch, params: {size: 5}}
  first:   {type: core.shard, params: {world_size: 2, rank: 0}}
  second:  {type: core.shard, params: {world_size: 2, rank: 0}}
  show:    {type: core.sink}
edges: [numbers.out -> rows.in, rows.out -> first.in, first.out -> second.in, second.out -> show.in]
)");
  Result twice = run_cli({"validate", (dir / "twice.yaml").string()});
  CHECK(twice.exit_code == 2);
  CHECK_THAT(twice.err, Catch::Contains("twice.yaml:5:") && Catch::Contains("the input was sharded already"));
}

TEST_CASE("core.keep_best passes on the one record with the smallest or largest field, over fanned-in streams") {
  auto dir = scratch_dir("keep-best");
  write_file(dir / "g.yaml", R"(nodes:
  a: {type: core.range, params: {count: 3, start: 5.0}}
  b: {type: core.range, params: {count: 4, start: 1.5, step: -1.0}}
  c: {type: core.range, params: {count: 2, start: 9.0}}
  best: {type: core.keep_best, params: {field: value}}
  show: {type: core.sink, params: {mode: print}}
edges: [a.out -> best.in, b.out -> best.in, c.out -> best.in, best.out -> show.in]
)");
  std::string g = (dir / "g.yaml").string();
  Result low = run_cli({"run", g, "-j", "2"});
  REQUIRE(low.exit_code == 0);
  CHECK(lines(low.out) == std::vector<std::string>{"{index: 3, value: -1.5}"});
  CHECK_THAT(low.err, Catch::Contains("of 9 (smallest value -1.5; all: "));
  Result high = run_cli({"run", g, "-q", "--set", "best.mode=max"});
  REQUIRE(high.exit_code == 0);
  CHECK(lines(high.out) == std::vector<std::string>{"{index: 1, value: 10}"});

  Result missing = run_cli({"run", g, "-q", "--set", "best.field=loss"});
  CHECK(missing.exit_code == 1);
  CHECK_THAT(missing.err, Catch::Contains("node 'best' (core.keep_best)") && Catch::Contains("has no field 'loss'"));

  write_file(dir / "batch.yaml", R"(nodes:
  a: {type: core.range, params: {count: 4}}
  two: {type: core.batch, params: {size: 2}}
  best: {type: core.keep_best, params: {field: value}}
  show: {type: core.sink}
edges: [a.out -> two.in, two.out -> best.in, best.out -> show.in]
)");
  Result vector = run_cli({"run", (dir / "batch.yaml").string(), "-q"});
  CHECK(vector.exit_code == 1);
  CHECK_THAT(vector.err, Catch::Contains("record 0: field 'value' must be one number, got f64[2]"));

  // NaN never wins (0 * inf); only NaN is an error.
  write_file(dir / "nan.yaml", R"(nodes:
  zeros: {type: core.range, params: {count: 2, start: 0, step: 0}}
  nan: {type: core.map_affine, params: {scale: .inf}}
  three: {type: core.range, params: {count: 1, start: 3}}
  best: {type: core.keep_best, params: {field: value, mode: max}}
  show: {type: core.sink, params: {mode: print}}
edges: [zeros.out -> nan.in, nan.out -> best.in, three.out -> best.in, best.out -> show.in]
)");
  Result with_nan = run_cli({"run", (dir / "nan.yaml").string()});
  REQUIRE(with_nan.exit_code == 0);
  CHECK(lines(with_nan.out) == std::vector<std::string>{"{index: 0, value: 3}"});
  Result only_nan = run_cli({"run", (dir / "nan.yaml").string(), "-q", "--set", "three.count=0"});
  CHECK(only_nan.exit_code == 1);
  CHECK_THAT(only_nan.err, Catch::Contains("every one of the 2 records has value = NaN: none to keep"));

  // Exact ties go to the name that sorts first (here the `index` field), not to the first arrival:
  // the slow branch's index 0 beats the fast branch's 10 and 11 at any timing.
  write_file(dir / "tie.yaml", R"(nodes:
  slow_src: {type: core.range, params: {count: 3, start: 2, step: 0}}
  slow: {type: testing.jittery}
  fast_src: {type: core.range, params: {count: 2, start: 2, step: 0}}
  fast: {type: core.map_affine, params: {field: index, offset: 10}}
  best: {type: core.keep_best, params: {field: value, name_field: index}}
  show: {type: core.sink, params: {mode: print}}
edges: [slow_src.out -> slow.in, slow.out -> best.in, fast_src.out -> fast.in, fast.out -> best.in, best.out -> show.in]
)");
  for (int run = 0; run < 3; ++run) {
    Result tie = run_cli({"run", (dir / "tie.yaml").string(), "-q", "-j", "2", testing_path()});
    REQUIRE(tie.exit_code == 0);
    CHECK(lines(tie.out) == std::vector<std::string>{"{index: 0, value: 2}"});
  }

  Result none = run_cli({"run", g, "--set", "a.count=0", "--set", "b.count=0", "--set", "c.count=0"});
  CHECK(none.exit_code == 0);
  CHECK(lines(none.out).empty());
  CHECK_THAT(none.err, Catch::Contains("best: no records received"));
}
