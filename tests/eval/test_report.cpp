// eval.report's `columns`, `x`, `x_label` and `plot_metrics` through the CLI: four eval.retrieval
// nodes on tiny h5py-written features (three of a "sweep", one baseline) feed one report; the
// Markdown table must carry exactly the requested columns with each retrieval's own JSON values,
// the report's JSON must repeat them, the metrics-vs-x PNG must decode, and bad parameters must
// be load-time errors naming the node.
#include <catch2/catch.hpp>

#include <opencv2/imgcodecs.hpp>

#include "cli.hpp"

using namespace embedflow::test;
namespace fs = std::filesystem;

namespace {

// Three classes of ten 8-d points around the unit axes, with more noise per file, so the four
// methods score clearly differently.
const char* kWriteFeatures = R"PY(
import sys
import numpy as np, h5py
rng = np.random.default_rng(3)
for i, noise in enumerate([0.3, 0.8, 1.5, 1.0]):
    lab = np.repeat(np.arange(3), 10)
    X = np.eye(8)[lab] + noise * rng.standard_normal((30, 8))
    with h5py.File(f"{sys.argv[1]}/f{i}.h5", "w") as f:
        g = f.create_group("query")
        g["embedding"] = X.astype(np.float32)
        g["label"] = lab.astype(np.int64)
)PY";

const char* kGraph = R"(seed: 1
nodes:
  r0: {type: io.hdf5_reader, params: {path: f0.h5, object: query, batch_size: 16}}
  r1: {type: io.hdf5_reader, params: {path: f1.h5, object: query, batch_size: 16}}
  r2: {type: io.hdf5_reader, params: {path: f2.h5, object: query, batch_size: 16}}
  r3: {type: io.hdf5_reader, params: {path: f3.h5, object: query, batch_size: 16}}
  e0: {type: eval.retrieval, params: {name: "sweep p=0", out: out/e0, bootstrap: 0, max_rank: 10, ranks: [1, 5]}}
  e1: {type: eval.retrieval, params: {name: "sweep p=0.5", out: out/e1, bootstrap: 0, max_rank: 10, ranks: [1, 5]}}
  e2: {type: eval.retrieval, params: {name: "sweep p=1", out: out/e2, bootstrap: 0, max_rank: 10, ranks: [1, 5]}}
  e3: {type: eval.retrieval, params: {name: baseline, out: out/e3, bootstrap: 0, max_rank: 10, ranks: [1, 5]}}
  report:
    type: eval.report
    params:
      out: out/table
      columns: [p_at_1, r_precision, map_at_r, map]
      x: {"sweep p=0": 0, "sweep p=0.5": X_HALF, "sweep p=1": 1.0}
      x_label: label fuzziness p
      plot_metrics: [map_at_r, p_at_1]
  plain: {type: eval.report, params: {out: out/plain, ranks: []}}
edges:
  - r0.out -> e0.query
  - r1.out -> e1.query
  - r2.out -> e2.query
  - r3.out -> e3.query
  - e0.metrics -> report
  - e1.metrics -> report
  - e2.metrics -> report
  - e3.metrics -> report
  - e0.metrics -> plain
  - e1.metrics -> plain
)";

std::string graph_with(const std::string& x_half) {
  std::string g = kGraph;
  g.replace(g.find("X_HALF"), 6, x_half);
  return g;
}

// Reads each retrieval's own JSON and the report's Markdown and JSON; every cell must be that
// retrieval's number printed as a percentage with two decimals.
const char* kCheck = R"PY(
import json, sys
out = sys.argv[1]
problems = []
def table(path):
    lines = [l for l in open(path).read().splitlines() if l.startswith("|")]
    cells = lambda l: [c.strip() for c in l.strip("|").split("|")]
    return cells(lines[0]), {cells(l)[0]: cells(l) for l in lines[2:]}
src = {json.load(open(f"{out}/e{i}.json"))["method"]: json.load(open(f"{out}/e{i}.json"))["metrics"] for i in range(4)}
x = {"sweep p=0": "0", "sweep p=0.5": "0.5", "sweep p=1": "1", "baseline": "-"}

header, rows = table(f"{out}/table.md")
want = ["method", "label fuzziness p", "P@1 %", "R-precision %", "MAP@R %", "mAP %"]
if header != want: problems.append(f"header {header} != {want}")
if sorted(rows) != sorted(src): problems.append(f"rows {sorted(rows)}")
for name, m in src.items():
    expect = [name, x[name]] + [f"{100 * m[k]:.2f}" for k in ("P@1", "R-precision", "MAP@R", "mAP")]
    if rows.get(name) != expect: problems.append(f"{name}: row {rows.get(name)} != {expect}")
rep = {r["method"]: r for r in json.load(open(f"{out}/table.json"))["methods"]}
for name, m in src.items():
    for k in ("P@1", "R-precision", "MAP@R", "mAP", "mAP_trapezoid", "MRR", "rank-1"):
        if abs(rep[name][k] - m[k]) > 1e-9: problems.append(f"{name}: report JSON {k} {rep[name][k]} != {m[k]}")
    if rep[name].get("x") != (None if name == "baseline" else float(x[name])): problems.append(f"{name}: x {rep[name].get('x')}")
# The methods must differ, or the comparison above could not tell rows apart.
if len({round(m["MAP@R"], 6) for m in src.values()}) != 4: problems.append("the four methods tie on MAP@R")

header, rows = table(f"{out}/plain.md")
if header != ["method", "mAP %", "mAP trapz %", "MRR %"]: problems.append(f"plain header {header}")
for name in ("sweep p=0", "sweep p=0.5"):
    m = src[name]
    if rows[name][1:] != [f"{100 * m[k]:.2f}" for k in ("mAP", "mAP_trapezoid", "MRR")]: problems.append(f"plain {name}")
for p in problems: print("PROBLEM:", p)
sys.exit(1 if problems else 0)
)PY";

}  // namespace

TEST_CASE("eval.report: chosen columns carry each retrieval's values, x sweep plot, bad x named at load",
          "[eval][graph][report]") {
  const fs::path dir = scratch_dir("eval_report_columns");
  const Result w = run_python(kWriteFeatures, {dir.string()});
  INFO(w.err);
  REQUIRE(w.exit_code == 0);

  SECTION("columns, x column and values") {
    write_file(dir / "sweep.yaml", graph_with("0.5"));
    const Result r = run_cli_in(dir, {"run", "sweep.yaml", "--quiet"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    check_python(kCheck, {(dir / "out").string()});
    for (const char* png : {"table_vs_x.png", "table_cmc.png", "plain_cmc.png"}) {
      INFO(png);
      const cv::Mat img = cv::imread((dir / "out" / png).string(), cv::IMREAD_COLOR);
      CHECK(!img.empty());
      CHECK(img.cols >= 400);
      CHECK(img.rows >= 300);
    }
    // Without x there is no sweep plot.
    CHECK(!fs::exists(dir / "out/plain_vs_x.png"));
  }
  SECTION("a non-numeric x value, an unknown column and an unknown plotted metric") {
    std::string g = graph_with("abc");
    g.replace(g.find("[map_at_r, p_at_1]"), 18, "[map_at_r, mapp]");
    g.replace(g.find("ranks: []}"), 10, "ranks: [], columns: [rank-k, map_at_k]}");
    const Result r = validate_in(dir, "bad.yaml", g);
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("node 'report': x: the value for method 'sweep p=0.5' must be a finite number, got string abc") !=
          std::string::npos);
    CHECK(r.err.find("node 'plain': columns: unknown metric 'map_at_k'; did you mean 'map_at_r'?") != std::string::npos);
    CHECK(r.err.find("node 'report': plot_metrics: unknown metric 'mapp'") != std::string::npos);
    // `run` stops at load too: nothing is written.
    const Result run = run_cli_in(dir, {"run", "bad.yaml", "--quiet"});
    CHECK(run.exit_code == 2);
    CHECK(!fs::exists(dir / "out/table.md"));
  }
}
