// The run report's numbers checked against the run records, by an independent Python pass over
// the page's DOM (as headless Chromium left it) and each run's run.json. Shared by the report's
// own tests and the graph tests that compare shipped graphs' runs.
#pragma once

namespace embedflow::test {

// argv: the DOM file, then the run folders in the order the report was given them.
// Every value cell of every results table equals the run record's published value for that
// table, row and metric, with the runs in command-line order; every delta equals the difference
// from the first run; the headline table comes first; no chart has fewer than 3 points unless its
// node declared few_points.
inline const char* const kCheckReportNumbers = R"PY(
import json, sys
from html.parser import HTMLParser
dom_path = sys.argv[1]
runs = sys.argv[2:]

class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tables, self.cur, self.row, self.sections, self.charts = [], None, None, [], []
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section":
            self.sections.append(a.get("class", ""))
        if tag == "div" and "chart" in a.get("class", "").split():
            self.charts.append(a)
        if tag == "table" and a.get("class") == "results":
            self.cur = {"title": a["data-title"], "section": self.sections[-1], "rows": []}
            self.tables.append(self.cur)
        elif tag == "tr" and self.cur is not None and "data-label" in a:
            self.row = {"label": a["data-label"], "cells": []}
            self.cur["rows"].append(self.row)
        elif tag == "td" and self.row is not None and "data-metric" in a:
            self.row["cells"].append(a)
    def handle_endtag(self, tag):
        if tag == "table":
            self.cur, self.row = None, None

p = Page()
p.feed(open(dom_path).read())
records = [json.load(open(f"{r}/run.json")) for r in runs]
assert p.tables, "no results table on the page"
heads = [t for r in records for t in r["results"] if t.get("headline")]
assert heads, "the graph's report node published no headline table"
assert p.tables[0]["title"] == heads[0]["title"] and p.tables[0]["section"] == "headline", p.tables[0]
names = None
checked = 0
for table in p.tables:
    for row in table["rows"]:
        values = [c for c in row["cells"] if "data-value" in c]
        deltas = [c for c in row["cells"] if "data-delta" in c]
        by_metric = {}
        for c in values:
            by_metric.setdefault(c["data-metric"], []).append(c)
        for metric, cells in by_metric.items():
            truth = []
            for rec in records:
                v = None
                for t in rec["results"]:
                    if t["title"] != table["title"]:
                        continue
                    for r in t["rows"]:
                        label = r["label"]
                        if label == row["label"] or f"{label} ({t['node']})" == row["label"]:
                            v = r["values"].get(metric)
                truth.append(v)
            shown = [float(c["data-value"]) for c in cells]
            assert shown == [v for v in truth if v is not None], (table["title"], row["label"], metric, shown, truth)
            checked += len(shown)
        for c in deltas:
            metric = c["data-metric"]
            first = float(by_metric[metric][0]["data-value"])
            other = [float(x["data-value"]) for x in by_metric[metric] if x["data-run"] == c["data-run"]][0]
            assert float(c["data-delta"]) == other - first, (metric, c["data-delta"], other - first)
            checked += 1
for c in p.charts:
    assert int(c["data-points"]) >= 3 or c.get("data-few-points") == "true", c
print("checked", checked, "values in", len(p.tables), "tables;", len(p.charts), "charts")
assert checked >= 10
)PY";

}  // namespace embedflow::test
