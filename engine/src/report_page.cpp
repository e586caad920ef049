// The report page's script and style (report.cpp inlines them, and allows exactly them and the
// chart library by hash in the page's Content-Security-Policy). The script reads the data
// element, builds every section, and draws each chart with vega-embed. When every chart has
// drawn, or failed, it sets body[data-status] to "done" and body[data-charts-drawn] and
// body[data-errors] to counts, and lists any error in #report-errors, so a headless browser can
// tell a page that works from one that does not.
namespace embedflow::engine {

const char* report_page_style() {
  return R"CSS(
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1250px; color: #222; padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { border-bottom: 1px solid #ccd; padding-bottom: .2em; margin-top: 1.6em; }
h3 { font-size: 1.05em; margin: 1.2em 0 .4em; }
table { border-collapse: collapse; font-size: 13px; margin: .4em 0 1em; }
td, th { border: 1px solid #dde; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f2f4f8; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.better { color: #17692f; } td.worse { color: #a12121; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; }
.chart { border: 1px solid #e4e6ee; padding: 6px; }
.graph-box { overflow-x: auto; border: 1px solid #e4e6ee; padding: 6px; }
.graph text { font-family: system-ui, sans-serif; font-size: 12px; }
.images { display: flex; flex-wrap: wrap; gap: 12px; } .images figure { margin: 0; }
.images img { max-width: 600px; border: 1px solid #e4e6ee; image-rendering: pixelated; }
pre { background: #f6f7fa; padding: .6em; overflow-x: auto; font-size: 12px; }
#report-errors { color: #a12121; }
details > summary { cursor: pointer; }
)CSS";
}

// Vega's tooltip, styled by the page's own sheet: a Content-Security-Policy by hashes lets no
// library inject a style. Both the run report and the sweep report append it to their style.
const char* chart_tooltip_style() {
  return R"CSS(
#vg-tooltip-element { visibility: hidden; padding: 8px; position: fixed; z-index: 1000; font-family: sans-serif;
  font-size: 11px; border-radius: 3px; box-shadow: 2px 2px 4px rgba(0, 0, 0, 0.1);
  background-color: rgba(255, 255, 255, 0.95); border: 1px solid #d9d9d9; color: black; }
#vg-tooltip-element.visible { visibility: visible; }
#vg-tooltip-element table { border-spacing: 0; margin: 0; font-size: 11px; }
#vg-tooltip-element table tr td { border: none; padding: 2px 0; }
#vg-tooltip-element table tr td.key { color: #808080; max-width: 150px; text-align: right; padding-right: 4px; }
#vg-tooltip-element table tr td.value { display: block; max-width: 300px; max-height: 7em; text-align: left; }
)CSS";
}

const char* report_page_script() {
  return R"JS(
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("report-data").textContent);
  const root = document.getElementById("report");
  const errors = [];
  window.addEventListener("error", (e) => errors.push(String(e.message)));

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    for (const c of children) e.append(c instanceof Node ? c : String(c));
    return e;
  }
  // Numbers print as JavaScript prints them: the shortest text that reads back as the same double,
  // the same text the JSON holds.
  function show(v) {
    if (v === null || v === undefined) return "";
    if (typeof v === "object") return JSON.stringify(v);
    return String(v);
  }
  function table(columns, rows, attrs) {
    const t = el("table", attrs || {});
    t.append(el("tr", {}, ...columns.map((c) => el("th", {}, c))));
    for (const r of rows) {
      t.append(el("tr", {}, ...r.map((v) => el("td", typeof v === "number" ? { class: "num", "data-value": String(v) } : {}, show(v)))));
    }
    return t;
  }

  const charts = [];
  function chart(parent, c) {
    const div = el("div", { class: "chart", "data-chart": c.title });
    parent.append(div);
    const series = new Set(c.points.map((p) => p.series));
    const spec = {
      $schema: "https://vega.github.io/schema/vega-lite/v5.json",
      title: { text: c.title, anchor: "start", limit: 0, fontSize: 12 },
      width: 520, height: 220,
      data: { values: c.points },
      mark: { type: "line", point: c.points.length <= 200, tooltip: true },
      encoding: {
        x: { field: "x", type: "quantitative", title: c.x_title, scale: { zero: false } },
        y: { field: "y", type: "quantitative", title: c.y_title, scale: { zero: false } },
        color: { field: "series", type: "nominal", title: null,
                 legend: series.size > 1 ? { orient: "bottom", labelLimit: 400 } : null },
        tooltip: [ { field: "series", type: "nominal" }, { field: "x", type: "quantitative", title: c.x_title },
                   { field: "y", type: "quantitative", title: c.y_title, format: ".6~g" } ]
      }
    };
    // The page's Content-Security-Policy allows no eval and no injected style: expressions are
    // interpreted (vega-interpreter), and the tooltip's style is in the page's own sheet.
    const options = { renderer: "svg", actions: false, ast: true, expr: vega.expressionInterpreter,
                      defaultStyle: false, tooltip: { disableDefaultStyle: true } };
    charts.push(vegaEmbed(div, spec, options)
      .then(() => { div.dataset.drawn = "true"; })
      .catch((e) => { errors.push(c.title + ": " + e); }));
  }

  function recordSection(run) {
    const r = run.record;
    const s = el("section", { class: "run", "data-run-id": r.run_id });
    s.append(el("h2", {}, "Run " + r.run_id + " — " + (r.graph.path || "")));
    if (r.graph.description) s.append(el("p", {}, r.graph.description));
    const v = r.versions || {};
    const rows = [
      ["run id", r.run_id], ["status", r.status + (r.exit_code !== undefined ? " (exit " + r.exit_code + ")" : "")],
      ["folder", run.dir], ["graph", r.graph.path], ["graph sha256", r.graph.sha256],
      ["command", (r.command || []).join(" ")], ["working directory", r.cwd],
      ["overrides", (r.overrides || []).join("  ")], ["seed", r.seed], ["threads", r.threads],
      ["start", r.start], ["end", r.end], ["seconds", r.seconds],
      ["embedflow", (v.embedflow || "") + (v.git_commit ? " (" + v.git_commit + ")" : "")],
      ["plugins", (v.plugins || []).map((p) => p.name + " " + p.version + (p.libraries ? " [" + p.libraries + "]" : "")).join(", ")],
      ["libraries loaded", Object.entries(v.loaded_libraries || {}).map(([k, p]) => k + ": " + p.join(" ")).join("; ")],
      ["host", r.host ? r.host.hostname + ", " + r.host.cores + " cores, " + (r.host.memory_bytes / 2 ** 30).toFixed(1) + " GiB, " + r.host.os : ""],
    ];
    if (r.rerun_of) rows.push(["rerun of", r.rerun_of]);
    if (r.error) rows.push(["error", r.error]);
    s.append(el("h3", {}, "Run record"), table(["field", "value"], rows, { class: "record" }));
    if (r.nodes) {
      s.append(el("h3", {}, "Nodes"), table(["node", "type", "mode", "cache", "records in", "records out", "wall s", "CPU s", "progress"],
        r.nodes.map((n) => [n.id, n.type, n.mode, n.cache || "", n.records_in, n.records_out, n.wall_s, n.cpu_s,
          n.progress ? n.progress.done + (n.progress.total ? "/" + n.progress.total : "") + " " + n.progress.unit : ""]),
        { class: "nodes" }));
    }
    const g = el("div", { class: "graph-box" });
    g.innerHTML = run.graph_svg;
    s.append(el("h3", {}, "Graph as it ran"), g);
    const y = el("details", {}, el("summary", {}, "graph.resolved.yaml"), el("pre", {}, r.graph.resolved_yaml));
    s.append(y);
    if (run.charts.length) {
      s.append(el("h3", {}, "Charts"));
      const box = el("div", { class: "charts" });
      s.append(box);
      for (const c of run.charts) chart(box, c);
    }
    if (run.metrics.length) {
      s.append(el("h3", {}, "Metrics"));
      for (const m of run.metrics)
        s.append(el("h4", {}, m.file), table(["metric", "value"], m.rows, { class: "metrics", "data-file": m.file }));
    }
    for (const t of run.tables)
      s.append(el("h4", {}, t.title), table(t.columns, t.rows.slice(0, 500), { class: "rows", "data-file": t.title }));
    if (run.images.length) {
      s.append(el("h3", {}, "Images"));
      const box = el("div", { class: "images" });
      for (const i of run.images) box.append(el("figure", {}, el("img", { src: i.src, alt: i.file }), el("figcaption", {}, i.file)));
      s.append(box);
    }
    if (run.files.length)
      s.append(el("h3", {}, "Other files"), table(["file", "bytes / note"], run.files.map((f) => [f.file, f.note || f.bytes])));
    return s;
  }

  function comparison(cmp) {
    const s = el("section", { class: "comparison" });
    s.append(el("h2", {}, "Comparison with the first run (" + data.runs[0].record.run_id + ")"));
    for (const d of cmp.graph_differences) {
      s.append(el("h3", {}, "Graph of " + d.run));
      s.append(d.differences.length ? el("ul", {}, ...d.differences.map((x) => el("li", {}, x))) : el("p", {}, "the same graph"));
    }
    const ids = data.runs.map((r) => r.record.run_id);
    const head = ["metric", ...ids];
    for (let i = 1; i < ids.length; ++i) head.push("Δ " + ids[i]);
    const rows = cmp.metrics.map((m) => {
      const row = [m.metric, ...m.values];
      for (let i = 1; i < m.values.length; ++i)
        row.push(m.values[0] === null || m.values[i] === null ? null : m.values[i] - m.values[0]);
      return row;
    });
    s.append(el("h3", {}, "Metrics side by side"), table(head, rows, { class: "compare" }));
    return s;
  }

  root.append(el("h1", {}, data.runs.length === 1 ? "embedflow run report" : "embedflow: " + data.runs.length + " runs"));
  root.append(el("p", {}, "Written " + data.generated + ". Hover a chart for its values."));
  if (data.comparison) root.append(comparison(data.comparison));
  for (const run of data.runs) root.append(recordSection(run));
  const status = el("pre", { id: "report-errors" });
  root.append(status);
  Promise.allSettled(charts).then(() => {
    document.body.dataset.chartsExpected = String(charts.length);
    document.body.dataset.chartsDrawn = String(document.querySelectorAll("div.chart[data-drawn=true]").length);
    document.body.dataset.errors = String(errors.length);
    status.textContent = errors.join("\n");
    document.body.dataset.status = "done";
  });
})();
)JS";
}

}  // namespace embedflow::engine
