// Graph-level tests of the geo family: graphs/geo_pairs.yaml on generated photos through the CLI
// (every emitted pair checked by an independent Python/NumPy pass over the CSV and the HDF5
// outputs, exact counts against scikit-learn, --threads 1 vs 2, the stage cache), and in process
// (GraphRunner): bad CSV rows, validation, the YFCC reader, synthetic geotags, duplicate ids and
// max_pairs.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <set>

#include "harness.hpp"

using namespace embedflow::test;
namespace fs = std::filesystem;

namespace {

const char* kSets[] = {"p1_2000", "p10_2000", "p10_2000_june2013", "p10_2000_june2013_same", "timelapse", "ring"};
const char* kWriters[] = {"save_p1_2000", "save_p10_2000", "save_june2013", "save_june2013_same", "save_timelapse", "save_ring"};

// Runs graphs/geo_pairs.yaml with every output redirected into `dir`.
Result run_geo_pairs(const fs::path& csv, const fs::path& dir, int threads, const std::vector<std::string>& extra) {
  std::vector<std::string> args{"run", source_dir() + "/graphs/geo_pairs.yaml", "--threads", std::to_string(threads),
                                "--set", "photos.path=" + csv.string(),
                                "--set", "stats.out=" + (dir / "stats").string(),
                                "--set", "stats.histogram_pairs=20000",
                                // The 30k-row sample's time-lapse has 25 frames.
                                "--set", "timelapse.timelapse_min_frames=20"};
  for (std::size_t i = 0; i < 6; ++i) {
    args.push_back("--set");
    args.push_back(std::string(kWriters[i]) + ".path=" + (dir / (std::string(kSets[i]) + ".h5")).string());
  }
  args.insert(args.end(), extra.begin(), extra.end());
  return run_cli(args);
}

fs::path generated_photos() {
  static fs::path csv;
  if (csv.empty()) {
    const fs::path dir = scratch_dir("geo_graph_data");
    csv = dir / "photos.csv";
    const Result r = run_process({GEN_PHOTOS, "--rows", "30000", "--seed", "2", "--out", csv.string()});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
  }
  return csv;
}

// Independent checks: every emitted pair against its set's constraints, recomputed from the CSV.
const char* kCheckScript = R"PY(
import csv, json, math, sys
import numpy as np, h5py
from sklearn.neighbors import BallTree

csv_path, out_a, out_b = sys.argv[1:4]
R = 6371000.0
ids, lat, lon, tim, user = [], [], [], [], []
from datetime import datetime, timezone
with open(csv_path, newline="") as f:
    for row in csv.DictReader(f):
        ids.append(int(row["id"])); lat.append(float(row["lat"])); lon.append(float(row["lon"]))
        tim.append(int(datetime.fromisoformat(row["time"]).replace(tzinfo=timezone.utc).timestamp()))
        user.append(row["user"])
pos = {i: k for k, i in enumerate(ids)}
lat = np.array(lat); lon = np.array(lon); tim = np.array(tim); user = np.array(user)

def hav(a, b):
    p1, p2 = np.radians(lat[a]), np.radians(lat[b])
    dl = np.radians(lon[b] - lon[a])
    h = np.sin((p2 - p1) / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(dl / 2) ** 2
    return 2 * R * np.arcsin(np.sqrt(h))

june = (int(datetime(2013, 6, 1, tzinfo=timezone.utc).timestamp()), int(datetime(2013, 7, 1, tzinfo=timezone.utc).timestamp()))
sets = {
    "p1_2000": dict(rp=1, rn=2000), "p10_2000": dict(rp=10, rn=2000),
    "p10_2000_june2013": dict(rp=10, rn=2000, window=june),
    "p10_2000_june2013_same": dict(rp=10, rn=2000, window=june, same_user=True),
    "timelapse": dict(rp=10, rn=2000, window=june, same_user=True, gap=3600),
    "ring": dict(rp=10, rn=30, rmax=100),
}
problems = []
for name, c in sets.items():
    ga = h5py.File(f"{out_a}/{name}.h5", "r")["pairs"]
    gb = h5py.File(f"{out_b}/{name}.h5", "r")["pairs"]
    for field in ("anchor", "other", "distance_m", "label"):
        if not np.array_equal(ga[field][()], gb[field][()]):
            problems.append(f"{name}: field {field} differs between --threads 1 and 2")
    a = np.array([pos[i] for i in ga["anchor"][()]], dtype=np.int64)
    o = np.array([pos[i] for i in ga["other"][()]], dtype=np.int64)
    label = ga["label"][()]; dist = ga["distance_m"][()]
    n = len(a)
    if name in ("p1_2000", "p10_2000", "ring", "timelapse") and n == 0:
        problems.append(f"{name}: no pairs at all")
    d = hav(a, o)
    if n and np.max(np.abs(d - dist)) > 1e-6: problems.append(f"{name}: distance_m differs from haversine")
    if np.any(a == o): problems.append(f"{name}: a photo paired with itself")
    p, q = label == 1, label == 0
    if np.any(d[p] > c["rp"] + 1e-6): problems.append(f"{name}: positive beyond {c['rp']} m")
    if np.any(d[q] < c["rn"] - 1e-6): problems.append(f"{name}: negative within {c['rn']} m")
    if "rmax" in c and np.any(d[q] > c["rmax"] + 1e-6): problems.append(f"{name}: ring negative beyond {c['rmax']} m")
    if "window" in c:
        lo, hi = c["window"]
        for side in (a, o):
            if np.any((tim[side] < lo) | (tim[side] >= hi)): problems.append(f"{name}: photo outside June 2013")
    if c.get("same_user") and np.any(user[a[p]] != user[o[p]]): problems.append(f"{name}: positive by another user")
    if "gap" in c and np.any(np.abs(tim[a[p]] - tim[o[p]]) > c["gap"]): problems.append(f"{name}: positive beyond the time gap")
    # Per-anchor budgets: at most 4 positives and 4 negatives, no repeats.
    if n:
        keys = np.stack([a, o, label], 1)
        if len(np.unique(keys, axis=0)) != n: problems.append(f"{name}: repeated pair")
        _, cnt = np.unique(np.stack([a, label], 1), axis=0, return_counts=True)
        if cnt.max() > 4: problems.append(f"{name}: more than 4 partners of one kind for an anchor")
    print(name, n, "rows,", int(p.sum()), "positives")

summary = json.load(open(f"{out_a}/stats/summary.json"))
names = sorted(s["name"] for s in summary["datasets"])
if len(names) != 6: problems.append(f"summary has {len(names)} datasets")
pts = np.radians(np.stack([lat, lon], 1))
tree = BallTree(pts, metric="haversine")
for entry in summary["pairs_within"]:
    r = entry["radius_m"]
    counts = tree.query_radius(pts, r=r / R, count_only=True)
    want = (int(counts.sum()) - len(pts)) // 2
    print("pairs within", r, "m:", entry["pairs"], "sklearn:", want)
    if entry["pairs"] != want: problems.append(f"pairs within {r} m: {entry['pairs']} != sklearn {want}")
for png in ("density.png", "hist_all.png", "hist_5000.png", "hist_2000.png", "hist_200.png"):
    with open(f"{out_a}/stats/{png}", "rb") as f:
        if f.read(8) != b"\x89PNG\r\n\x1a\n": problems.append(f"{png} is not a PNG")
for p in problems: print("PROBLEM:", p)
sys.exit(1 if problems else 0)
)PY";

}  // namespace

TEST_CASE("geo_pairs.yaml: every pair meets its constraints, counts match sklearn, threads agree", "[geo][graph]") {
  const fs::path csv = generated_photos();
  const fs::path a = scratch_dir("geo_graph_t1"), b = scratch_dir("geo_graph_t2"), c = scratch_dir("geo_graph_t2_replay");
  const fs::path cache = scratch_dir("geo_graph_cache");
  const Result one = run_geo_pairs(csv, a, 1, {"--no-cache"});
  INFO(one.err);
  REQUIRE(one.exit_code == 0);
  // Threads 2 fills the cache; the third run replays all six samplers (multi-port entries with
  // string summaries) and must write exactly what the uncached one-thread run wrote.
  const Result two = run_geo_pairs(csv, b, 2, {"--cache-dir", cache.string()});
  INFO(two.err);
  REQUIRE(two.exit_code == 0);
  const Result replay = run_geo_pairs(csv, c, 2, {"--cache-dir", cache.string(), "--explain-cache"});
  INFO(replay.err);
  REQUIRE(replay.exit_code == 0);
  for (const char* set : kSets) CHECK_THAT(replay.err, Catch::Contains(std::string("  ") + set + ": hit, replays"));
  CHECK_THAT(replay.err, Catch::Contains("photos: runs (not cached)"));  // stats still reads the photos
  CHECK(fs::exists(a / "stats" / "datasets.md"));
  const Result check = check_python(kCheckScript, {csv.string(), a.string(), b.string()});
  CHECK(check.out.find("timelapse") != std::string::npos);
  check_python(kCheckScript, {csv.string(), a.string(), c.string()});
  CHECK(read_file(c / "stats" / "datasets.md") == read_file(a / "stats" / "datasets.md"));
}

TEST_CASE("a malformed CSV row stops the run naming file:line, or is skipped and counted", "[geo][graph]") {
  const fs::path dir = scratch_dir("geo_graph_bad");
  const fs::path csv = dir / "bad.csv";
  write_file(csv,
             "id,lat,lon,time,user\n"
             "1,40.75,-73.98,2013-06-14T10:00:00,alice\n"
             "2,40.75,-73.98,2013-06-14T10:05:00,bob\n"
             "3,40.75,not-a-number,2013-06-14T10:06:00,carol\n"
             "4,40.70,-73.99,2013-06-14T10:07:00,dave\n");
  const fs::path graph = dir / "g.yaml";
  write_file(graph, "seed: 1\nnodes:\n  photos: {type: geo.csv_photos, params: {path: " + csv.string() +
                        "}}\n  stats: {type: geo.pair_stats, params: {out: " + (dir / "stats").string() +
                        ", histogram_pairs: 10}}\nedges:\n  - photos.out -> stats.photos\n");
  const GraphRunner runner = GraphRunner::from_file(plugins(), graph.string());
  const GraphRun fail = runner.run();
  CHECK(fail.exit_code == 1);
  CHECK(fail.error.find(csv.string() + ":4: lon 'not-a-number'") != std::string::npos);

  const GraphRun skip = runner.run({"photos.on_bad_row=skip"});
  INFO(skip.message());
  REQUIRE(skip.exit_code == 0);
  CHECK(skip.log.find("skipped 1 malformed rows") != std::string::npos);
  CHECK(skip.log.find(":4: lon") != std::string::npos);
  const std::string summary = read_file(dir / "stats" / "summary.json");
  CHECK(summary.find("\"photos\": 3,") != std::string::npos);
  // Two photos share coordinates: exactly one pair within 1 m.
  CHECK(summary.find("{\"radius_m\": 1.0, \"pairs\": 1,") != std::string::npos);  // numbers as nlohmann writes doubles
}

TEST_CASE("inconsistent sampler settings are reported at load time", "[geo][graph]") {
  const GraphRun r = GraphRunner::from_file(plugins(), source_dir() + "/graphs/geo_pairs.yaml")
                         .validate({"ring.negative_max_m=20", "p10_2000.negative_min_m=5", "p1_2000.date_from=June"});
  CHECK(r.exit_code == 2);
  const std::string problems = r.problem_text();
  CHECK(problems.find("negative_max_m (20) is below negative_min_m (30)") != std::string::npos);
  CHECK(problems.find("negative_min_m (5) must exceed positive_radius_m (10)") != std::string::npos);
  CHECK(problems.find("date_from 'June' is not an ISO 8601 date") != std::string::npos);
}

TEST_CASE("each geo node's example graph runs as pasted", "[geo][graph]") {
  // The YAML in a node file's opening comment runs from "seed:" to the end of the comment; it
  // names repository paths, so they are rebased onto the source tree and a scratch directory.
  const fs::path out = scratch_dir("geo_examples");
  for (const char* file : {"csv_photos.cpp", "yfcc_photos.cpp", "pair_sampler.cpp", "pair_stats.cpp"}) {
    std::ifstream in(source_dir() + "/plugins/geo/" + file);
    REQUIRE(in);
    std::string line, yaml;
    bool inside = false;
    while (std::getline(in, line) && line.rfind("//", 0) == 0) {
      if (line.rfind("//   seed:", 0) == 0) inside = true;
      if (inside) yaml += line.substr(std::min<std::size_t>(5, line.size())) + "\n";
    }
    INFO(file << " example:\n" << yaml);
    REQUIRE(yaml.find("nodes:") != std::string::npos);
    auto replace_all = [&](const std::string& from, const std::string& to) {
      for (std::size_t p = 0; (p = yaml.find(from, p)) != std::string::npos; p += to.size()) yaml.replace(p, from.size(), to);
    };
    replace_all("tests/geo/data/", source_dir() + "/tests/geo/data/");
    replace_all("out/", (out / "").string());
    const GraphRun r = GraphRunner(plugins(), yaml, std::string(file) + ".yaml").run();
    INFO(r.message());
    CHECK(r.exit_code == 0);
  }
  CHECK(fs::exists(out / "pair_sampler_example" / "datasets.md"));
  CHECK(fs::exists(out / "pair_stats_example" / "density.png"));
  CHECK(fs::exists(out / "yfcc_example" / "datasets.md"));
}

TEST_CASE("geo.yfcc_photos on a handmade YFCC100M sample: kept rows, counted drops, located bad rows", "[geo][graph][yfcc]") {
  // tests/geo/data/yfcc_sample.tsv: 20 rows in the Webscope layout. Kept (accuracy 16, photos,
  // geotagged): 10. Dropped and counted: accuracy 12, 15 and 6; one without coordinates; one
  // video. Bad: line 10 latitude 'forty', 11 date 'not+a+date', 13 marker 2, 17 a truncated
  // row of 15 columns, 18 id '61852189x7'.
  const fs::path dir = scratch_dir("geo_yfcc_graph");
  const std::string tsv = source_dir() + "/tests/geo/data/yfcc_sample.tsv";
  const fs::path graph = dir / "g.yaml";
  write_file(graph, "seed: 1\nnodes:\n"
                    "  photos: {type: geo.yfcc_photos, params: {path: " + tsv + ", images: /data/yfcc, batch_size: 4}}\n"
                    "  save: {type: io.hdf5_writer, params: {path: " + (dir / "photos.h5").string() + ", group: photos}}\n"
                    "edges: [photos.out -> save]\n");
  const GraphRunner runner = GraphRunner::from_file(plugins(), graph.string());
  const GraphRun strict = runner.run();
  CHECK(strict.exit_code == 1);
  CHECK_THAT(strict.error, Catch::Contains(tsv + ":10: lat 'forty' is not a latitude"));

  const GraphRun r = runner.run({"photos.on_bad_row=skip"});
  INFO(r.message());
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.log, Catch::Contains("10 of 20 rows emitted; 1 without coordinates, 1 videos, 0 outside bbox, "
                                    "3 below min_accuracy, 5 bad rows skipped"));
  CHECK_THAT(r.log, Catch::Contains(":11: time 'not+a+date'"));
  CHECK_THAT(r.log, Catch::Contains(":13: photo/video marker '2' is not 0 or 1"));
  CHECK_THAT(r.log, Catch::Contains(":17: expected 23 fields, got 15"));
  CHECK_THAT(r.log, Catch::Contains(":18: id '61852189x7'"));
  const Result check = run_python(R"(
import sys, h5py
with h5py.File(sys.argv[1]) as f:
    g = f["photos"]
    print(list(g["id"][:]))
    print([p.decode() for p in g["path"][:]])
    print(g["title"][0].decode(), "|", g["description"][0].decode(), "|", g["user"][0].decode())
    print(g["lat"][0], g["lon"][0], g["time"][0], list(g["accuracy"][:]))
)", {(dir / "photos.h5").string()});
  INFO(check.err);
  REQUIRE(check.exit_code == 0);
  CHECK_THAT(check.out, Catch::Contains("[6185218911, 6185218912, 6185218916, 6185218917, 6185218919, 6185218922, 6185218924, "
                                        "6185218926, 6185218928, 6185218930]"));
  CHECK_THAT(check.out, Catch::Contains("['/data/yfcc/6185218911.jpg', '/data/yfcc/6185218912.jpg'"));
  CHECK_THAT(check.out, Catch::Contains("Brooklyn Bridge, at dawn | walked over \"early\" | 39019111@N00"));
  // 2012-02-16 09:56:37 read as UTC.
  CHECK_THAT(check.out, Catch::Contains("40.706086 -73.996864 1329386197 [16, 16, 16, 16, 16, 16, 16, 16, 16, 16]"));

  // min_accuracy 0 keeps every geotagged photo; the template names Flickr's own file layout.
  const GraphRun all = runner.run({"photos.on_bad_row=skip", "photos.min_accuracy=0"});
  INFO(all.message());
  REQUIRE(all.exit_code == 0);
  CHECK_THAT(all.log, Catch::Contains("13 of 20 rows emitted"));

  const GraphRun both = runner.validate({"photos.image_path=\"{farm}/{id}_{secret}.jpg\""});
  CHECK(both.exit_code == 2);
  CHECK_THAT(both.problem_text(), Catch::Contains("give either images"));
}

TEST_CASE("synthetic geotags: classes live apart, fuzziness mixes positives, output is deterministic", "[geo][graph]") {
  // 20k labelled ids (labels i % 5) from an h5py file, geotagged, sampled as P_{10,2000}; python
  // joins the pairs back to the true labels.
  const fs::path dir = scratch_dir("geo_synthetic");
  const Result make = run_python(R"(
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    ids = np.arange(20000, dtype=np.int64)
    f["id"] = ids
    f["label"] = ids % 5
)", {(dir / "labels.h5").string()});
  REQUIRE(make.exit_code == 0);
  auto run = [&](double fuzziness, const std::string& tag) {
    const GraphRun r = GraphRunner(plugins(), "seed: 4\nnodes:\n"
                      "  labels: {type: io.hdf5_reader, params: {path: " + (dir / "labels.h5").string() + ", batch_size: 1000}}\n"
                      "  tags: {type: geo.synthetic_geotags, params: {classes: 5, fuzziness: " + std::to_string(fuzziness) + "}}\n"
                      "  pairs: {type: geo.pair_sampler, params: {positive_radius_m: 10, negative_min_m: 2000, k_pos: 4, k_neg: 4}}\n"
                      "  save_pairs: {type: io.hdf5_writer, params: {path: " + (dir / (tag + "_pairs.h5")).string() + ", group: pairs}}\n"
                      "  save_photos: {type: io.hdf5_writer, params: {path: " + (dir / (tag + "_photos.h5")).string() + ", group: photos}}\n"
                      "edges: [labels -> tags, tags -> pairs.photos, pairs.out -> save_pairs, tags -> save_photos]\n",
                                   "g_" + tag + ".yaml")
                           .run();
    INFO(r.message());
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.log, Catch::Contains("20000 photos geotagged"));
  };
  run(0.0, "p0");
  run(0.0, "p0_again");
  run(0.4, "p40");
  check_python(R"(
import sys, h5py, numpy as np
d = sys.argv[1]
def load(tag):
    with h5py.File(f"{d}/{tag}_pairs.h5") as f:
        g = f["pairs"]
        pairs = {k: g[k][()] for k in ("anchor", "other", "distance_m", "label")}
    with h5py.File(f"{d}/{tag}_photos.h5") as f:
        g = f["photos"]
        photos = {k: g[k][()] for k in ("id", "label", "placed_class", "lat", "lon")}
    return pairs, photos
p0, photos0 = load("p0")
again, photos_again = load("p0_again")
assert all(np.array_equal(p0[k], again[k]) for k in p0), "not deterministic"
assert np.array_equal(photos0["lat"], photos_again["lat"])
label = dict(zip(photos0["id"].tolist(), photos0["label"].tolist()))
def same_rate(pairs, which):
    m = pairs["label"] == which
    a, o = pairs["anchor"][m], pairs["other"][m]
    return np.mean([label[x] == label[y] for x, y in zip(a.tolist(), o.tolist())]), m.sum()
pos0, npos0 = same_rate(p0, 1)
neg0, nneg0 = same_rate(p0, 0)
assert npos0 > 10000 and nneg0 > 10000, (npos0, nneg0)
assert pos0 == 1.0, pos0                  # p = 0: every positive is of the same class
assert neg0 < 0.15, neg0                  # 1/9: the class's other neighbourhood is > 2000 m away too
assert (p0["distance_m"][p0["label"] == 1] <= 10).all() and (p0["distance_m"][p0["label"] == 0] >= 2000).all()
p40, photos40 = load("p40")
moved = np.mean(photos40["placed_class"] != photos40["label"])
assert 0.25 < moved < 0.40, moved         # 0.4 placed at random, 4/5 of them in another class's area
pos40, _ = same_rate(p40, 1)
assert 0.3 < pos40 < 0.7, pos40           # fuzziness shows in the positives
print(f"p0 positives same-class {pos0:.3f}, p0.4 {pos40:.3f}, moved {moved:.3f}")
)", {dir.string()});
}

TEST_CASE("geo.yfcc_photos on 20k generated YFCC100M rows equals Python's csv and urllib reading", "[geo][graph][yfcc]") {
  const fs::path dir = scratch_dir("geo_yfcc_oracle");
  const fs::path tsv = dir / "yfcc.tsv";
  const Result gen = run_process({GEN_PHOTOS, "--rows", "20000", "--seed", "6", "--out", tsv.string(), "--format", "yfcc"});
  INFO(gen.err);
  REQUIRE(gen.exit_code == 0);
  const GraphRun r =
      GraphRunner(plugins(), "seed: 1\nnodes:\n"
                             "  photos: {type: geo.yfcc_photos, params: {path: " + tsv.string() + ", images: /photos, batch_size: 3000}}\n"
                             "  save: {type: io.hdf5_writer, params: {path: " + (dir / "photos.h5").string() + ", group: photos}}\n"
                             "edges: [photos.out -> save]\n")
          .run();
  INFO(r.message());
  REQUIRE(r.exit_code == 0);
  // The oracle: Python's csv module (tab, no quoting), urllib's percent-decoding and datetime.
  const Result check = run_python(R"(
import csv, sys, h5py, numpy as np
from datetime import datetime, timezone
from urllib.parse import unquote_plus
tsv, h5 = sys.argv[1:3]
ids, lat, lon, t, user, acc, title, desc = [], [], [], [], [], [], [], []
rows = 0
with open(tsv, newline="") as f:
    for c in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
        rows += 1
        assert len(c) == 23, c
        if c[22] != "0" or not c[10] or not c[11] or int(c[12]) < 16:
            continue
        ids.append(int(c[0])); lon.append(float(c[10])); lat.append(float(c[11])); acc.append(int(c[12]))
        t.append(int(datetime.strptime(c[3], "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=timezone.utc).timestamp()))
        user.append(c[1]); title.append(unquote_plus(c[6])); desc.append(unquote_plus(c[7]))
with h5py.File(h5) as f:
    g = f["photos"]
    assert np.array_equal(g["id"][:], ids), "id"
    assert np.array_equal(g["lat"][:], lat) and np.array_equal(g["lon"][:], lon), "coordinates"
    assert np.array_equal(g["time"][:], t), "time"
    assert np.array_equal(g["accuracy"][:], acc), "accuracy"
    assert [u.decode() for u in g["user"][:]] == user, "user"
    assert [x.decode() for x in g["title"][:]] == title, "title"
    assert [x.decode() for x in g["description"][:]] == desc, "description"
    assert [p.decode() for p in g["path"][:]] == [f"/photos/{i}.jpg" for i in ids], "path"
print("rows", rows, "kept", len(ids), "quoted", sum('"' in x for x in desc), "newlines", sum("\n" in x for x in desc))
)", {tsv.string(), (dir / "photos.h5").string()});
  INFO(check.out << check.err);
  REQUIRE(check.exit_code == 0);
  CHECK_THAT(check.out, Catch::Contains("rows 20000 kept"));
  CHECK_THAT(r.log, Catch::Contains(" of 20000 rows emitted; 0 outside bbox, "));
}

TEST_CASE("geo.position_embedding: distances between embeddings are metres; geo.pair_precision against Python", "[geo][graph]") {
  // 30k generated photos; a truth file keyed by user (pairs of one user's photos count as
  // "showing the same thing"), so the precision has a value a few lines of Python can recompute.
  const fs::path dir = scratch_dir("geo_position_precision");
  const fs::path csv = generated_photos();
  write_file(dir / "g.yaml", R"(
seed: 4
nodes:
  photos:    {type: geo.csv_photos, params: {path: )" + csv.string() + R"(}}
  where:     {type: geo.position_embedding}
  save:      {type: io.hdf5_writer, params: {path: )" + (dir / "where.h5").string() + R"(}}
  pairs:     {type: geo.pair_sampler, params: {positive_radius_m: 100, negative_min_m: 2000, k_pos: 2, k_neg: 2}}
  savepairs: {type: io.hdf5_writer, params: {path: )" + (dir / "pairs.h5").string() + R"(}}
  precision: {type: geo.pair_precision, params: {truth: )" + csv.string() + R"(, key_column: user, name: P100}}
  savep:     {type: io.hdf5_writer, params: {path: )" + (dir / "precision.h5").string() + R"(}}
edges: [photos.out -> where.in, where.out -> save.in, photos.out -> pairs.photos, pairs.out -> savepairs.in,
        pairs.out -> precision.in, precision.metrics -> savep.in]
)");
  const Result r = run_cli({"run", (dir / "g.yaml").string(), "--quiet", "--no-report", "--out", (dir / "run").string()});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  check_python(R"PY(
import csv, sys, math
import numpy as np, h5py
d, path = sys.argv[1], sys.argv[2]
rows = {int(r["id"]): r for r in csv.DictReader(open(path, newline=""))}
w = h5py.File(d + "/where.h5", "r")["data"]
ids, emb = w["id"][:], w["embedding"][:].astype(np.float64)
assert len(ids) == len(rows), (len(ids), len(rows))
def hav(a, b):
    la1, lo1, la2, lo2 = map(math.radians, (float(a["lat"]), float(a["lon"]), float(b["lat"]), float(b["lon"])))
    h = math.sin((la2 - la1) / 2) ** 2 + math.cos(la1) * math.cos(la2) * math.sin((lo2 - lo1) / 2) ** 2
    return 2 * 6371000 * math.asin(math.sqrt(h))
rng = np.random.default_rng(1)
worst = 0
for _ in range(3000):
    i, j = rng.integers(0, len(ids), 2)
    true = hav(rows[int(ids[i])], rows[int(ids[j])])
    if true < 50: continue
    got = float(np.linalg.norm(emb[i] - emb[j]))
    worst = max(worst, abs(got - true) / true)
assert worst < 6e-3, worst       # equirectangular about one photo: cos(lat) varies 0.5% over New York's 40 km
p = h5py.File(d + "/pairs.h5", "r")["data"]
a, o, l = p["anchor"][:], p["other"][:], p["label"][:]
same = np.array([rows[int(x)]["user"] == rows[int(y)]["user"] for x, y in zip(a, o)])
want_pos, want_neg = same[l == 1].mean(), (~same[l == 0]).mean()
m = h5py.File(d + "/precision.h5", "r")["data"]
got_pos, got_neg = float(m["label_precision"][0]), float(m["negative_precision"][0])
assert abs(got_pos - want_pos) < 1e-12 and abs(got_neg - want_neg) < 1e-12, (got_pos, want_pos, got_neg, want_neg)
assert int(m["positives"][0]) == int((l == 1).sum())
print("worst relative distance error", worst, "precision", got_pos, got_neg)
)PY",
               {dir.string(), csv.string()});
  const std::string record = read_file(dir / "run" / "run.json");
  CHECK_THAT(record, Catch::Contains("\"title\": \"pair set label precision\""));
}

TEST_CASE("a repeated photo id stops the reader naming the file and both lines; keep_first drops the later row; no "
          "photo is paired with itself", "[geo][graph]") {
  const fs::path dir = scratch_dir("geo_graph_duplicate_ids");
  const fs::path csv = dir / "dup.csv";
  // Photo 1 twice (lines 2 and 4), 2.2 m apart and by different users, so the sampler's own
  // duplicate removal (same place, user and second) would not catch it: a self-pair at 2.2 m.
  write_file(csv,
             "id,lat,lon,time,user\n"
             "1,40.75000,-73.98,2013-06-14T10:00:00,alice\n"
             "2,40.75001,-73.98,2013-06-14T10:05:00,bob\n"
             "1,40.75002,-73.98,2013-06-15T11:00:00,carol\n"
             "3,40.70000,-73.99,2013-06-14T10:07:00,dave\n"
             "4,40.70001,-73.99,2013-06-14T10:08:00,erin\n");
  const fs::path graph = dir / "g.yaml";
  write_file(graph, "seed: 1\nnodes:\n  photos: {type: geo.csv_photos, params: {path: " + csv.string() +
                        "}}\n  pairs: {type: geo.pair_sampler, params: {positive_radius_m: 10, negative_min_m: 2000, "
                        "k_pos: 100, k_neg: 100}}\n  save: {type: io.hdf5_writer, params: {path: " +
                        (dir / "pairs.h5").string() + ", group: pairs}}\nedges:\n  - photos.out -> pairs.photos\n"
                        "  - pairs.out -> save.in\n");
  const GraphRunner runner = GraphRunner::from_file(plugins(), graph.string());
  const GraphRun fail = runner.run();
  CHECK(fail.exit_code == 1);
  CHECK(fail.error.find(csv.string() + ":4: photo id 1 repeats the id of line 2") != std::string::npos);
  CHECK(fail.error.find("duplicate_ids: keep_first") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "pairs.h5"));

  const GraphRun keep = runner.run({"photos.duplicate_ids=keep_first"});
  INFO(keep.message());
  REQUIRE(keep.exit_code == 0);
  CHECK(keep.log.find("dropped 1 rows repeating an earlier row's photo id") != std::string::npos);
  CHECK(keep.log.find(":4: photo id 1 repeats the id of line 2") != std::string::npos);
  // Every pair joins two different photos; photo 1 is line 2's (its only positive is photo 2).
  check_python(R"PY(
import sys, h5py
g = h5py.File(sys.argv[1], "r")["pairs"]
a, o, l = g["anchor"][()], g["other"][()], g["label"][()]
pairs = sorted(zip(a.tolist(), o.tolist(), l.tolist()))
assert len(pairs) > 0, "no pairs"
assert all(x != y for x, y, _ in pairs), f"a photo paired with itself: {pairs}"
assert sorted(y for x, y, lab in pairs if x == 1 and lab == 1) == [2], pairs
)PY",
               {(dir / "pairs.h5").string()});

  // Two readers of the same file into one sampler: every id arrives twice, which the sampler
  // itself refuses rather than pairing each photo with its copy.
  const fs::path twice = dir / "twice.yaml";
  write_file(twice, "seed: 1\nnodes:\n  a: {type: geo.csv_photos, params: {path: " + csv.string() +
                        ", duplicate_ids: keep_first}}\n  b: {type: geo.csv_photos, params: {path: " + csv.string() +
                        ", duplicate_ids: keep_first}}\n  pairs: {type: geo.pair_sampler, params: {positive_radius_m: 10, "
                        "negative_min_m: 2000, duplicate_time_s: -1}}\n  save: {type: io.hdf5_writer, params: {path: " +
                        (dir / "twice.h5").string() + ", group: pairs}}\nedges:\n  - a.out -> pairs.photos\n"
                        "  - b.out -> pairs.photos\n  - pairs.out -> save.in\n");
  const GraphRun both = GraphRunner::from_file(plugins(), twice.string()).run();
  CHECK(both.exit_code == 1);
  CHECK(both.error.find("photo id 1 appears twice among the photos") != std::string::npos);
  CHECK(both.error.find("paired with itself") != std::string::npos);
}

TEST_CASE("a k_neg asking for every pair stops at max_pairs with an error naming it; the run exits 1", "[geo][graph]") {
  const fs::path dir = scratch_dir("geo_graph_max_pairs");
  const fs::path graph = dir / "g.yaml";
  write_file(graph, "seed: 1\nnodes:\n  photos: {type: geo.csv_photos, params: {path: " + source_dir() +
                        "/tests/geo/data/photos_small.csv, on_bad_row: skip}}\n  pairs: {type: geo.pair_sampler, params: "
                        "{positive_radius_m: 10, negative_min_m: 2000, k_neg: 1000000000, max_pairs: 20000}}\n"
                        "  save: {type: io.hdf5_writer, params: {path: " + (dir / "pairs.h5").string() +
                        ", group: pairs}}\nedges:\n  - photos.out -> pairs.photos\n  - pairs.out -> save.in\n");
  const GraphRunner runner = GraphRunner::from_file(plugins(), graph.string());
  const GraphRun r = runner.run();
  INFO(r.message());
  CHECK(r.exit_code == 1);
  CHECK(r.error.find("node 'pairs' (geo.pair_sampler)") != std::string::npos);
  CHECK(r.error.find("more than max_pairs = 20000 pair rows") != std::string::npos);
  CHECK(r.error.find("k_neg = 1000000000") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "pairs.h5"));  // a failed run never replaces an output
  // The same set within a bound it fits: every anchor with a positive takes every photo beyond
  // 2 km as a negative.
  const GraphRun ok = runner.run({"pairs.max_pairs=100000000"});
  INFO(ok.message());
  CHECK(ok.exit_code == 0);
  CHECK(fs::exists(dir / "pairs.h5"));
}

namespace {

// The pair columns of a run's collected output, in emission order.
struct PairColumns {
  std::vector<std::int64_t> anchor, other, label;
  std::vector<double> distance_m;
  void append(const GraphRun& r) {
    for (const auto& rec : r.records("pairs.out")) {
      const auto add = [](auto& to, const embedflow::Array& a, auto tag) {
        const auto* d = a.data<decltype(tag)>();
        to.insert(to.end(), d, d + a.numel());
      };
      add(anchor, rec->get("anchor"), std::int64_t{});
      add(other, rec->get("other"), std::int64_t{});
      add(label, rec->get("label"), std::int64_t{});
      add(distance_m, rec->get("distance_m"), double{});
    }
  }
};

}  // namespace

TEST_CASE("geo.pair_sampler sharded over W ranks: disjoint anchors whose rows concatenate to the unsharded run",
          "[geo][graph][shard]") {
  GraphRunner runner(plugins(), "seed: 3\nnodes:\n  photos: {type: geo.csv_photos, params: {path: " + source_dir() +
                                           "/tests/geo/data/photos_small.csv, on_bad_row: skip}}\n"
                                           "  pairs: {type: geo.pair_sampler, params: {positive_radius_m: 10, "
                                           "negative_min_m: 2000, k_pos: 3, k_neg: 3, batch_size: 7}}\n"
                                           "edges:\n  - photos.out -> pairs.photos\n");
  runner.collect("pairs.out");
  const GraphRun whole_run = runner.run();
  INFO(whole_run.message());
  REQUIRE(whole_run.exit_code == 0);
  PairColumns whole;
  whole.append(whole_run);
  REQUIRE(whole.anchor.size() > 50);
  for (int world : {2, 3}) {
    PairColumns joined;
    std::vector<std::set<std::int64_t>> anchors(static_cast<std::size_t>(world));
    for (int rank = 0; rank < world; ++rank) {
      const GraphRun r = runner.run({"pairs.shard_world_size=" + std::to_string(world), "pairs.shard_rank=" + std::to_string(rank)});
      INFO(r.message());
      REQUIRE(r.exit_code == 0);
      PairColumns mine;
      mine.append(r);
      CHECK(mine.anchor.size() < whole.anchor.size());  // a share, not everything
      anchors[static_cast<std::size_t>(rank)].insert(mine.anchor.begin(), mine.anchor.end());
      joined.append(r);
    }
    INFO("world " << world);
    for (int a = 0; a < world; ++a)
      for (int b = a + 1; b < world; ++b)
        for (std::int64_t id : anchors[static_cast<std::size_t>(a)]) CHECK(anchors[static_cast<std::size_t>(b)].count(id) == 0);
    CHECK(joined.anchor == whole.anchor);
    CHECK(joined.other == whole.other);
    CHECK(joined.label == whole.label);
    CHECK(joined.distance_m == whole.distance_m);
  }
  // WORLD_SIZE / RANK through the environment, as torchrun sets them, give rank 1's share.
  ::setenv("WORLD_SIZE", "2", 1);
  ::setenv("RANK", "1", 1);
  const GraphRun env = runner.run({"pairs.shard_world_size=0"});
  ::unsetenv("WORLD_SIZE");
  ::unsetenv("RANK");
  const GraphRun explicit_rank = runner.run({"pairs.shard_world_size=2", "pairs.shard_rank=1"});
  REQUIRE(env.exit_code == 0);
  PairColumns from_env, from_params;
  from_env.append(env);
  from_params.append(explicit_rank);
  CHECK(from_env.anchor == from_params.anchor);
  CHECK(from_env.other == from_params.other);
  // A rank outside the world is a located error.
  const GraphRun bad = runner.run({"pairs.shard_world_size=3", "pairs.shard_rank=3"});
  CHECK(bad.exit_code != 0);
  CHECK(bad.error.find("'pairs'") != std::string::npos);
  CHECK(bad.error.find("shard_world_size / shard_rank: rank 3 is outside [0, 3)") != std::string::npos);
}
