// The evaluators behind graphs/siamese_autoencoder.yaml, through the CLI on h5py-written data:
// eval.reconstruction against NumPy (u8 HWC and f32 CHW images), eval.clustering with
// retrieval: false, eval.report merging one method's retrieval, clustering and reconstruction
// records into one row (and refusing a metric reported twice), and eval.scatter's PNG.
#include <catch2/catch.hpp>

#include <opencv2/imgcodecs.hpp>

#include "cli.hpp"

using namespace embedflow::test;
namespace fs = std::filesystem;

namespace {

// 60 images of 3 classes: u8 HWC images (12x10, 1 channel), noisy f32 CHW reconstructions, the
// same images as f32 CHW, and 4-d embeddings in three clusters.
const char* kWrite = R"PY(
import sys, numpy as np, h5py
rng = np.random.default_rng(5)
n = 60
lab = np.repeat(np.arange(3), 20).astype(np.int64)
img = rng.integers(0, 256, (n, 12, 10, 1), dtype=np.uint8)
chw = img.transpose(0, 3, 1, 2).astype(np.float32) / 255
rec = np.clip(chw + 0.1 * rng.standard_normal(chw.shape).astype(np.float32), 0, 1).astype(np.float32)
emb = (np.eye(4)[lab] * 8 + rng.standard_normal((n, 4))).astype(np.float32)
with h5py.File(sys.argv[1] + "/data.h5", "w") as f:
    g = f.create_group("test")
    g["id"], g["label"], g["image"], g["reconstruction"], g["embedding"] = np.arange(n), lab, img, rec, emb
    h = f.create_group("chw")
    h["label"], h["image"], h["reconstruction"] = lab, chw, rec
mse = np.mean((rec.astype(np.float64) - img.transpose(0, 3, 1, 2) / 255.0) ** 2)
print(repr(mse))
)PY";

const char* kGraph = R"(seed: 3
nodes:
  data:  {type: io.hdf5_reader, params: {path: data.h5, object: test, batch_size: 16}}
  chw:   {type: io.hdf5_reader, params: {path: data.h5, object: chw, batch_size: 7}}
  ret:   {type: eval.retrieval, params: {name: M, out: out/ret, bootstrap: 0}}
  km:    {type: eval.clustering, params: {name: M, out: out/km, clusters: 3, retrieval: false}}
  rec:   {type: eval.reconstruction, params: {name: M, out: out/rec}}
  rec2:  {type: eval.reconstruction, params: {name: CHW}}
  plot:  {type: eval.scatter, params: {out: out/scatter.png, title: test, dims: [0, 2], label_names: [a, b]}}
  table: {type: eval.report, params: {out: out/table, columns: [recon_mse, map_at_r, p_at_1, nmi, ami]}}
edges:
  - data.out -> ret.query
  - data.out -> km.query
  - data.out -> rec.in
  - chw.out -> rec2.in
  - data.out -> plot.in
  - ret.metrics -> table
  - km.metrics -> table
  - rec.metrics -> table
  - rec2.metrics -> table
)";

// Runs kGraph with its text `from` changed to `to`, written to dir/name, from `dir`.
Result run_graph_changed(const fs::path& dir, const std::string& name, const std::string& from, const std::string& to) {
  std::string g = kGraph;
  g.replace(g.find(from), from.size(), to);
  write_file(dir / name, g);
  return run_cli_in(dir, {"run", name, "--quiet"});
}

}  // namespace

TEST_CASE("eval.reconstruction, clustering without retrieval, report rows merged by method, scatter PNG",
          "[eval][graph][autoencoder]") {
  const fs::path dir = scratch_dir("eval_autoencoder");
  const Result w = run_python(kWrite, {dir.string()});
  INFO(w.err);
  REQUIRE(w.exit_code == 0);
  const double mse = std::stod(w.out);
  write_file(dir / "g.yaml", kGraph);
  const Result r = run_cli_in(dir, {"run", "g.yaml", "--quiet"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);

  const std::string table = read_file(dir / "out/table.md");
  INFO(table);
  CHECK_THAT(table, Catch::Contains("| method | recon. MSE | MAP@R % | P@1 % | NMI | AMI |"));
  // One row for M with every column filled from three records; CHW has only its error, and both
  // image layouts give NumPy's MSE.
  char mse_cell[32];
  std::snprintf(mse_cell, sizeof mse_cell, "%.4g", mse);
  CHECK_THAT(table, Catch::Contains(std::string("| CHW | ") + mse_cell + " | n/a | n/a | n/a | n/a |"));
  CHECK_THAT(table, Catch::Contains(std::string("| M | ") + mse_cell + " | "));
  check_python(R"PY(
import sys, json
from sklearn.metrics import normalized_mutual_info_score
out = sys.argv[1]
rec, km, ret = (json.load(open(f"{out}/{n}.json")) for n in ("rec", "km", "ret"))
rows = {r["method"]: r for r in json.load(open(f"{out}/table.json"))["methods"]}
m = rows["M"]
assert abs(rec["mse"] - float(sys.argv[2])) < 1e-9 * float(sys.argv[2]), (rec["mse"], sys.argv[2])
assert m["recon_MSE"] == rec["mse"] and m["NMI"] == km["clustering"]["NMI"] and m["MAP@R"] == ret["metrics"]["MAP@R"], m
assert sorted(rec["mse_by_label"]) == ["0", "1", "2"]
assert "cmc" not in km and km["clustering"]["clusters"] == 3
# Three well separated clusters: k-means recovers the classes.
assert km["clustering"]["NMI"] > 0.9, km
print("ok")
)PY",
               {(dir / "out").string(), w.out});

  // The scatter: 800 px of plot plus the legend at its right; classes 0 and 1 named, 2 not.
  const cv::Mat img = cv::imread((dir / "out/scatter.png").string(), cv::IMREAD_COLOR);
  REQUIRE(!img.empty());
  CHECK(img.cols > 800);
  CHECK(img.rows == 640);

  SECTION("two evaluators giving one method the same metric is an error naming both") {
    const Result d = run_graph_changed(dir, "dup.yaml", "name: CHW", "name: M");
    CHECK(d.exit_code == 1);
    CHECK_THAT(d.err, Catch::Contains("two metrics records of method 'M' both carry recon_mse"));
  }
  SECTION("scatter dims beyond the embedding are named") {
    const Result d = run_graph_changed(dir, "dims.yaml", "dims: [0, 2]", "dims: [0, 4]");
    CHECK(d.exit_code == 1);
    CHECK_THAT(d.err, Catch::Contains("dims [0, 4] need embeddings of more than 4 dims"));
  }
}
