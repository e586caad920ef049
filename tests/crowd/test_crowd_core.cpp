// Unit tests of the crowd family's core (no engine): the JSON reader, annotation files (CSV and
// JSON agree; every malformed input is a DataError naming file:line), pair expansion (S = 24
// gives 276 pairs a grid; hand-counted labels on a tiny file), and splits (grid- and
// worker-disjoint, the test part ~15% of whole grids, seeded, nested train fractions).
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "cli.hpp"
#include "core/annotations.hpp"
#include "core/json.hpp"
#include "core/split.hpp"
#include "embedflow/error.hpp"

using namespace embedflow;
using namespace embedflow::crowd;
using namespace embedflow::test;
namespace fs = std::filesystem;

namespace {

std::string data(const std::string& name) { return source_dir() + "/tests/crowd/data/" + name; }

// The message of the DataError that reading `text` as `name` throws ("" when none is thrown).
std::string read_error(const std::string& name, const std::string& text, std::int64_t grid_size = 0) {
  const fs::path p = scratch_dir("crowd_core_bad") / name;
  write_file(p, text);
  try {
    read_annotations(p.string(), AnnotationFormat::automatic, grid_size);
  } catch (const DataError& e) {
    std::string msg = e.what();
    // Tests match on the file name, not the scratch path.
    const std::string dir = p.parent_path().string() + "/";
    for (std::size_t at; (at = msg.find(dir)) != std::string::npos;) msg.erase(at, dir.size());
    return msg;
  }
  return "";
}

// A synthetic file: `grids` grids of S images, worker g % workers, clusters from image % k.
AnnotationSet synthetic(std::int64_t grids, std::int64_t s, std::int64_t workers, std::int64_t per_grid = 1) {
  AnnotationSet set;
  set.file = "synthetic";
  set.grid_size = s;
  for (std::int64_t g = 0; g < grids; ++g)
    for (std::int64_t r = 0; r < per_grid; ++r) {
      Annotation a;
      a.grid = g;
      a.worker = (g * per_grid + r * 7) % workers;
      for (std::int64_t j = 0; j < s; ++j) {
        a.images.push_back(g * 1000 + j);
        a.clusters.push_back((j + r) % 3);
      }
      a.where = cat("synthetic:", g);
      set.annotations.push_back(a);
    }
  return set;
}

std::set<std::int64_t> grids_of(const AnnotationSet& set, const std::vector<std::size_t>& idx) {
  std::set<std::int64_t> out;
  for (std::size_t i : idx) out.insert(set.annotations[i].grid);
  return out;
}

std::set<std::int64_t> workers_of(const AnnotationSet& set, const std::vector<std::size_t>& idx) {
  std::set<std::int64_t> out;
  for (std::size_t i : idx) out.insert(set.annotations[i].worker);
  return out;
}

}  // namespace

TEST_CASE("JSON reader: values, positions and errors with line:col") {
  const JsonValue v = parse_json("{\"a\": [1, -2, 3.5, 1e2, true, null, \"x\\u00e9\\ud83d\\ude00\"],\n \"b\": {\"c\": 9007199254740993}}", "t.json");
  REQUIRE(v.kind == JsonValue::Kind::object);
  const JsonValue* a = v.find("a");
  REQUIRE(a);
  REQUIRE(a->items.size() == 7);
  CHECK(a->items[0].kind == JsonValue::Kind::integer);
  CHECK(a->items[1].integer == -2);
  CHECK(a->items[2].kind == JsonValue::Kind::number);
  CHECK(a->items[2].number == 3.5);
  CHECK(a->items[3].kind == JsonValue::Kind::number);
  CHECK(a->items[3].number == 100.0);
  CHECK(a->items[4].boolean);
  CHECK(a->items[5].kind == JsonValue::Kind::null);
  CHECK(a->items[6].string == "x\xc3\xa9\xf0\x9f\x98\x80");
  // 2^53 + 1 is not a double: integers are kept exactly.
  CHECK(v.find("b")->find("c")->integer == 9007199254740993LL);
  CHECK(v.find("b")->line == 2);
  CHECK(v.find("b")->column == 7);
  // Positions after strings with escaped quotes and backslashes, numbers and literals.
  const JsonValue w = parse_json("[\"a\\\"b\\\\\", 12.5e1,\n  true, \"\\\\\", -7]", "w.json");
  REQUIRE(w.items.size() == 5);
  CHECK(w.items[0].string == "a\"b\\");
  CHECK(w.items[1].column == 12);
  CHECK(w.items[1].number == 125.0);
  CHECK((w.items[2].line == 2 && w.items[2].column == 3));
  CHECK(w.items[3].column == 9);
  CHECK(w.items[3].string == "\\");
  CHECK(w.items[4].column == 15);
  CHECK(w.items[4].integer == -7);

  CHECK_THROWS_WITH(parse_json("{\"a\": [1, 2,]}", "t.json"), "t.json:1:13: syntax error while parsing value - unexpected ']'; expected '[', '{', or a literal");
  CHECK_THROWS_WITH(parse_json("[1,\n 2\n", "t.json"), "t.json:3:1: syntax error while parsing array - unexpected end of input; expected ']'");
  CHECK_THROWS_WITH(parse_json("{\"a\": 01}", "t.json"),
                    "t.json:1:8: syntax error while parsing object - unexpected number literal; expected '}'");
  CHECK_THROWS_WITH(parse_json("{\"a\": \"x}", "t.json"), Catch::Contains("t.json:1:10: syntax error while parsing value - invalid string: missing closing quote"));
  CHECK_THROWS_WITH(parse_json("[1] [2]", "t.json"), "t.json:1:5: syntax error while parsing value - unexpected '['; expected end of input");
  CHECK_THROWS_WITH(parse_json("{a: 1}", "t.json"), Catch::Contains("t.json:1:2: syntax error while parsing object key"));
}

TEST_CASE("CSV and JSON annotation files read the same; pairs counted by hand") {
  const AnnotationSet c = read_annotations(data("tiny.csv"), AnnotationFormat::automatic, 4);
  const AnnotationSet j = read_annotations(data("tiny.json"), AnnotationFormat::automatic, 0);
  REQUIRE(c.annotations.size() == 4);
  REQUIRE(j.annotations.size() == 4);
  CHECK(c.grid_size == 4);
  CHECK(j.grid_size == 4);
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(c.annotations[i].worker == j.annotations[i].worker);
    CHECK(c.annotations[i].grid == j.annotations[i].grid);
    CHECK(c.annotations[i].images == j.annotations[i].images);
    CHECK(c.annotations[i].clusters == j.annotations[i].clusters);
  }
  CHECK(c.annotations[0].where == data("tiny.csv") + ":2");
  CHECK(c.annotations[3].clusters == std::vector<std::int64_t>{0, 1, 1, -1});

  std::vector<std::size_t> all{0, 1, 2, 3};
  const std::vector<PairRef> pairs = expand_pairs(c, all);
  // Grids 0-2 are fully assigned (6 pairs each); grid 3 has one unassigned image (3 pairs).
  REQUIRE(pairs.size() == 21);
  std::vector<int> positives(4, 0);
  for (const PairRef& r : pairs) positives[r.annotation] += same_cluster(c.annotations[r.annotation], r);
  // Grid 0: {10,11},{12,13} -> 2; grid 1: {12,15} -> 1; grid 2: {10,16,17} -> 3; grid 3: {13,15} -> 1.
  CHECK(positives == std::vector<int>{2, 1, 3, 1});
  CHECK(pairs[0].annotation == 0);
  CHECK(pairs[0].p == 0);
  CHECK(pairs[0].q == 1);
  CHECK(pairs[5].p == 2);
  CHECK(pairs[5].q == 3);
}

TEST_CASE("S = 24 grids give (S^2 - S) / 2 = 276 pairs each, i < j in grid order") {
  const AnnotationSet set = synthetic(10, 24, 4);
  std::vector<std::size_t> all(10);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  const std::vector<PairRef> pairs = expand_pairs(set, all);
  REQUIRE(pairs.size() == 2760);
  std::vector<int> per(10, 0);
  std::set<std::tuple<int, int, int>> distinct;
  for (const PairRef& r : pairs) {
    ++per[r.annotation];
    CHECK(r.p < r.q);
    distinct.emplace(r.annotation, r.p, r.q);
  }
  CHECK(distinct.size() == 2760);
  for (int n : per) CHECK(n == 276);
}

TEST_CASE("malformed annotation files are DataErrors naming file:line") {
  const std::string h = "worker,grid,image,cluster\n";
  CHECK(read_error("a.csv", h + "0,0,1,0\n0,0,2,x\n") == "a.csv:3: column 'cluster': 'x' is not an integer");
  CHECK(read_error("b.csv", h + "0,0,1,0\n0,0,2\n") == "b.csv:3: 3 fields, the header has 4");
  CHECK(read_error("c.csv", "worker,grid,img,cluster\n0,0,1,0\n") ==
        "c.csv:1: the header lacks column(s) image; an annotation CSV needs worker, grid, image, cluster");
  CHECK(read_error("d.csv", h + "0,0,1,0\n0,0,2,1\n0,0,1,1\n") == "d.csv:4: image 1 is listed twice in worker 0's grid 0");
  CHECK(read_error("e.csv", h + "0,0,1,0\n0,0,2,1\n1,1,1,0\n1,1,2,0\n1,1,3,0\n") ==
        "e.csv:4: worker 1, grid 1 has 3 images; expected 2 like the first annotation (e.csv:2)");
  CHECK(read_error("f.csv", h + "0,0,1,0\n0,0,2,1\n", 24) ==
        "f.csv:2: worker 0, grid 0 has 2 images; expected 24 (the grid_size parameter; 0 takes the size from the file)");
  CHECK(read_error("g.csv", h + "0,0,1,0\n0,0,2,1\n1,0,1,0\n1,0,3,0\n") ==
        "g.csv:4: grid 0 (worker 1) lists image 3, which the same grid does not hold at g.csv:2 (worker 0); "
        "annotations of one grid must list the same images");
  CHECK(read_error("h.csv", h + "0,0,-1,0\n") == "h.csv:2: image -1 is negative; ids must be >= 0");
  CHECK(read_error("i.csv", h + "0,0,1,-2\n0,0,2,0\n") == "i.csv:2: cluster -2 is below -1 (-1 marks an unassigned image)");
  CHECK(read_error("j.csv", h + "0,0,\"1,0\n") == "j.csv:2: unterminated quoted field");
  CHECK(read_error("k.csv", h) == "k.csv: no annotations in the file");
  CHECK(read_error("l.csv", "") == "l.csv: empty file (expected a header worker,grid,image,cluster)");

  CHECK(read_error("a.json", "{\"annotations\": [\n {\"worker\": 0, \"grid\": 0, \"images\": [1, 2], \"clusters\": [0]}]}") ==
        "a.json:2:57: 1 clusters for 2 images");
  CHECK(read_error("b.json", "[{\"worker\": \"w1\", \"grid\": 0, \"images\": [1, 2], \"clusters\": [0, 1]}]") ==
        "b.json:1:13: worker must be an integer, found a string");
  CHECK(read_error("c.json", "[{\"worker\": 0, \"images\": [1, 2], \"clusters\": [0, 1]}]") ==
        "c.json:1:2: annotation object lacks \"grid\" (needs worker, grid, images, clusters)");
  CHECK(read_error("d.json", "[{\"worker\": 0, \"grid\": 0, \"images\": [1, 2], \"clusters\": [0, 1]},\n"
                             " {\"worker\": 0, \"grid\": 0, \"images\": [1, 2], \"clusters\": [1, 1]}]") ==
        "d.json:2: worker 0 annotated grid 0 already at d.json:1");
  CHECK(read_error("e.json", "{\"grids\": []}") == "e.json:1:1: the top-level object lacks \"annotations\"");
  CHECK(read_error("f.json", "[{\"worker\": 0, \"grid\": 0, \"images\": [1, 2.5], \"clusters\": [0, 1]}]") ==
        "f.json:1:41: an image id must be an integer, found a number");
  CHECK(read_error("g.json", "[{\"worker\": 0, \"grid\": 0, \"images\": [1, 2], \"clusters\": [0, 1]}") ==
        "g.json:1:64: syntax error while parsing array - unexpected end of input; expected ']'");

  CHECK_THROWS_AS(read_annotations("/nonexistent/a.csv", AnnotationFormat::csv, 0), ConfigError);
}

TEST_CASE("grid splits: disjoint, 15% of grids, complementary, seeded, nested train fractions") {
  const AnnotationSet set = synthetic(200, 6, 17, 2);  // two workers per grid
  SplitOptions o;
  o.part = SplitPart::test;
  const SplitResult test = split_annotations(set, o);
  o.part = SplitPart::train;
  const SplitResult train = split_annotations(set, o);
  const auto tg = grids_of(set, test.selected), rg = grids_of(set, train.selected);
  CHECK(tg.size() == 30);  // round(0.15 * 200)
  CHECK(rg.size() == 170);
  for (std::int64_t g : tg) CHECK(rg.count(g) == 0);
  // Whole grids: both annotations of every test grid are in the test part.
  CHECK(test.selected.size() == 60);
  CHECK(train.selected.size() == 340);
  CHECK(std::is_sorted(test.selected.begin(), test.selected.end()));

  // The split is a function of ids and seed, not of file order.
  AnnotationSet reversed = set;
  std::reverse(reversed.annotations.begin(), reversed.annotations.end());
  o.part = SplitPart::test;
  CHECK(grids_of(reversed, split_annotations(reversed, o).selected) == tg);
  // Same seed, same split; another seed, another split.
  CHECK(split_annotations(set, o).selected == test.selected);
  o.seed = 5;
  const auto other = grids_of(set, split_annotations(set, o).selected);
  CHECK(other.size() == 30);
  CHECK(other != tg);

  // train_fraction: nested subsets of the train grids, never test grids.
  o.seed = 0;
  o.part = SplitPart::train;
  std::set<std::int64_t> previous;
  for (double f : {0.1, 0.25, 0.5, 1.0}) {
    o.train_fraction = f;
    const auto kept = grids_of(set, split_annotations(set, o).selected);
    CHECK(static_cast<double>(kept.size()) == Approx(std::round(f * 170)));
    for (std::int64_t g : previous) CHECK(kept.count(g) == 1);
    for (std::int64_t g : kept) CHECK(tg.count(g) == 0);
    previous = kept;
  }

  // Small files still test on something.
  const AnnotationSet four = synthetic(4, 6, 2);
  o = SplitOptions();
  o.part = SplitPart::test;
  CHECK(split_annotations(four, o).selected.size() == 1);
}

TEST_CASE("worker splits: worker- and grid-disjoint; train workers' annotations on test grids are dropped") {
  const AnnotationSet set = synthetic(300, 6, 40, 2);
  SplitOptions o;
  o.by = SplitBy::worker;
  o.part = SplitPart::test;
  const SplitResult test = split_annotations(set, o);
  o.part = SplitPart::train;
  const SplitResult train = split_annotations(set, o);
  CHECK(test.test_workers == 6);  // round(0.15 * 40)
  const auto tw = workers_of(set, test.selected), rw = workers_of(set, train.selected);
  CHECK(tw.size() == 6);
  for (std::int64_t w : tw) CHECK(rw.count(w) == 0);
  const auto tg = grids_of(set, test.selected), rg = grids_of(set, train.selected);
  for (std::int64_t g : tg) CHECK(rg.count(g) == 0);
  // Every annotation is in exactly one of test, train, dropped.
  CHECK(test.selected.size() + train.selected.size() + static_cast<std::size_t>(train.dropped) == set.annotations.size());
  CHECK(train.dropped > 0);
}
