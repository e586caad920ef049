// `embedflow sweep` end to end on a real graph (HDF5 features from gen_reid_features, kNN and
// k-means retrieval, eval.report): the cross product of two axes times three seeds, run two at a
// time; the cached readers computed once and replayed by every other point (across seeds too:
// the reader is deterministic); every point a complete run folder; the aggregated table equal to
// what numpy and scipy compute from the points' own run records; resume that skips completed
// points; a point that fails at run time while the others finish; and the bad input that must
// stop a sweep before anything runs.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sys/file.h>
#include <fcntl.h>
#include <unistd.h>

#include <fstream>

#include "cli.hpp"

using namespace embedflow::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* kGraph = R"(# kNN and k-means retrieval of synthetic re-id features: a small graph to sweep.
seed: 3
vars: {data: reid.h5, out: out/knn, distance: euclidean, clusters: 2, explode_at: 1000000}
nodes:
  query:   {type: io.hdf5_reader, params: {path: "${data}", object: query, batch_size: 256}, cache: true}
  gallery: {type: io.hdf5_reader, params: {path: "${data}", object: gallery, batch_size: 256}, cache: true}
  guard:   {type: testing.explode, params: {at: "${explode_at}"}}
  knn:     {type: eval.retrieval, params: {distance: "${distance}", name: "kNN", ranks: [1], out: "${out}/knn"}}
  kmeans:  {type: eval.clustering, params: {clusters: "${clusters}", name: "k-means", ranks: [1], out: "${out}/kmeans"}}
  table:   {type: eval.report, params: {out: "${out}/table", title: "retrieval", ranks: [1], columns: [rank-k, map, map_at_r]}}
edges:
  - query.out -> guard.in
  - guard.out -> knn.query
  - gallery.out -> knn.gallery
  - query.out -> kmeans.query
  - gallery.out -> kmeans.gallery
  - knn.metrics -> table.in
  - kmeans.metrics -> table.in
)";

// A scratch folder with the graph and its data (small: 40 identities, 16 dimensions).
fs::path sweep_folder(const std::string& name) {
  fs::path dir = scratch_dir(name);
  write_file(dir / "knn.yaml", kGraph);
  Result r = run_process({GEN_REID_FEATURES, "--out", (dir / "reid.h5").string(), "--dim", "16", "--identities", "40",
                          "--val-identities", "10", "--test-identities", "30", "--seed", "5"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return dir;
}

Result sweep(const fs::path& dir, std::vector<std::string> args) {
  args.insert(args.begin(), {"sweep", "knn.yaml", "--cache-dir", "cache", "--no-report"});
  return run_with_testing_plugin(dir, args);
}

json read_json(const fs::path& p) { return json::parse(read_file(p)); }

// The aggregate in sweep.json against numpy/scipy over the points' run records.
const char* kCheckAggregate = R"PY(
import json, math, sys, os
import numpy as np
from scipy import stats
folder = sys.argv[1]
sweep = json.load(open(os.path.join(folder, "sweep.json")))
seeds = sweep["seeds"]
values = {}
for p in sweep["points"]:
    assert p["status"] == "ok", p
    rec = json.load(open(os.path.join(folder, p["dir"], "run.json")))
    assert rec["status"] == "done" and rec["seed"] == p["seed"], rec["status"]
    for t in rec["results"]:
        for row in t["rows"]:
            for k, v in row["values"].items():
                values.setdefault((t["node"], p["variant"], row["label"], k), {})[p["seed"]] = v
checked = 0
for t in sweep["results"]:
    for row in t["rows"]:
        for k, m in row["metrics"].items():
            by_seed = values[(t["node"], row["variant"], row["label"], k)]
            x = np.array([by_seed[s] for s in seeds], dtype=float)
            assert m["values"] == [by_seed[s] for s in seeds], (k, m["values"])
            assert math.isclose(m["mean"], x.mean(), rel_tol=1e-12, abs_tol=1e-15), (k, m["mean"], x.mean())
            sd = x.std(ddof=1)
            assert math.isclose(m["sd"], sd, rel_tol=1e-9, abs_tol=1e-15), (k, m["sd"], sd)
            if sd > 0:
                lo, hi = stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
                assert math.isclose(m["ci"][0], lo, rel_tol=1e-9) and math.isclose(m["ci"][1], hi, rel_tol=1e-9), (m["ci"], lo, hi)
            checked += 1
    rows = {(r["variant"], r["label"]): r for r in t["rows"]}
    for test in t["tests"]:
        a = rows[(test["a"]["variant"], test["a"]["label"])]["metrics"][test["metric"]]["values"]
        b = rows[(test["b"]["variant"], test["b"]["label"])]["metrics"][test["metric"]]["values"]
        d = np.array(a) - np.array(b)
        assert math.isclose(test["mean_difference"], d.mean(), rel_tol=1e-9, abs_tol=1e-15)
        if d.std() > 0:
            r = stats.ttest_rel(a, b)
            assert math.isclose(test["p"], r.pvalue, rel_tol=1e-7), (test, r.pvalue)
            checked += 1
print("checked", checked)
assert checked > 20, checked
)PY";

}  // namespace

TEST_CASE("sweep: a 2x2 grid with 3 seeds shares the cached readers and aggregates every point", "[runs][sweep]") {
  const fs::path dir = sweep_folder("sweep_grid");
  const Result r = sweep(dir, {"--grid", "distance=euclidean,cosine", "--grid", "clusters=2,3", "--seeds", "3",
                               "--jobs", "2", "--out", "grid", "--baseline", "kNN", "--against", " map : kNN "});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json s = read_json(dir / "grid" / "sweep.json");
  CHECK(s["format"] == "embedflow-sweep/1");
  CHECK(s["against"] == json::array({json{{"metric", "map"}, {"row", "kNN"}}}));
  CHECK(s["status"] == "done");
  CHECK(s["seeds"] == json::array({3, 4, 5}));
  CHECK(s["variables"] == json::array({"distance", "clusters"}));
  REQUIRE(s["points"].size() == 12);
  REQUIRE(s["variants"].size() == 4);
  CHECK(s["variants"][1]["name"] == "distance=euclidean, clusters=3");
  for (const auto& p : s["points"]) {
    INFO(p.dump());
    CHECK(p["status"] == "ok");
    const json rec = read_json(dir / "grid" / p["dir"].get<std::string>() / "run.json");
    CHECK(rec["status"] == "done");
    CHECK(rec["seed"] == p["seed"]);
    CHECK(fs::exists(dir / "grid" / p["dir"].get<std::string>() / "table.json"));  // outputs under the point's out
  }
  // The readers depend on neither axis nor the seed: one point computes each, eleven replay.
  std::map<std::string, json> stages;
  for (const auto& st : s["stages"]) stages[st["node"]] = st;
  CHECK(stages["query"]["computed"] == 1);
  CHECK(stages["query"]["replayed"] == 11);
  CHECK(stages["gallery"]["computed"] == 1);
  CHECK(stages["gallery"]["replayed"] == 11);
  CHECK(stages["knn"]["computed"] == 12);
  CHECK_THAT(r.err, Catch::Contains("query") && Catch::Contains("computed 1  replayed 11"));
  // Graph differences between variants name the swept parameter, not the point folders.
  REQUIRE(s["graph_differences"].size() == 3);
  const std::string diff = s["graph_differences"][0]["differences"].dump();
  CHECK_THAT(diff, Catch::Contains("clusters"));
  CHECK_THAT(diff, !Catch::Contains("points/"));
  // One results table, two labels per variant, three metrics.
  REQUIRE(s["results"].size() == 1);
  CHECK(s["results"][0]["rows"].size() == 8);
  CHECK(s["results"][0]["best"].contains("map"));
  check_python(kCheckAggregate, {(dir / "grid").string()});
  // table.md: every row's mean and interval in percent, and k-means against the kNN baseline
  // with the paired test's difference and p, as sweep.json holds them.
  check_python(R"PY(
import json, sys, re
d = sys.argv[1]
s = json.load(open(d + "/sweep.json")); md = open(d + "/table.md").read()
t = s["results"][0]
assert "Mean over 3 seeds [95% t-interval]" in md, md[:300]
for row in t["rows"]:
    m = row["metrics"]["map"]
    cell = f"{100 * m['mean']:.1f} [{100 * m['ci'][0]:.1f}, {100 * m['ci'][1]:.1f}]" if m["ci"] else f"{100 * m['mean']:.1f}"
    line = next(l for l in md.splitlines() if l.startswith(f"| {row['variant']} | {row['label']} |"))
    assert cell in line, (cell, line)
assert "Paired t-tests across seeds against kNN" in md
tests = [x for x in t["tests"] if x["metric"] == "map" and x["a"]["variant"] == x["b"]["variant"]]
block = md.split("Paired t-tests across seeds against kNN")[1]
for x in tests:
    a, b = x["a"], x["b"]
    if x["p"] is None: continue
    km, sign = (a, 1) if a["label"] == "k-means" else (b, -1)
    diff = sign * 100 * x["mean_difference"]
    # the same difference at every seed has no spread to test against: said so instead of a p
    tail = "(every seed)" if x["ci"][0] == x["ci"][1] else f"(p {x['p']:.3f})"
    want = f"{'+' if diff >= 0 else ''}{diff:.1f} {tail}"
    line = next(l for l in block.splitlines() if l.startswith(f"| {km['variant']} | k-means |"))
    assert want in line, (want, line)
print("table.md ok")
)PY",
               {(dir / "grid").string()});

  SECTION("run again, it keeps every completed point") {
    std::map<std::string, std::string> ids;
    for (const auto& p : s["points"])
      ids[p["name"]] = read_json(dir / "grid" / p["dir"].get<std::string>() / "run.json")["run_id"];
    const Result again = sweep(dir, {"--grid", "distance=euclidean,cosine", "--grid", "clusters=2,3", "--seeds", "3",
                                     "--jobs", "2", "--out", "grid"});
    INFO(again.err);
    REQUIRE(again.exit_code == 0);
    CHECK_THAT(again.err, Catch::Contains("12 points completed in an earlier sweep are kept"));
    const json s2 = read_json(dir / "grid" / "sweep.json");
    for (const auto& p : s2["points"]) {
      CHECK(p["resumed"] == true);
      CHECK(read_json(dir / "grid" / p["dir"].get<std::string>() / "run.json")["run_id"] == ids[p["name"]]);
    }
    CHECK(s2["results"] == s["results"]);
  }
  SECTION("after the graph file changes, completed points run again") {
    write_file(dir / "knn.yaml", std::string(kGraph) + "# edited\n");
    const Result again = sweep(dir, {"--grid", "distance=euclidean,cosine", "--grid", "clusters=2,3", "--seeds", "3",
                                     "--jobs", "2", "--out", "grid"});
    INFO(again.err);
    REQUIRE(again.exit_code == 0);
    CHECK_THAT(again.err, Catch::Contains("12 completed points ran an earlier version of knn.yaml and run again"));
    for (const auto& p : read_json(dir / "grid" / "sweep.json")["points"]) CHECK(p["resumed"] == false);
  }
  SECTION("a point whose run did not finish runs again, alone") {
    const std::string name = s["points"][4]["name"];
    const fs::path record = dir / "grid" / s["points"][4]["dir"].get<std::string>() / "run.json";
    json rec = read_json(record);
    rec["status"] = "interrupted";
    write_file(record, rec.dump(2));
    const Result again = sweep(dir, {"--grid", "distance=euclidean,cosine", "--grid", "clusters=2,3", "--seeds", "3",
                                     "--out", "grid"});
    INFO(again.err);
    REQUIRE(again.exit_code == 0);
    CHECK_THAT(again.err, Catch::Contains("11 points completed"));
    CHECK_THAT(again.err, Catch::Contains("[1/12] ok"));
    CHECK(read_json(record)["status"] == "done");
    CHECK(read_json(record)["run_id"] != rec["run_id"]);
  }
}

TEST_CASE("sweep: a point that fails at run time is marked; the others finish", "[runs][sweep]") {
  const fs::path dir = sweep_folder("sweep_fail");
  const Result r = sweep(dir, {"--grid", "explode_at=1000000,0", "--seeds", "2", "--out", "f"});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("record 0 is poisoned"));
  const json s = read_json(dir / "f" / "sweep.json");
  CHECK(s["status"] == "failed");
  int ok = 0, failed = 0;
  for (const auto& p : s["points"]) {
    if (p["status"] == "ok") ++ok;
    if (p["status"] == "failed") {
      ++failed;
      CHECK(p["values"]["explode_at"] == "0");
      CHECK_THAT(p["error"].get<std::string>(), Catch::Contains("poisoned"));
    }
  }
  CHECK(ok == 2);
  CHECK(failed == 2);
  // The finished variant's results are still aggregated.
  REQUIRE(s["results"].size() == 1);
  for (const auto& row : s["results"][0]["rows"]) CHECK(row["variant"] == "explode_at=1000000");
}

TEST_CASE("sweep: bad input stops the sweep before any point runs", "[runs][sweep]") {
  const fs::path dir = sweep_folder("sweep_bad");
  auto fails = [&](std::vector<std::string> args, const std::string& message) {
    args.insert(args.end(), {"--out", "bad"});
    const Result r = sweep(dir, args);
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(message));
    CHECK(!fs::exists(dir / "bad" / "points" / "000-distance=euclidean-seed=3" / "run.json"));
  };
  fails({"--grid", "distanse=euclidean,cosine"}, "has no variable 'distanse'; did you mean 'distance'?");
  fails({"--grid", "distance="}, "--grid distance: empty value");
  fails({"--grid", "distance=euclidean,,cosine"}, "empty value");
  fails({"--grid", "seed=1,2"}, "use --seeds");
  fails({"--seeds", "0"}, "--seeds '0'");
  fails({"--seeds", "1,x"}, "'x' is not a non-negative integer");
  fails({}, "nothing to sweep");
  fails({"--grid", "distance=euclidean", "--grid", "distance=cosine"}, "given twice");
  // A value that fails validation at one point: named, with the point, and nothing runs.
  fails({"--grid", "distance=euclidean,bogus_metric"}, "001-distance=bogus_metric-seed=3");
  fails({"--grid", "clusters=2,-1"}, "at point 001-clusters=-1-seed=3");
  fails({"--grid", "clusters=2", "--then", "split=test"}, "--then needs --select");
  fails({"--grid", "clusters=2", "--against", "label_precision"}, "--against 'label_precision': expected METRIC:ROW");
  fails({"--grid", "clusters=2", "--against", ":pair set"}, "expected METRIC:ROW");

  SECTION("two sweeps on one folder: the second is refused") {
    fs::create_directories(dir / "locked");
    const int fd = ::open((dir / "locked" / ".sweep.lock").c_str(), O_RDWR | O_CREAT, 0644);
    REQUIRE(fd >= 0);
    REQUIRE(::write(fd, "4242\n", 5) == 5);
    REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
    const Result r = sweep(dir, {"--grid", "clusters=2,3", "--out", "locked"});
    ::close(fd);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("another sweep (pid 4242) is running in locked"));
    CHECK(!fs::exists(dir / "locked" / "sweep.json"));
  }
  SECTION("a folder holding another sweep's points is refused, not overwritten") {
    const Result first = sweep(dir, {"--grid", "clusters=2", "--out", "other"});
    REQUIRE(first.exit_code == 0);
    const Result second = sweep(dir, {"--grid", "clusters=2", "--set", "distance=cosine", "--out", "other"});
    CHECK(second.exit_code == 2);
    CHECK_THAT(second.err, Catch::Contains("holds a run of another sweep"));
  }
  SECTION("a graph without an `out` variable cannot be swept") {
    std::string text = kGraph;
    text.replace(text.find("out: out/knn, "), 14, "");
    for (std::size_t at; (at = text.find("${out}")) != std::string::npos;) text.replace(at, 6, "o");
    write_file(dir / "no_out.yaml", text);
    const Result r = run_with_testing_plugin(dir, {"sweep", "no_out.yaml", "--grid", "clusters=2,3", "--no-report"});
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("has no variable `out`"));
  }
}

TEST_CASE("sweep: --select picks the best variant on a validation metric and runs it once with --then", "[runs][sweep]") {
  const fs::path dir = sweep_folder("sweep_select");
  const Result r = sweep(dir, {"--grid", "distance=euclidean,cosine,manhattan", "--seeds", "2", "--out", "sel",
                               "--select", "table/kNN/map", "--then", "clusters=4"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json s = read_json(dir / "sel" / "sweep.json");
  REQUIRE(s.contains("selection"));
  const json& sel = s["selection"];
  CHECK(sel["status"] == "ok");
  // The best by hand: the variant whose kNN mAP mean is highest.
  std::string best;
  double best_mean = -1;
  for (const auto& row : s["results"][0]["rows"])
    if (row["label"] == "kNN" && row["metrics"]["map"]["mean"].get<double>() > best_mean) {
      best_mean = row["metrics"]["map"]["mean"];
      best = row["variant"];
    }
  CHECK(sel["best_variant"] == best);
  CHECK(sel["value"].get<double>() == Approx(best_mean));
  const json rec = read_json(dir / "sel" / "selected" / "run.json");
  CHECK(rec["status"] == "done");
  const std::string overrides = rec["overrides"].dump();
  CHECK_THAT(overrides, Catch::Contains(best.substr(0, best.find(','))));
  CHECK_THAT(overrides, Catch::Contains("clusters=4"));
  CHECK(sel["results"].size() == 1);
}

TEST_CASE("sweep: graphs/reid_lmnn_selection.yaml chooses LMNN's k and gamma on validation, then tests once", "[runs][sweep]") {
  const fs::path dir = sweep_folder("sweep_lmnn");
  const Result r = run_with_testing_plugin(
      dir, {"sweep", source_dir() + "/graphs/reid_lmnn_selection.yaml", "--set", "data=reid.h5", "--set", "iterations=10", "--set", "components=16",
            "--grid", "k=1,3", "--grid", "gamma=0.25,0.75", "--select", "validation/LMNN/map", "--then", "test=true",
            "--cache-dir", "cache", "--no-report", "--out", "lmnn"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json s = read_json(dir / "lmnn" / "sweep.json");
  REQUIRE(s["points"].size() == 4);
  // The points never saw the test split; the selected run did, with the best validation variant.
  for (const auto& p : s["points"]) CHECK(!fs::exists(dir / "lmnn" / p["dir"].get<std::string>() / "test.json"));
  const json& sel = s["selection"];
  CHECK(sel["status"] == "ok");
  double best = -1;
  std::string best_variant;
  for (const auto& t : s["results"])
    if (t["node"] == "validation")
      for (const auto& row : t["rows"])
        if (row["label"] == "LMNN" && row["metrics"]["map"]["mean"].get<double>() > best) {
          best = row["metrics"]["map"]["mean"];
          best_variant = row["variant"];
        }
  CHECK(sel["best_variant"] == best_variant);
  const json test = read_json(dir / "lmnn" / "selected" / "test.json");
  CHECK(test["methods"].size() == 2);
  bool has_test_table = false;
  for (const auto& t : sel["results"]) has_test_table |= t["node"] == "test_table";
  CHECK(has_test_table);
}
