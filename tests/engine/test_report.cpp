// `embedflow report` checked in a real browser: headless Chromium (Debian's chromium) loads the
// page a run wrote and a two-run comparison, with no console message at all; every chart draws
// (each vega-embed promise resolved, and the screenshot is not blank); the page shows what the
// nodes published, results first (the headline table above everything else), and the numbers it
// shows equal the run records' results, the deltas their differences, as an independent Python
// pass over the page's DOM and run.json finds. Also the error paths.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <regex>

#include "chromium.hpp"
#include "cli.hpp"
#include "report_check.hpp"

using namespace embedflow::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {


fs::path reid_data(const fs::path& dir) {
  fs::create_directories(dir / "data");
  const Result r = run_process({GEN_REID_FEATURES, "--out", (dir / "data/reid_128.h5").string(), "--dim", "128",
                                "--identities", "30", "--val-identities", "10", "--test-identities", "30"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return dir;
}

}  // namespace

TEST_CASE("a run's report and a two-run comparison work in headless Chromium and show the published numbers",
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

  SECTION("the run's own report: the headline first, then what the nodes published") {
    const Page page = load_in_chromium(dir / "out/a/report.html", dir);
    check_page_works(page);
    check_python(kCheckScreenshot, {page.screenshot.string()});
    const fs::path dom = dir / "a.dom.html";
    write_file(dom, page.dom);
    const Result numbers = run_python(kCheckReportNumbers, {dom.string(), (dir / "out/a").string()});
    INFO(numbers.out << numbers.err);
    CHECK(numbers.exit_code == 0);
    // The record, the graph and the timings follow, collapsed.
    const auto results = page.dom.find("<section class=\"results\">");
    const auto record = page.dom.find("<summary>Run record</summary>");
    REQUIRE(results != std::string::npos);
    REQUIRE(record != std::string::npos);
    CHECK(page.dom.find("<section class=\"headline\">") < results);
    CHECK(results < record);
    CHECK(page.dom.find("<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"graph\"") > record);
    // Files no node published are listed, not charted or inlined.
    CHECK(page.dom.find("src=\"data:image/png;base64,") == std::string::npos);
    CHECK_THAT(page.dom, Catch::Contains("lmnn.json"));
  }
  SECTION("the comparison: one column per run with deltas, graph differences without output paths") {
    const Page page = load_in_chromium(dir / "compare.html", dir);
    check_page_works(page);
    CHECK_THAT(page.dom, Catch::Contains("<li>seed: 7 → 8</li>"));
    CHECK_THAT(page.dom, Catch::Contains("<li>node 'lmnn' param 'k': 3 → 2</li>"));
    const auto diffs = page.dom.find("<section class=\"differences\">");
    REQUIRE(diffs != std::string::npos);
    const std::string diff_text = page.dom.substr(diffs, page.dom.find("</section>", diffs) - diffs);
    CHECK(diff_text.find("out/a") == std::string::npos);
    CHECK(diff_text.find("out/b") == std::string::npos);
    // Runs are named by what sets them apart.
    CHECK_THAT(page.dom, Catch::Contains("data-run=\"lmnn.k=2 seed=8\""));
    const fs::path dom = dir / "compare.dom.html";
    write_file(dom, page.dom);
    const Result numbers = run_python(kCheckReportNumbers, {dom.string(), (dir / "out/a").string(), (dir / "out/b").string()});
    INFO(numbers.out << numbers.err);
    CHECK(numbers.exit_code == 0);
  }
}

TEST_CASE("a report draws the charts nodes declare, from their progress metrics, and no chart of fewer than "
          "3 points unless declared so",
          "[report]") {
  const fs::path dir = scratch_dir("report_progress");
  write_file(dir / "p.yaml", numbers_through("seed: 1\nout: out/progress\n", 30, "train",
                                             "{type: testing.progress, params: {total: 30, json: out/progress/summary.json}}"));
  const Result r = run_with_testing_plugin(dir, {"run", "p.yaml", "--quiet"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const Page page = load_in_chromium(dir / "out/progress/report.html", dir);
  check_page_works(page);
  // The declared curves, drawn with every step the node reported.
  for (const char* title : {"loss", "learning rate"})
    CHECK(std::regex_search(page.dom, std::regex(std::string("data-chart=\"") + title +
                                                 "\" data-points=\"30\" data-series=\"1\"[^>]*data-drawn=\"true\"")));
  // A two-point chart without few_points is named, not drawn; nothing else is charted.
  CHECK_THAT(page.dom, Catch::Contains("data-chart-skipped=\"two points\""));
  CHECK(body_attr(page.dom, "data-charts-expected") == "2");
  // The summary table with its interval, rounded for reading and full in the cell's data.
  CHECK_THAT(page.dom, Catch::Contains("data-title=\"progress summary\""));
  // Figures: the image inside the run folder inlined with its caption; one outside named, not read.
  CHECK(std::regex_search(page.dom, std::regex("<figure><img src=\"data:image/png;base64,iVBORw0KGgo[^\"]*\" alt=\"one pixel: a 1x1 PNG\">"
                                               "<figcaption>one pixel: a 1x1 PNG</figcaption></figure>")));
  CHECK_THAT(page.dom, Catch::Contains("outside: not the run's (hostname): not shown: outside the run folder"));
  // A node's notes: in run.json in full, and under the run record on the page.
  const json record = json::parse(read_file(dir / "out/progress/run.json"));
  REQUIRE(record["texts"].size() == 1);
  CHECK(record["texts"][0] == json({{"node", "train"}, {"title", "settings"}, {"text", "total: 30\ndelay_us: 0"}}));
  CHECK_THAT(page.dom, Catch::Contains("<summary>Node notes (1)</summary>") && Catch::Contains("<pre>total: 30\ndelay_us: 0</pre>"));
  CHECK(std::regex_search(page.dom, std::regex("data-metric=\"last_loss\"[^>]*data-value=\"0.03333333333333333\"[^>]*>"
                                               "0.0333 \\[0.0300, 0.0367\\]<")));
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

TEST_CASE("the report reads only what was published: other files are listed, a deep run record is an error",
          "[report]") {
  const fs::path dir = scratch_dir("report_bounds");
  progress_run(dir, "bounds");
  const fs::path run = dir / "out/bounds";
  // 60 KB of JSON nested 10,000 deep: a recursive walk overflows the stack (exit 139).
  std::string deep;
  for (int i = 0; i < 10000; ++i) deep += "{\"a\":";
  deep += "1";
  deep += std::string(10000, '}');
  write_file(run / "deep.json", deep);
  std::string big = "x,y\n";
  while (big.size() <= (5u << 20)) big += "1.5,2.5\n";
  write_file(run / "big.csv", big);
  REQUIRE(mkfifo((run / "pipe.csv").c_str(), 0600) == 0);  // would block a reader

  const Result report = run_with_testing_plugin(dir, {"report", "out/bounds"});
  INFO(report.err);
  REQUIRE(report.exit_code == 0);
  const std::string data = report_data(read_file(run / "report.html"));
  CHECK_THAT(data, Catch::Contains("{\"file\":\"deep.json\",\"bytes\":" + std::to_string(deep.size()) + "}"));
  CHECK_THAT(data, Catch::Contains("{\"file\":\"big.csv\",\"bytes\":" + std::to_string(big.size()) + "}"));
  CHECK_THAT(data, Catch::Contains("{\"file\":\"pipe.csv\",\"note\":\"not a regular file\"}"));
  const Page page = load_in_chromium(run / "report.html", dir);
  check_page_works(page);

  // The run record itself nested that deep is an error naming the file and line (exit 2).
  write_file(dir / "out/deeprec/run.json", deep);
  const Result rec = run_with_testing_plugin(dir, {"report", "out/deeprec"});
  CHECK(rec.exit_code == 2);
  CHECK_THAT(rec.err, Catch::Contains("out/deeprec/run.json:1: JSON nested deeper than 64 levels"));
  CHECK_FALSE(fs::exists(dir / "out/deeprec/report.html"));
  // And so is a line of metrics.jsonl.
  fs::create_directories(dir / "out/deepmetrics");
  fs::copy_file(run / "run.json", dir / "out/deepmetrics/run.json");
  write_file(dir / "out/deepmetrics/metrics.jsonl", "{\"node\": \"train\", \"done\": 1}\n" + deep + "\n");
  const Result met = run_with_testing_plugin(dir, {"report", "out/deepmetrics"});
  CHECK(met.exit_code != 0);
  CHECK_THAT(met.err, Catch::Contains("out/deepmetrics/metrics.jsonl:2: not a JSON line of metrics"));
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
  fs::create_symlink("sub/inner.json", run / "inner_link.json");  // stays inside: listed

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
    CHECK(html.find("inner_marker") == std::string::npos);  // listed by name, never read
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
