// `embedflow report` checked in a real browser: headless Chromium (Debian's chromium) loads the
// page a run wrote and a two-run comparison, with no console message at all; every chart draws
// (each vega-embed promise resolved, and the screenshot is not blank); and the numbers the page
// shows equal those in the JSON files the nodes wrote, the deltas equal their differences, as
// an independent Python pass over the page's DOM and the JSON finds. Also the error paths.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <regex>

#include "chromium.hpp"
#include "cli.hpp"

using namespace embedflow::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Every number the page shows for a run's JSON equals the JSON's; the comparison table's values
// equal each run's JSON and its deltas their differences.
const char* kCheckNumbers = R"PY(
import json, sys
from html.parser import HTMLParser
dom_path, run_a, run_b, file = sys.argv[1:5]

class Tables(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tables, self.cur, self.row, self.cell = [], None, None, None
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self.cur = {"class": a.get("class", ""), "file": a.get("data-file", ""), "rows": []}
            self.tables.append(self.cur)
        elif tag == "tr" and self.cur is not None:
            self.row = []
            self.cur["rows"].append(self.row)
        elif tag in ("td", "th") and self.row is not None:
            self.cell = {"text": "", "value": a.get("data-value")}
            self.row.append(self.cell)
    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.cell = None
    def handle_data(self, d):
        if self.cell is not None:
            self.cell["text"] += d

p = Tables()
p.feed(open(dom_path).read())

def flatten(v, path, out):
    if isinstance(v, dict):
        for k, x in v.items():
            if not path and k == "run_id":
                continue
            flatten(x, f"{path}.{k}" if path else k, out)
    elif isinstance(v, list) and v and all(isinstance(x, (int, float)) for x in v):
        pass  # drawn as a chart
    elif isinstance(v, list) and v and all(isinstance(x, dict) and
                                           all(not isinstance(f, (list, dict)) for f in x.values()) for x in v):
        pass  # a table of its own
    elif isinstance(v, list):
        for i, x in enumerate(v):
            name = i
            if isinstance(x, dict):
                name = next((x[k] for k in ("method", "name") if isinstance(x.get(k), str)), i)
            flatten(x, f"{path}[{name}]", out)
    elif isinstance(v, (int, float)) and not isinstance(v, bool):
        out[path] = v

checked = 0
for run_dir in (run_a, run_b):
    truth = {}
    flatten(json.load(open(f"{run_dir}/{file}")), "", truth)
    record = json.load(open(f"{run_dir}/run.json"))
    section = [t for t in p.tables if t["class"] == "metrics" and t["file"] == file]
    assert section, f"no metrics table for {file}"
    # The page shows one run's tables per run section, in the order named on the command line.
    table = section[0] if run_dir == run_a else section[1]
    shown = {r[0]["text"]: float(r[1]["value"]) for r in table["rows"][1:] if r[1]["value"] is not None}
    assert set(shown) == set(truth), (set(shown) ^ set(truth))
    for k, v in truth.items():
        assert shown[k] == v, (k, shown[k], v)
        checked += 1
    records = [t for t in p.tables if t["class"] == "record"]
    assert any(r[1]["text"] == record["run_id"] for t in records for r in t["rows"][1:]), "run id not shown"

a, b = {}, {}
flatten(json.load(open(f"{run_a}/{file}")), "", a)
flatten(json.load(open(f"{run_b}/{file}")), "", b)
compare = [t for t in p.tables if t["class"] == "compare"]
assert len(compare) == 1
rows = {r[0]["text"]: r for r in compare[0]["rows"][1:]}
for k in a:
    r = rows[f"{file}: {k}"]
    va, vb, delta = (float(c["value"]) for c in r[1:4])
    assert va == a[k] and vb == b[k], (k, va, vb, a[k], b[k])
    assert delta == b[k] - a[k], (k, delta, b[k] - a[k])
    checked += 1
print("checked", checked)
assert checked > 20
)PY";

fs::path reid_data(const fs::path& dir) {
  fs::create_directories(dir / "data");
  const Result r = run_process({GEN_REID_FEATURES, "--out", (dir / "data/reid_128.h5").string(), "--dim", "128",
                                "--identities", "30", "--val-identities", "10", "--test-identities", "30"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return dir;
}

}  // namespace

TEST_CASE("a run's report and a two-run comparison work in headless Chromium and show the JSON's numbers",
          "[report]") {
  const fs::path dir = reid_data(scratch_dir("report"));
  const std::string graph = source_dir() + "/graphs/reid_metric_learning.yaml";
  Result a = run_with_testing_plugin(dir, {"run", graph, "--out", "out/a", "--threads", "2", "--quiet"});
  INFO(a.err);
  REQUIRE(a.exit_code == 0);
  REQUIRE(fs::exists(dir / "out/a/report.html"));  // run writes it unless --no-report
  Result b = run_with_testing_plugin(dir, {"run", graph, "--out", "out/b", "--threads", "2", "--quiet", "--seed", "8", "--set",
                          "lmnn.k=2", "--no-report"});
  INFO(b.err);
  REQUIRE(b.exit_code == 0);
  CHECK_FALSE(fs::exists(dir / "out/b/report.html"));
  Result cmp = run_with_testing_plugin(dir, {"report", "out/a", "out/b", "-o", "compare.html"});
  INFO(cmp.err);
  REQUIRE(cmp.exit_code == 0);

  SECTION("the run's own report") {
    const Page page = load_in_chromium(dir / "out/a/report.html", dir);
    check_page_works(page);
    check_python(kCheckScreenshot, {page.screenshot.string()});
    // Images are inlined: the page needs nothing beside it.
    CHECK(page.dom.find("src=\"data:image/png;base64,") != std::string::npos);
    CHECK(page.dom.find("<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"graph\"") != std::string::npos);
  }
  SECTION("the comparison: graph differences, numbers equal to the JSON, deltas") {
    const Page page = load_in_chromium(dir / "compare.html", dir);
    check_page_works(page);
    CHECK(page.dom.find("seed: 7 -&gt; 8") != std::string::npos);
    CHECK(page.dom.find("node 'lmnn' param 'k': 3 -&gt; 2") != std::string::npos);
    const fs::path dom = dir / "compare.dom.html";
    write_file(dom, page.dom);
    for (const char* file : {"lmnn.json", "euclidean.json", "table.json"}) {
      const Result numbers = run_python(kCheckNumbers, {dom.string(), (dir / "out/a").string(), (dir / "out/b").string(), file});
      INFO(file << "\n" << numbers.out << numbers.err);
      CHECK(numbers.exit_code == 0);
    }
  }
}

TEST_CASE("a report charts the metrics nodes reported while the run went", "[report]") {
  const fs::path dir = scratch_dir("report_progress");
  write_file(dir / "p.yaml", numbers_through("seed: 1\nout: out/progress\n", 30, "train",
                                             "{type: testing.progress, params: {total: 30, json: out/progress/summary.json}}"));
  const Result r = run_with_testing_plugin(dir, {"run", "p.yaml", "--quiet"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const Page page = load_in_chromium(dir / "out/progress/report.html", dir);
  check_page_works(page);
  // One chart per reported metric, drawn.
  for (const char* metric : {"loss", "lr"})
    CHECK(std::regex_search(page.dom, std::regex(std::string("data-chart=\"train: ") + metric + "\"[^>]*data-drawn=\"true\"")));
}

TEST_CASE("report error paths: no run record, no folder, nothing named", "[report]") {
  const fs::path dir = scratch_dir("report_errors");
  fs::create_directories(dir / "empty");
  Result r = run_with_testing_plugin(dir, {"report", "empty"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("embedflow report: empty: no run record (run.json) in this folder") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "empty/report.html"));
  r = run_with_testing_plugin(dir, {"report", "nowhere"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("nowhere: no such folder") != std::string::npos);
  r = run_with_testing_plugin(dir, {"report"});
  CHECK(r.exit_code == 2);
  write_file(dir / "bad/run.json", "{\"format\": \"something-else\"}");
  r = run_with_testing_plugin(dir, {"report", "bad"});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("bad/run.json: not a run record") != std::string::npos);
}
