// The sweep report checked in a real browser: a sweep record written by hand (two swept
// variables, one of them not numeric, three seeds, a failed point, names that try to inject
// markup) becomes a page that headless Chromium loads with no console message, every chart
// drawn and nothing injected; an independent Python pass over the page's DOM finds the means of
// the JSON in the cells, the best cell of each column, the cells marked as not significantly
// different from it, and the failed point. Also the error paths: no record, a wrong format, a
// hostile nesting depth, a file too large, no chart library.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <regex>

#include "chromium.hpp"
#include "cli.hpp"
#include "embedflow/error.hpp"
#include "embedflow_runs/report.hpp"
#include "embedflow_runs/sweep_report.hpp"

using namespace embedflow::test;
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

const std::string kHostile = "</script><img src=x onerror=alert(1)>";

// Two-sided 97.5% t quantiles and p-values for 1 and 2 degrees of freedom (closed forms there).
double t_quantile(int df) { return df == 1 ? 12.706204736174705 : 4.302652729911275; }
double two_sided_p(double t, int df) {
  t = std::fabs(t);
  return df == 1 ? 1 - 2 / std::acos(-1.0) * std::atan(t) : 1 - t / std::sqrt(2 + t * t);
}

struct Summary {
  double mean = 0, sd = 0;
};
Summary summarize(const std::vector<double>& v) {
  Summary s;
  for (double x : v) s.mean += x;
  s.mean /= v.size();
  for (double x : v) s.sd += (x - s.mean) * (x - s.mean);
  s.sd = v.size() > 1 ? std::sqrt(s.sd / (v.size() - 1)) : 0;
  return s;
}

struct Cell {
  std::string variant, label;
  std::map<int, double> by_seed;  // seed -> value, for the points that finished
};

json metric_json(const Cell& c) {
  std::vector<double> values;
  json seeds = json::array();
  for (const auto& [seed, v] : c.by_seed) {
    values.push_back(v);
    seeds.push_back(seed);
  }
  const Summary s = summarize(values);
  const std::size_t n = values.size();
  json m = {{"n", n}, {"mean", s.mean}};
  if (n >= 2) {
    const double half = t_quantile(static_cast<int>(n) - 1) * s.sd / std::sqrt(double(n));
    m["sd"] = s.sd;
    m["ci"] = {s.mean - half, s.mean + half};
  } else {
    m["sd"] = nullptr;
    m["ci"] = nullptr;
  }
  m["values"] = values;
  m["seeds"] = seeds;
  return m;
}

// One results table: rows (variant x label) of per-seed values for each column; every pair of
// rows paired over their common seeds; the best row of each column.
json results_table(const std::string& node, const std::string& title, const json& columns,
                   const std::vector<std::map<std::string, Cell>>& rows_by_key) {
  json rows = json::array(), tests = json::array(), best = json::object();
  for (const auto& row : rows_by_key) {
    json metrics = json::object();
    for (const auto& c : columns) metrics[c["key"].get<std::string>()] = metric_json(row.at(c["key"].get<std::string>()));
    const Cell& any = row.begin()->second;
    rows.push_back({{"variant", any.variant}, {"label", any.label}, {"metrics", metrics}});
  }
  for (const auto& c : columns) {
    const std::string key = c["key"].get<std::string>();
    const bool higher = c["higher_is_better"].get<bool>();
    std::size_t b = 0;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const double m = rows[i]["metrics"][key]["mean"].get<double>(), mb = rows[b]["metrics"][key]["mean"].get<double>();
      if (higher ? m > mb : m < mb) b = i;
    }
    best[key] = {{"variant", rows[b]["variant"]}, {"label", rows[b]["label"]}};
    for (std::size_t i = 0; i < rows_by_key.size(); ++i)
      for (std::size_t j = i + 1; j < rows_by_key.size(); ++j) {
        const Cell &a = rows_by_key[i].at(key), &bb = rows_by_key[j].at(key);
        std::vector<double> d;
        for (const auto& [seed, v] : a.by_seed)
          if (bb.by_seed.count(seed)) d.push_back(v - bb.by_seed.at(seed));
        if (d.size() < 2) continue;
        const Summary s = summarize(d);
        const int df = static_cast<int>(d.size()) - 1;
        const double se = s.sd / std::sqrt(double(d.size()));
        const double t = s.mean / se;
        tests.push_back({{"metric", key}, {"test", "paired t-test"}, {"a", {{"variant", a.variant}, {"label", a.label}}},
                         {"b", {{"variant", bb.variant}, {"label", bb.label}}}, {"n", d.size()}, {"mean_difference", s.mean},
                         {"ci", {s.mean - t_quantile(df) * se, s.mean + t_quantile(df) * se}}, {"t", t}, {"p", two_sided_p(t, df)}});
      }
  }
  return {{"node", node}, {"title", title}, {"columns", columns}, {"rows", rows}, {"tests", tests}, {"best", best}};
}

// A sweep over lr (numeric) x loss (a string, one value hostile) x three seeds, written as
// `embedflow sweep` writes it; the point of the last variant with seed 9 failed.
json realistic_sweep(const fs::path& dir) {
  const std::vector<std::string> lrs{"0.01", "0.1"};
  const std::vector<std::string> losses{"triplet \"semi-hard\" ü", kHostile};
  const std::vector<std::string> labels{"T_c^1 ünï", "V alone " + kHostile};
  const std::vector<int> seeds{7, 8, 9};
  json sweep = {{"format", "embedflow-sweep/1"}, {"graph", "graphs/sweep <test> \"ü\".yaml"},
                {"command", {"embedflow", "sweep", "graphs/x.yaml", "--grid", "lr=0.01,0.1", "--grid", "loss=...", "--seeds", "7,8,9"}},
                {"created", "2026-11-27T13:00:00Z"}, {"variables", {"lr", "loss"}}, {"seeds", seeds},
                {"base_overrides", {"threads=1", "note=" + kHostile}}, {"status", "failed"}, {"seconds", 123.4}};
  json points = json::array(), variants = json::array();
  std::vector<std::map<std::string, Cell>> table_rows, eval_rows;
  int index = 0;
  for (std::size_t a = 0; a < lrs.size(); ++a)
    for (std::size_t b = 0; b < losses.size(); ++b) {
      const std::string variant = "lr=" + lrs[a] + ", loss=" + losses[b];
      const json values = {{"lr", lrs[a]}, {"loss", losses[b]}};
      json members = json::array();
      std::vector<std::map<std::string, Cell>> rows(labels.size());
      std::map<std::string, Cell> eval_row;
      for (int seed : seeds) {
        const bool failed = a == 1 && b == 1 && seed == 9;
        char num[16];
        std::snprintf(num, sizeof num, "%03d", index);
        const std::string name = std::string(num) + "-lr=" + lrs[a] + "-loss=" + std::to_string(b) + "-seed=" + std::to_string(seed);
        json p = {{"name", name}, {"variant", variant}, {"values", values}, {"seed", seed}, {"dir", "points/" + name},
                  {"status", failed ? "failed" : "ok"}, {"exit_code", failed ? 1 : 0}, {"seconds", 10.5 + index},
                  {"resumed", index == 0}, {"nodes", {{"decode", index == 0 ? "run" : "replay"}, {"train", "run"}, {"table", "run"}}}};
        if (failed) p["error"] = "node 'train': loss is NaN at step 12 " + kHostile;
        members.push_back(index++);
        points.push_back(p);
        if (failed) continue;
        const double noise = ((seed * 37 + index * 11) % 9 - 4) * 0.004;
        for (std::size_t l = 0; l < labels.size(); ++l) {
          for (const char* key : {"map_at_r", "violation"}) {
            Cell& c = rows[l][key];
            c.variant = variant;
            c.label = labels[l];
          }
          const double lnoise = ((seed * 13 + index * 7 + static_cast<int>(l) * 5) % 7 - 3) * 0.003;
          rows[l]["map_at_r"].by_seed[seed] = 0.30 + 0.08 * double(a) - 0.03 * double(b) + 0.05 * double(l) + noise + lnoise;
          rows[l]["violation"].by_seed[seed] = 0.20 - 0.02 * double(a) + 0.04 * double(b) - 0.01 * double(l) + noise * 0.5 - lnoise;
        }
        Cell& e = eval_row["top1"];
        e.variant = variant;
        e.label = "kNN";
        e.by_seed[seed] = 0.6 + 0.05 * double(a) + 0.02 * double(b) + noise;
      }
      for (auto& r : rows) table_rows.push_back(r);
      eval_rows.push_back(eval_row);
      variants.push_back({{"name", variant}, {"values", values}, {"points", members}});
    }
  sweep["points"] = points;
  sweep["stages"] = {{{"node", "decode"}, {"type", "image.decode_by_id"}, {"cached", true}, {"computed", 1}, {"replayed", 11}, {"skipped", 0}},
                     {{"node", "train"}, {"type", "metric.train"}, {"cached", false}, {"computed", 12}, {"replayed", 0}, {"skipped", 0}}};
  sweep["variants"] = variants;
  sweep["graph_differences"] = json::array();
  for (std::size_t i = 1; i < variants.size(); ++i)
    sweep["graph_differences"].push_back({{"variant", variants[i]["name"]}, {"against", variants[0]["name"]},
                                          {"differences", {"variable loss: a -> " + kHostile, "node 'train' param lr: 0.01 -> 0.1"}}});
  const json table_columns = {
      {{"key", "map_at_r"}, {"header", "MAP@R"}, {"unit", "%"}, {"scale", 100}, {"higher_is_better", true}},
      {{"key", "violation"}, {"header", "triplet violation <b>"}, {"unit", "%"}, {"scale", 100}, {"higher_is_better", false}}};
  const json eval_columns = json::array({json{{"key", "top1"}, {"header", "top-1"}, {"unit", ""}, {"scale", 1}, {"higher_is_better", true}}});
  sweep["results"] = json::array({results_table("table", "triplet and retrieval metrics", table_columns, table_rows),
                                   results_table("eval", "", eval_columns, eval_rows)});
  // The selected run's own tables, as its run record holds them.
  const json selected_rows = json::array({json{{"label", labels[0]}, {"values", {{"map_at_r", 0.371}, {"violation", 0.155}}}},
                                          json{{"label", labels[1]}, {"values", {{"map_at_r", 0.412}, {"violation", 0.149}}}}});
  sweep["selection"] = {{"metric", "table/T_c^1 ünï/map_at_r"}, {"higher_is_better", true}, {"best_variant", variants[2]["name"]},
                        {"value", 0.38}, {"ci", {0.33, 0.42}}, {"then", json::array({"split=test"})}, {"seed", 7}, {"dir", "selected"},
                        {"status", "ok"}, {"seconds", 14.2},
                        {"results", json::array({json{{"node", "table"}, {"title", "on the test split"}, {"columns", table_columns},
                                                      {"rows", selected_rows}}})}};
  write_file(dir / "sweep.json", sweep.dump(2));
  // The first point has its run report, the others only their folder.
  write_file(dir / "points" / points[0]["name"].get<std::string>() / "report.html", "<html></html>");
  return sweep;
}

// Independent of the page's script: the DOM's cells against sweep.json.
const char* kCheckSweepPage = R"PY(
import json, sys
from html.parser import HTMLParser
dom_path, sweep_path = sys.argv[1:3]
sweep = json.load(open(sweep_path))
hostile = "</script><img src=x onerror=alert(1)>"

class Dom(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tables, self.cur, self.row, self.cell = [], None, None, None
        self.tags, self.text, self.links = [], [], []
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag == "a":
            self.links.append(a.get("href"))
        if tag == "table":
            self.cur = {"attrs": a, "rows": []}
            self.tables.append(self.cur)
        elif tag == "tr" and self.cur is not None:
            self.row = {"attrs": a, "cells": []}
            self.cur["rows"].append(self.row)
        elif tag in ("td", "th") and self.row is not None:
            self.cell = {"attrs": a, "text": ""}
            self.row["cells"].append(self.cell)
    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.cell = None
        if tag == "table":
            self.cur, self.row = None, None
    def handle_data(self, d):
        self.text.append(d)
        if self.cell is not None:
            self.cell["text"] += d

dom = Dom()
html = open(dom_path).read()
body = html[html.index("<body"):]
dom.feed(body)

# Nothing the names held became markup.
assert not [t for t, a in dom.tags if t == "img"], "an <img> element in the page"
assert not [t for t, a in dom.tags if any(k.startswith("on") for k in a)], "an element with an event handler"
assert sum(hostile in t for t in dom.text) >= 5, "the hostile names are not shown as text"

def tables(cls):
    return [t for t in dom.tables if t["attrs"].get("class") == cls]

checked = tied = separated = 0
results = tables("results")
assert len(results) == len(sweep["results"]), (len(results), len(sweep["results"]))
for res, t in zip(sweep["results"], results):
    assert t["attrs"]["data-node"] == res["node"]
    head = [c["text"] for c in t["rows"][0]["cells"]]
    assert head[:2] == ["variant", "label"], head
    shown = {}
    for r in t["rows"][1:]:
        cells = r["cells"]
        shown[(cells[0]["text"], cells[1]["text"])] = {c["attrs"].get("data-metric"): c for c in cells[2:]}
    assert len(shown) == len(res["rows"]), (len(shown), len(res["rows"]))
    for col in res["columns"]:
        key = col["key"]
        means = {(r["variant"], r["label"]): r["metrics"][key]["mean"] for r in res["rows"]}
        for k, mean in means.items():
            c = shown[k][key]
            assert float(c["attrs"]["data-value"]) == mean, (k, key, c["attrs"]["data-value"], mean)
            # The text shows the mean in the column's unit, to the decimals it shows.
            shown_mean = c["text"].split(" [")[0]
            decimals = len(shown_mean.split(".")[1]) if "." in shown_mean else 0
            assert abs(float(shown_mean) - mean * col["scale"]) <= 0.5 * 10 ** -decimals + 1e-9, (c["text"], mean)
            checked += 1
        best = [k for k in means if "best" in shown[k][key]["attrs"].get("class", "").split()]
        assert len(best) == 1, (key, best)
        target = (max if col["higher_is_better"] else min)(means.values())
        assert means[best[0]] == target, (key, best[0], means[best[0]], target)
        # Every other cell: the p-value of its test against the best, shaded when p >= 0.05.
        for k in means:
            if k == best[0]:
                continue
            c = shown[k][key]
            test = [x for x in res["tests"] if x["metric"] == key and
                    {(x["a"]["variant"], x["a"]["label"]), (x["b"]["variant"], x["b"]["label"])} == {k, best[0]}]
            assert len(test) == 1, (key, k)
            p = test[0]["p"]
            assert float(c["attrs"]["data-p"]) == p, (k, c["attrs"].get("data-p"), p)
            assert ("p = " in c["attrs"].get("title", "")), c["attrs"].get("title")
            is_tied = "tied" in c["attrs"].get("class", "").split()
            assert is_tied == (p >= 0.05), (key, k, p, c["attrs"].get("class"))
            tied += is_tied
            separated += not is_tied
assert tied > 0 and separated > 0, (tied, separated)

# The pairwise tests: one row each.
tests = tables("tests")
assert len(tests) == 1
assert len(tests[0]["rows"]) - 1 == sum(len(r["tests"]) for r in sweep["results"])

# The points: every one listed, the failed one marked with its error, links where they lead.
points = tables("points")[0]["rows"][1:]
assert len(points) == len(sweep["points"])
for p, r in zip(sweep["points"], points):
    assert r["attrs"]["data-name"] == p["name"], (r["attrs"], p["name"])
    failed = "failed" in r["attrs"].get("class", "").split()
    assert failed == (p["status"] == "failed"), p["name"]
    if failed:
        assert p["error"] in r["cells"][-1]["text"], r["cells"][-1]["text"]
assert sum("failed" in r["attrs"].get("class", "") for r in points) == 1
first = sweep["points"][0]["name"]
assert f"./points/{first}/report.html" in dom.links, dom.links[:3]
assert f"./points/{sweep['points'][1]['name']}/" in dom.links

# The selection's numbers, and the stages.
sel = tables("selection-results")
assert len(sel) == 1
for r, row in zip(sweep["selection"]["results"][0]["rows"], sel[0]["rows"][1:]):
    assert row["cells"][0]["text"] == r["label"]
    for c, (k, v) in zip(row["cells"][1:], r["values"].items()):
        assert float(c["attrs"]["data-value"]) == v, (k, v)
        checked += 1
stages = tables("stages")[0]["rows"][1:]
assert [r["cells"][0]["text"] for r in stages] == [s["node"] for s in sweep["stages"]]
assert any("mean over 3 seeds; 95% t-interval; paired t-test across seeds, two-sided, uncorrected" in t for t in dom.text)
print("checked", checked, "tied", tied, "separated", separated)
assert checked >= 24
)PY";

// The message of the exception of type E that f throws; a marker when it throws none or another.
template <class E, class F>
std::string thrown(F f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("(another exception: ") + e.what() + ")";
  }
  return "(no exception)";
}

}  // namespace

TEST_CASE("a sweep's report works in headless Chromium, shows the record's means and marks the best", "[runs][report]") {
  const fs::path dir = scratch_dir("sweep_report");
  const fs::path sweep_dir = dir / "sweep";
  const json sweep = realistic_sweep(sweep_dir);
  const fs::path assets = embedflow::runs::find_report_assets();
  REQUIRE(!assets.empty());
  embedflow::runs::write_sweep_report(sweep_dir, sweep_dir / "report.html", assets);
  REQUIRE(fs::exists(sweep_dir / "report.html"));
  // The names sit in the page's data with "<" escaped: none closes the data element.
  const std::string html = read_file(sweep_dir / "report.html");
  CHECK(html.find(kHostile) == std::string::npos);
  // A Content-Security-Policy by hashes, before the first script; the page still draws every
  // chart under it (check_page_works: no console message, every chart drawn).
  const std::size_t policy = html.find("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none';");
  REQUIRE(policy < html.find("<script"));
  const std::string meta = html.substr(policy, html.find('>', policy) - policy);
  CHECK(meta.find("script-src 'sha256-") != std::string::npos);
  CHECK(meta.find("unsafe-") == std::string::npos);

  const Page page = load_in_chromium(sweep_dir / "report.html", dir);
  check_page_works(page);
  // Shown as text, escaped as text is.
  CHECK(page.dom.find("&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;") != std::string::npos);
  // Each of the three metrics against each of the two swept variables.
  CHECK(body_attr(page.dom, "data-charts-expected") == "6");
  for (const char* title : {"table: MAP@R against lr", "table: MAP@R against loss", "eval: top-1 against loss"})
    CHECK(std::regex_search(page.dom, std::regex(std::string("data-chart=\"") + title + "\"[^>]*data-drawn=\"true\"")));
  check_python(kCheckScreenshot, {page.screenshot.string()});
  const fs::path dom = dir / "sweep.dom.html";
  write_file(dom, page.dom);
  check_python(kCheckSweepPage, {dom.string(), (sweep_dir / "sweep.json").string()});
}

TEST_CASE("a sweep over seeds only charts each label's mean and interval", "[runs][report]") {
  const fs::path dir = scratch_dir("sweep_report_seeds");
  json rows = json::array();
  for (const char* label : {"kNN", "LMNN"})
    rows.push_back(json{{"variant", ""}, {"label", label},
                        {"metrics", {{"acc", {{"n", 2}, {"mean", 0.5}, {"sd", 0.1}, {"ci", {-0.4, 1.4}}, {"values", {0.43, 0.57}}, {"seeds", {1, 2}}}}}}});
  rows[1]["metrics"]["acc"]["mean"] = 0.6;
  const json columns = json::array({json{{"key", "acc"}, {"header", "accuracy"}, {"unit", "%"}, {"scale", 100}, {"higher_is_better", true}}});
  const json result = {{"node", "eval"}, {"title", "accuracy"}, {"columns", columns}, {"rows", rows}, {"tests", json::array()},
                       {"best", {{"acc", {{"variant", ""}, {"label", "LMNN"}}}}}};
  const json points = json::array({json{{"name", "000-seed=1"}, {"variant", ""}, {"seed", 1}, {"dir", "points/000-seed=1"}, {"status", "ok"}},
                                   json{{"name", "001-seed=2"}, {"variant", ""}, {"seed", 2}, {"dir", "points/001-seed=2"}, {"status", "ok"}}});
  const json sweep = {{"format", "embedflow-sweep/1"}, {"graph", "g.yaml"}, {"command", {"embedflow", "sweep", "g.yaml"}},
                      {"variables", json::array()}, {"seeds", {1, 2}}, {"status", "done"}, {"seconds", 3.0},
                      {"points", points}, {"results", json::array({result})}};
  write_file(dir / "sweep.json", sweep.dump());
  embedflow::runs::write_sweep_report(dir, dir / "report.html", embedflow::runs::find_report_assets());
  const Page page = load_in_chromium(dir / "report.html", dir);
  check_page_works(page);
  CHECK(body_attr(page.dom, "data-charts-expected") == "1");
  CHECK(std::regex_search(page.dom, std::regex("<td[^>]*class=\"num cell best\"[^>]*data-value=\"0.6\"")));
}

TEST_CASE("--against charts every metric against one row's metric per variant, one line per model", "[runs][report]") {
  // Three pair sets (the swept radius r), each with its label precision on a "pair set P_r" row
  // and what a model trained on it scores on "T_c^2 P_r"; "raw pixels" does not depend on r.
  const fs::path dir = scratch_dir("sweep_report_against");
  const std::vector<std::pair<std::string, double>> sets{{"1", 1.0}, {"10", 0.9}, {"100", 0.5}};
  auto metric = [](double mean) {
    return json{{"n", 2}, {"mean", mean}, {"sd", 0.01}, {"ci", {mean - 0.1, mean + 0.1}}, {"values", {mean - 0.01, mean + 0.01}},
                {"seeds", {1, 2}}};
  };
  json rows = json::array(), variants = json::array(), points = json::array();
  for (const auto& [r, precision] : sets) {
    const std::string variant = "r=" + r, tag = "P_{" + r + ",2000}";
    rows.push_back(json{{"variant", variant}, {"label", "pair set " + tag}, {"metrics", {{"label_precision", metric(precision)}}}});
    rows.push_back(json{{"variant", variant}, {"label", "T_c^2 " + tag}, {"metrics", {{"map_at_r", metric(0.1 * precision)}}}});
    rows.push_back(json{{"variant", variant}, {"label", "raw pixels"}, {"metrics", {{"map_at_r", metric(0.05)}}}});
    variants.push_back(json{{"name", variant}, {"values", {{"r", r}}}});
    for (int seed : {1, 2})
      points.push_back(json{{"name", variant + "-seed=" + std::to_string(seed)}, {"variant", variant}, {"seed", seed},
                            {"dir", "points/" + variant + "-" + std::to_string(seed)}, {"status", "ok"}});
  }
  const json columns = json::array({json{{"key", "map_at_r"}, {"header", "MAP@R"}, {"unit", "%"}, {"scale", 100}, {"higher_is_better", true}},
                                    json{{"key", "label_precision"}, {"header", "label precision"}, {"unit", "%"}, {"scale", 100},
                                         {"higher_is_better", true}}});
  const json result = {{"node", "report"}, {"title", "t"}, {"columns", columns}, {"rows", rows}, {"tests", json::array()},
                       {"best", json::object()}};
  const json sweep = {{"format", "embedflow-sweep/1"}, {"graph", "g.yaml"}, {"command", {"embedflow", "sweep", "g.yaml"}},
                      {"variables", {"r"}}, {"seeds", {1, 2}}, {"status", "done"}, {"seconds", 3.0}, {"variants", variants},
                      {"points", points}, {"results", json::array({result})},
                      {"against", json::array({json{{"metric", "label_precision"}, {"row", "pair set"}}})}};
  write_file(dir / "sweep.json", sweep.dump());
  embedflow::runs::write_sweep_report(dir, dir / "report.html", embedflow::runs::find_report_assets());
  const Page page = load_in_chromium(dir / "report.html", dir);
  check_page_works(page);
  // Each metric against r (2), and MAP@R against the label precision (1).
  CHECK(body_attr(page.dom, "data-charts-expected") == "3");
  std::smatch m;
  const std::regex chart("data-chart=\"report: MAP@R against label precision \\(%\\) \\(pair set\\)\" "
                         "data-series=\"([^\"]*)\" data-x=\"([^\"]*)\"[^>]*data-drawn=\"true\"");
  REQUIRE(std::regex_search(page.dom, m, chart));
  // One line for the model whatever its pair set (the tag stripped), one for the raw pixels.
  CHECK(m[1].str() == "[&quot;T_c^2&quot;,&quot;raw pixels&quot;]");
  // x: each variant's label precision, in percent.
  CHECK(m[2].str() == "[50,90,100]");
}

TEST_CASE("sweep report error paths: no record, not a sweep record, hostile nesting, too large, no chart library", "[runs][report]") {
  using embedflow::runs::write_sweep_report;
  const fs::path dir = scratch_dir("sweep_report_errors");
  const fs::path assets = embedflow::runs::find_report_assets();
  fs::create_directories(dir / "empty");
  CHECK_THAT(thrown<embedflow::ConfigError>([&] { write_sweep_report(dir / "empty", dir / "empty/report.html", assets); }),
             Catch::Equals((dir / "empty").string() + ": no sweep record (sweep.json) in this folder; "
                                                      "`embedflow sweep` writes one in the sweep's folder"));
  CHECK_THAT(thrown<embedflow::ConfigError>([&] { write_sweep_report(dir / "nowhere", dir / "r.html", assets); }),
             Catch::Equals((dir / "nowhere").string() + ": no such folder"));
  CHECK_FALSE(fs::exists(dir / "empty/report.html"));

  write_file(dir / "other/sweep.json", R"({"format": "embedflow-run/1", "points": []})");
  CHECK_THAT(thrown<embedflow::ConfigError>([&] { write_sweep_report(dir / "other", dir / "other/report.html", assets); }),
             Catch::Contains((dir / "other/sweep.json").string() + ": not a sweep record"));
  write_file(dir / "shape/sweep.json", R"({"format": "embedflow-sweep/1", "points": {"a": 1}})");
  CHECK_THAT(thrown<embedflow::ConfigError>([&] { write_sweep_report(dir / "shape", dir / "shape/report.html", assets); }),
             Catch::Contains("'points' is not a list"));
  write_file(dir / "broken/sweep.json", R"({"format": "embedflow-sweep/1", "points": [)");
  CHECK_THAT(thrown<embedflow::ConfigError>([&] { write_sweep_report(dir / "broken", dir / "broken/report.html", assets); }),
             Catch::Contains((dir / "broken/sweep.json").string() + ": not JSON"));

  // Ten thousand nested lists: refused at a fixed depth, not a stack overflow.
  write_file(dir / "deep/sweep.json", "{\"format\": \"embedflow-sweep/1\", \"points\": " + std::string(10000, '[') +
                                          std::string(10000, ']') + "}");
  CHECK_THAT(thrown<embedflow::ConfigError>([&] { write_sweep_report(dir / "deep", dir / "deep/report.html", assets); }),
             Catch::Contains("nested more than 64 levels deep"));
  CHECK_FALSE(fs::exists(dir / "deep/report.html"));

  // Past the size limit (a sparse file: nothing is written): refused before it is read.
  write_file(dir / "huge/sweep.json", "{}");
  fs::resize_file(dir / "huge/sweep.json", std::uintmax_t{65} << 20);
  CHECK_THAT(thrown<embedflow::ConfigError>([&] { write_sweep_report(dir / "huge", dir / "huge/report.html", assets); }),
             Catch::Contains("bytes, more than a sweep record's limit of 67108864 bytes"));

  // A valid record but no chart library: an Error naming what to do, and no page.
  write_file(dir / "ok/sweep.json", R"({"format": "embedflow-sweep/1"})");
  CHECK_THAT(thrown<embedflow::Error>([&] { write_sweep_report(dir / "ok", dir / "ok/report.html", fs::path()); }),
             Catch::Contains("the chart library (vega, vega-lite, vega-embed, vega-interpreter) was not found"));
  CHECK_FALSE(fs::exists(dir / "ok/report.html"));
  // A minimal record makes a page: nothing to chart, but it loads and says so.
  write_sweep_report(dir / "ok", dir / "ok/report.html", assets);
  const Page page = load_in_chromium(dir / "ok/report.html", dir);
  INFO(page.console);
  CHECK(page.console.empty());
  CHECK(body_attr(page.dom, "data-status") == "done");
  CHECK(body_attr(page.dom, "data-errors") == "0");
  CHECK(body_attr(page.dom, "data-charts-expected") == "0");
  CHECK(page.dom.find("Nothing to chart.") != std::string::npos);
}
