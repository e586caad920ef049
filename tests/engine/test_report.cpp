// `embedflow report` checked in a real browser: headless Chromium (Debian's chromium) loads the
// page a run wrote and a two-run comparison, with no console message at all; every chart draws
// (each vega-embed promise resolved, and the screenshot is not blank); and the numbers the page
// shows equal those in the JSON files the nodes wrote, the deltas equal their differences, as
// an independent Python pass over the page's DOM and the JSON finds. Also the error paths.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>

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

namespace {

// The page's data element: what the report read from the run folders.
std::string report_data(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"report-data\">";
  const auto at = html.find(open);
  if (at == std::string::npos) return "";
  const auto end = html.find("</script>", at);
  return html.substr(at + open.size(), end - at - open.size());
}

// `word` in `text` not as part of a longer name (a host "vm" is not in "vmlinux").
bool has_word(const std::string& text, const std::string& word) {
  auto part = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; };
  for (auto at = text.find(word); at != std::string::npos; at = text.find(word, at + 1))
    if ((at == 0 || !part(text[at - 1])) && (at + word.size() >= text.size() || !part(text[at + word.size()]))) return true;
  return false;
}

// A run folder with charts (testing.progress's metrics) at dir/out/NAME.
void progress_run(const fs::path& dir, const std::string& name) {
  write_file(dir / (name + ".yaml"),
             numbers_through("seed: 1\nout: out/" + name + "\n", 30, "train",
                             "{type: testing.progress, params: {total: 30, json: out/" + name + "/summary.json}}"));
  const Result r = run_with_testing_plugin(dir, {"run", name + ".yaml", "--quiet"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
}

// Every inline script and style of the page is allowed by its Content-Security-Policy's hashes,
// which allow nothing else: no 'unsafe-inline', no 'unsafe-eval', nothing loaded from anywhere.
const char* kCheckPolicy = R"PY(
import base64, hashlib, re, sys
html = open(sys.argv[1], encoding="utf-8").read()
head = html[:html.index("<script")]
m = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', head)
assert m, "no Content-Security-Policy before the first script"
policy = dict((d.split()[0], d.split()[1:]) for d in m.group(1).split(";") if d.strip())
assert policy["default-src"] == ["'none'"], policy["default-src"]
assert policy["img-src"] == ["data:"], policy["img-src"]
assert "'unsafe-inline'" not in m.group(1) and "'unsafe-eval'" not in m.group(1)
def h(text):
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"
scripts = re.findall(r"<script>(.*?)</script>", html, re.S)
styles = re.findall(r"<style>(.*?)</style>", html, re.S)
assert len(scripts) == 5 and len(styles) == 1, (len(scripts), len(styles))
assert sorted(h(s) for s in scripts) == sorted(policy["script-src"]), "script hashes differ"
assert [h(s) for s in styles] == policy["style-src"], "style hash differs"
print("policy ok:", len(scripts), "scripts")
)PY";

}  // namespace

TEST_CASE("the report bounds what it reads: 10,000 nested objects and large CSV files", "[report]") {
  const fs::path dir = scratch_dir("report_bounds");
  progress_run(dir, "bounds");
  const fs::path run = dir / "out/bounds";
  // 60 KB of JSON nested 10,000 deep: a recursive walk overflows the stack (exit 139).
  std::string deep;
  for (int i = 0; i < 10000; ++i) deep += "{\"a\":";
  deep += "1";
  deep += std::string(10000, '}');
  write_file(run / "deep.json", deep);
  // Over the byte cap, and under it with too many cells.
  std::string big = "x,y\n";
  while (big.size() <= (5u << 20)) big += "1.5,2.5\n";
  write_file(run / "big.csv", big);
  std::string wide;
  for (int r = 0; r < 3000; ++r) {
    for (int c = 0; c < 100; ++c) wide += c ? ",1" : "1";
    wide += "\n";
  }
  write_file(run / "wide.csv", wide);

  const Result report = run_with_testing_plugin(dir, {"report", "out/bounds"});
  INFO(report.err);
  REQUIRE(report.exit_code == 0);
  CHECK_THAT(report.err, Catch::Contains("deep.json") && Catch::Contains("JSON nested deeper than 64 levels"));
  std::string data = report_data(read_file(run / "report.html"));
  CHECK_THAT(data, Catch::Contains("deep.json:1: JSON nested deeper than 64 levels (the report's limit"));
  CHECK_THAT(data, Catch::Contains("the report reads CSV files up to 4194304 bytes"));
  CHECK_THAT(data, Catch::Contains("wide.csv (the first 1999 rows: the report reads at most 10000 rows and 200000 cells"));
  // A run into that folder writes its report too.
  const Result again = run_with_testing_plugin(dir, {"run", "bounds.yaml", "--quiet"});
  INFO(again.err);
  CHECK(again.exit_code == 0);
  data = report_data(read_file(run / "report.html"));
  CHECK_THAT(data, Catch::Contains("JSON nested deeper than 64 levels"));
  const Page page = load_in_chromium(run / "report.html", dir);
  check_page_works(page);

  // The run record itself nested that deep is an error naming the file and line (exit 2).
  write_file(dir / "out/deeprec/run.json", deep);
  const Result rec = run_with_testing_plugin(dir, {"report", "out/deeprec"});
  CHECK(rec.exit_code == 2);
  CHECK_THAT(rec.err, Catch::Contains("out/deeprec/run.json:1: JSON nested deeper than 64 levels"));
  CHECK_FALSE(fs::exists(dir / "out/deeprec/report.html"));
}

TEST_CASE("a report is safe to share: a Content-Security-Policy by hashes, no file read through a link out of the "
          "run folder, and --share leaves out the host name and absolute paths",
          "[report]") {
  const fs::path dir = scratch_dir("report_share");
  progress_run(dir, "share");
  const fs::path run = dir / "out/share";
  write_file(dir / "outside/secret.json", "{\"secret_marker\": 12345}");
  write_file(run / "sub/inner.json", "{\"inner_marker\": 678}");
  fs::create_symlink("/etc/passwd", run / "passwd.csv");
  fs::create_symlink(dir / "outside/secret.json", run / "secret.json");
  fs::create_symlink("sub/inner.json", run / "inner_link.json");  // stays inside: read

  const Result plain = run_with_testing_plugin(dir, {"report", "out/share", "-o", "plain.html"});
  INFO(plain.err);
  REQUIRE(plain.exit_code == 0);
  const Result shared = run_with_testing_plugin(dir, {"report", "out/share", "--share", "-o", "shared.html"});
  INFO(shared.err);
  REQUIRE(shared.exit_code == 0);
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  const std::string absolute = fs::canonical(dir).string();
  for (const char* name : {"plain.html", "shared.html"}) {
    INFO(name);
    const std::string html = read_file(dir / name);
    CHECK(html.find("root:x:0:0") == std::string::npos);
    CHECK(html.find("secret_marker") == std::string::npos);
    CHECK(html.find("inner_marker") != std::string::npos);
    CHECK_THAT(html, Catch::Contains("{\"file\":\"passwd.csv\",\"note\":\"not read: a symbolic link out of the run folder\"}"));
    CHECK_THAT(html, Catch::Contains("{\"file\":\"secret.json\",\"note\":\"not read: a symbolic link out of the run folder\"}"));
    check_python(kCheckPolicy, {(dir / name).string()});
  }
  // Without --share the record names the host and the folders; with it, neither.
  const std::string plain_data = report_data(read_file(dir / "plain.html"));
  const std::string shared_data = report_data(read_file(dir / "shared.html"));
  REQUIRE(!shared_data.empty());
  CHECK(plain_data.find("\"hostname\":\"" + std::string(host) + "\"") != std::string::npos);
  CHECK(plain_data.find(absolute) != std::string::npos);
  CHECK_FALSE(has_word(shared_data, host));
  CHECK(shared_data.find(absolute) == std::string::npos);
  CHECK(shared_data.find(dir.string()) == std::string::npos);
  CHECK_THAT(shared_data, Catch::Contains("\"hostname\":\"(left out)\"") && Catch::Contains("\"cwd\":\"(left out)\""));
  // The page works under its policy: no console message (a blocked script or style would print
  // one), every chart drawn.
  const Page page = load_in_chromium(dir / "shared.html", dir);
  check_page_works(page);
  // `run --share` writes the run's own report the same way.
  const Result rerun = run_with_testing_plugin(dir, {"run", "share.yaml", "--quiet", "--share"});
  INFO(rerun.err);
  REQUIRE(rerun.exit_code == 0);
  const std::string rerun_data = report_data(read_file(run / "report.html"));
  CHECK_FALSE(has_word(rerun_data, host));
  CHECK(rerun_data.find(absolute) == std::string::npos);
}
