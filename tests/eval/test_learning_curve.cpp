// eval.learning_curve and eval.curve_chart in whole graphs run in process: per-step P@1, R-precision and MAP@R
// of embeddings tagged with a training step equal an independent NumPy computation; the chart
// holds every run; a stream without `step` is an error naming the field.
#include <catch2/catch.hpp>

#include <opencv2/imgcodecs.hpp>

#include "harness.hpp"

using namespace embedflow::test;
namespace fs = std::filesystem;

TEST_CASE("eval.learning_curve matches NumPy per step; eval.curve_chart draws every run", "[eval][learning_curve]") {
  const fs::path dir = scratch_dir("eval_learning_curve");
  const std::string h5 = (dir / "snapshots.h5").string();
  // Three steps of 90 embeddings (3 classes, 4 dims): class structure sharpens with the step.
  Result made = run_python(R"PY(
import sys, numpy as np, h5py
rng = np.random.default_rng(5)
labels = np.repeat(np.arange(3), 30)
means = rng.normal(size=(3, 4))
emb, lab, step = [], [], []
for s, noise in ((0, 3.0), (50, 1.0), (100, 0.3)):
    emb.append((means[labels] + noise * rng.normal(size=(90, 4))).astype(np.float32))
    lab.append(labels)
    step.append(np.full(90, s))
with h5py.File(sys.argv[1], "w") as f:
    f["embedding"], f["label"], f["step"] = np.concatenate(emb), np.concatenate(lab).astype(np.int64), np.concatenate(step).astype(np.int64)
)PY",
                           {h5});
  INFO(made.err);
  REQUIRE(made.exit_code == 0);
  const fs::path out = dir / "out";
  fs::create_directories(out);
  GraphRun r =
      GraphRunner(plugins(),
                  "seed: 1\nnodes:\n"
                  "  data:   {type: io.hdf5_reader, params: {path: " + h5 + ", batch_size: 32}}\n"
                  "  euclid: {type: eval.learning_curve, params: {name: euclidean, out: " + (out / "euclid").string() + "}}\n"
                  "  cosine: {type: eval.learning_curve, params: {name: cosine, distance: cosine}}\n"
                  "  chart:  {type: eval.curve_chart, params: {metric: map_at_r, out: " + (out / "chart").string() + "}}\n"
                  "edges: [data.out -> euclid.in, data.out -> cosine.in, euclid.curve -> chart.curves, cosine.curve -> chart.curves]\n",
                  "curve.yaml")
          .run();
  INFO(r.message());
  REQUIRE(r.exit_code == 0);
  check_python(R"PY(
import sys, csv, numpy as np, h5py
h5, euclid_csv, chart_csv = sys.argv[1:4]
with h5py.File(h5) as f:
    E, L, S = f["embedding"][()].astype(np.float64), f["label"][()], f["step"][()]
def metrics(x, y, cosine):
    if cosine:
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
    d = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    np.fill_diagonal(d, np.inf)
    order = np.argsort(d, axis=1, kind="stable")
    p1, rp, mr = [], [], []
    for i in range(len(y)):
        R = (y == y[i]).sum() - 1
        rel = (y[order[i, :R]] == y[i]).astype(float)
        p1.append(rel[0]); rp.append(rel.mean())
        mr.append((np.cumsum(rel) / np.arange(1, R + 1) * rel).sum() / R)
    return np.mean(p1), np.mean(rp), np.mean(mr)
rows = list(csv.DictReader(open(euclid_csv)))
assert [int(r["step"]) for r in rows] == [0, 50, 100], rows
for r in rows:
    m = S == int(r["step"])
    want = metrics(E[m], L[m], False)
    got = (float(r["p_at_1"]), float(r["r_precision"]), float(r["map_at_r"]))
    assert np.allclose(got, want, rtol=0, atol=1e-9), (r, want)
chart = list(csv.DictReader(open(chart_csv)))
assert sorted({c["run"] for c in chart}) == ["cosine", "euclidean"], chart
for c in chart:
    if c["run"] == "cosine":
        m = S == int(c["step"])
        assert abs(float(c["map_at_r"]) - metrics(E[m], L[m], True)[2]) < 1e-9, c
maps = [float(r["map_at_r"]) for r in rows]
assert maps[0] < maps[1] < maps[2], maps
print("ok", maps)
)PY",
               {h5, (out / "euclid.csv").string(), (out / "chart.csv").string()});
  for (const char* png : {"euclid.png", "chart.png"}) {
    const cv::Mat img = cv::imread((out / png).string());
    INFO(png);
    CHECK(img.cols > 100);
  }

  // Embeddings without a step (torch.embed in its default mode) are a located error.
  GraphRun bad = GraphRunner(plugins(),
                             "seed: 1\nnodes:\n"
                             "  data:  {type: io.hdf5_reader, params: {path: " + h5 + ", fields: [embedding, label], batch_size: 32}}\n"
                             "  curve: {type: eval.learning_curve}\n"
                             "edges: [data.out -> curve.in]\n",
                             "nostep.yaml")
                     .run();
  CHECK(bad.exit_code != 0);
  CHECK_THAT(bad.message(), Catch::Contains("curve") && Catch::Contains("step"));
}
