// geo.spatial_split: no leak across its parts, checked by brute force in Python (for every test
// photo the nearest training and validation photo by numpy haversine, for every validation photo
// the nearest training photo, each farther than buffer_m), on gen_photos' city and on a random
// table with repeated coordinates; fractions of cells near those asked; the same split for the
// same seed and another for another; located errors for bad parameters.
#include <catch2/catch.hpp>

#include <sstream>

#include "cli.hpp"
#include "embedflow/error.hpp"
#include "spatial_split.hpp"

using namespace embedflow;
using namespace embedflow::test;
namespace fs = std::filesystem;

namespace {

// The leak check and the figures: reads the split table (part column, buffer rows marked) and
// prints "cells"/"photos"/"nearest" lines for the test to read.
const char* kLeakCheck = R"PY(
import sys, h5py, numpy as np
h5, buffer_m, cell_m = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
with h5py.File(h5) as f:
    g = f["photos"]
    lat, lon = g["lat"][:], g["lon"][:]
    part = np.array([p.decode() for p in g["part"][:]])
R = 6371000.0
def nearest(a, b):
    # For each photo of mask a, the great-circle distance to the nearest photo of mask b.
    la, lo = np.radians(lat[a])[:, None], np.radians(lon[a])[:, None]
    lb, lob = np.radians(lat[b])[None, :], np.radians(lon[b])[None, :]
    out = np.full(la.shape[0], np.inf)
    for s in range(0, lb.shape[1], 2000):
        h = np.sin((lb[:, s:s+2000] - la) / 2) ** 2 + np.cos(la) * np.cos(lb[:, s:s+2000]) * np.sin((lob[:, s:s+2000] - lo) / 2) ** 2
        out = np.minimum(out, (2 * R * np.arcsin(np.sqrt(np.minimum(h, 1.0)))).min(axis=1))
    return out
problems = []
for held, seen in (("test", "train"), ("test", "validation"), ("validation", "train")):
    a, b = part == held, part == seen
    if a.sum() == 0 or b.sum() == 0:
        problems.append(f"{held} or {seen} is empty"); continue
    d = nearest(a, b)
    print("nearest", held, seen, d.min())
    if d.min() <= buffer_m:
        problems.append(f"{int((d <= buffer_m).sum())} {held} photos have a {seen} photo within {buffer_m} m (nearest {d.min():.2f} m)")
# A buffer photo is one of a train or validation cell with a held-out photo within buffer_m.
buf = part == "buffer"
if buf.sum():
    d = np.minimum(nearest(buf, part == "test"), nearest(buf, (part == "validation") | (part == "test")))
    print("buffer_farthest", d.max())
    if d.max() > buffer_m: problems.append(f"a buffer photo has no held-out photo within {buffer_m} m ({d.max():.2f} m)")
for name in ("train", "validation", "test", "buffer"):
    print("photos", name, int((part == name).sum()))
for p in problems: print("PROBLEM:", p)
sys.exit(1 if problems else 0)
)PY";

std::string split_graph(const fs::path& csv, const fs::path& h5, const std::string& params) {
  return "seed: 1\nnodes:\n"
         "  photos: {type: geo.csv_photos, params: {path: " + csv.string() + ", text: false, batch_size: 1000}}\n"
         "  split: {type: geo.spatial_split, params: {" + params + ", buffer_rows: mark, batch_size: 777}}\n"
         "  save: {type: io.hdf5_writer, params: {path: " + h5.string() + ", group: photos}}\n"
         "  train: {type: core.sink}\n  validation: {type: core.sink}\n  test: {type: core.sink}\n"
         "edges: [photos.out -> split.photos, split.out -> save, split.train -> train, split.validation -> validation, "
         "split.test -> test]\n";
}

}  // namespace

TEST_CASE("geo.spatial_split on gen_photos' city: no test photo has a training photo within buffer_m", "[geo][split]") {
  const fs::path dir = scratch_dir("geo_spatial_split_city");
  const fs::path csv = dir / "meta.csv";
  // The photo experiment's city (graphs/geo_photo_embeddings.yaml's gen_photos line; rendering
  // the images does not move the geotags).
  const Result gen = run_process({GEN_PHOTOS, "--rows", "10000", "--seed", "1", "--timelapse-frames", "200", "--out", csv.string()});
  INFO(gen.err);
  REQUIRE(gen.exit_code == 0);
  const std::string params = "cell_m: 500, buffer_m: 100, pair_radius_m: 10, test_fraction: 0.2, validation_fraction: 0.1";
  run_graph_file_ok(dir, "g.yaml", split_graph(csv, dir / "split.h5", params), {"--no-cache", "--out", (dir / "run").string()});
  const Result check = check_python(kLeakCheck, {(dir / "split.h5").string(), "100", "500"});
  INFO(check.out);
  // Each part keeps photos; the buffer takes some but not most.
  std::int64_t train = -1, validation = -1, test = -1, buffer = -1;
  std::istringstream lines(check.out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream w(line);
    std::string tag, name;
    std::int64_t n;
    if (w >> tag >> name >> n && tag == "photos")
      (name == "train" ? train : name == "validation" ? validation : name == "test" ? test : buffer) = n;
  }
  CHECK(train + validation + test + buffer == 10000);
  CHECK(train > test);
  CHECK(test > 0);
  CHECK(validation > 0);
  CHECK(buffer > 0);
  CHECK(buffer < train);
  // The node's published results table (run.json) gives the oracle's counts, and cells per part.
  check_python(R"PY(
import json, sys
want = dict(zip(("train", "validation", "test", "buffer"), map(int, sys.argv[2:6])))
with open(sys.argv[1]) as f:
    table = next(t for t in json.load(f)["results"] if t["title"] == "spatial split")
rows = {r["label"]: r["values"] for r in table["rows"]}
for part, n in want.items():
    assert rows[part]["photos"] == n, (part, rows[part], n)
    assert rows[part]["cell_m"] == 500 and rows[part]["buffer_m"] == 100
for part in ("train", "validation", "test"):
    assert rows[part]["cells"] > 0, part
    print("cells", part, rows[part]["cells"])
)PY",
               {(dir / "run" / "run.json").string(), std::to_string(train), std::to_string(validation), std::to_string(test),
                std::to_string(buffer)});
}

TEST_CASE("geo.spatial_split on a random table: leak-free, fractions as asked, the same for a seed", "[geo][split]") {
  const fs::path dir = scratch_dir("geo_spatial_split_random");
  const fs::path csv = dir / "random.csv";
  // 6000 photos over ~20 x 15 km near 48.85 N, a third of them on 40 repeated venue coordinates.
  const Result make = run_python(R"PY(
import sys, numpy as np
rng = np.random.default_rng(3)
n = 6000
lat = 48.80 + rng.random(n) * 0.14
lon = 2.20 + rng.random(n) * 0.27
venues = rng.integers(0, n, 40)
pick = rng.random(n) < 1 / 3
lat[pick] = lat[venues[rng.integers(0, 40, pick.sum())]]
lon[pick] = lon[venues[rng.integers(0, 40, pick.sum())]]
with open(sys.argv[1], "w") as f:
    f.write("id,lat,lon,time,user\n")
    for i in range(n):
        f.write(f"{i + 1},{lat[i]:.7f},{lon[i]:.7f},{1371213296 + i},u{i % 97}\n")
)PY", {csv.string()});
  INFO(make.err);
  REQUIRE(make.exit_code == 0);
  const std::string params = "cell_m: 1000, buffer_m: 250, test_fraction: 0.25, validation_fraction: 0.15";
  run_graph_file_ok(dir, "a.yaml", split_graph(csv, dir / "a.h5", params), {"--no-cache"});
  check_python(kLeakCheck, {(dir / "a.h5").string(), "250", "1000"});
  // The same seed gives the same parts, another seed other parts.
  run_graph_file_ok(dir, "b.yaml", split_graph(csv, dir / "b.h5", params), {"--no-cache"});
  run_graph_file_ok(dir, "c.yaml", split_graph(csv, dir / "c.h5", params), {"--no-cache", "--seed", "2"});
  check_python(R"PY(
import sys, h5py, numpy as np
def parts(p):
    with h5py.File(p) as f: return np.array([x.decode() for x in f["photos"]["part"][:]])
a, b, c = (parts(p) for p in sys.argv[1:4])
assert np.array_equal(a, b), "same seed, other parts"
assert (a != c).mean() > 0.2, f"another seed changed only {(a != c).mean():.3f} of the parts"
)PY",
               {(dir / "a.h5").string(), (dir / "b.h5").string(), (dir / "c.h5").string()});
  // Fractions of the cells: the core function over the same coordinates, 600-odd cells.
  std::vector<double> lat, lon;
  for (int i = 0; i < 200; ++i)
    for (int j = 0; j < 200; ++j) {
      lat.push_back(48.80 + 0.0009 * i);
      lon.push_back(2.20 + 0.00137 * j);
    }
  geo::SpatialSplitOptions o;
  o.cell_m = 500;
  o.test_fraction = 0.25;
  o.validation_fraction = 0.15;
  o.buffer_m = 0;
  geo::SpatialSplitSummary s;
  geo::spatial_split(lat, lon, o, &s);
  const double cells = static_cast<double>(s.cells[0] + s.cells[1] + s.cells[2]);
  INFO("cells " << s.cells[0] << " " << s.cells[1] << " " << s.cells[2]);
  CHECK(cells > 600);
  CHECK(std::abs(s.cells[2] / cells - 0.25) < 0.05);
  CHECK(std::abs(s.cells[1] / cells - 0.15) < 0.05);
  CHECK(s.photos[3] == 0);  // distinct grid points: a zero buffer sets none aside
}

TEST_CASE("geo.spatial_split's bad parameters are located errors", "[geo][split]") {
  const fs::path dir = scratch_dir("geo_spatial_split_errors");
  const std::string csv = source_dir() + "/tests/geo/data/photos_small.csv";
  auto graph = [&](const std::string& params) {
    return "seed: 1\nnodes:\n"
           "  photos: {type: geo.csv_photos, params: {path: " + csv + ", on_bad_row: skip}}\n"
           "  split: {type: geo.spatial_split, params: {" + params + "}}\n"
           "  show: {type: core.sink}\nedges: [photos.out -> split.photos, split.test -> show]\n";
  };
  struct Case {
    const char* params;
    const char* message;
  };
  for (const Case& c : {Case{"cell_m: 0", "cell_m must be > 0 metres, got 0"},
                        Case{"cell_m: -5", "cell_m must be > 0 metres, got -5"},
                        Case{"buffer_m: -1", "buffer_m must be >= 0 metres, got -1"},
                        Case{"buffer_m: 200000", "buffer_m 200000 is beyond the supported 90000 m"},
                        Case{"buffer_m: 5, pair_radius_m: 10", "buffer_m 5 is below pair_radius_m 10"},
                        Case{"test_fraction: 0.7, validation_fraction: 0.5", "sum to more than 1"}}) {
    const Result r = validate_in(dir, "g.yaml", graph(c.params));
    INFO(c.params << "\n" << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("g.yaml:4"));
    CHECK_THAT(r.err, Catch::Contains(c.message));
  }
  // A valid graph runs; the core function refuses the same values for direct callers.
  run_graph_file_ok(dir, "ok.yaml", graph("cell_m: 300, buffer_m: 50"), {"--no-cache"});
  geo::SpatialSplitOptions o;
  o.cell_m = 0;
  CHECK_THROWS_AS(geo::spatial_split({40.7}, {-73.9}, o), ConfigError);
  o.cell_m = 10;
  o.buffer_m = -1;
  CHECK_THROWS_WITH(geo::spatial_split({40.7}, {-73.9}, o), Catch::Contains("buffer_m must be >= 0"));
}
