// Helpers the run report's script (run.js) is built on; the build puts this file before it in
// one inline script. DOM calls and textContent only: nothing from the data becomes markup.
"use strict";
const report = {
  errors: [],
  charts: [],
  el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) e.setAttribute(k, String(v));
    for (const c of children) if (c !== undefined && c !== null) e.append(c instanceof Node ? c : String(c));
    return e;
  },
  isNum: (v) => typeof v === "number" && isFinite(v),
  list: (v) => (Array.isArray(v) ? v : []),
  text: (v) => (v === null || v === undefined ? "" : typeof v === "object" ? JSON.stringify(v) : String(v)),
  isObj: (v) => v !== null && typeof v === "object" && !Array.isArray(v),
  // Decimals that show about three significant digits of the largest magnitude among `values`.
  decimalsFor(values) {
    const big = Math.max(0, ...values.filter(report.isNum).map(Math.abs));
    if (big === 0) return 2;
    return Math.min(6, Math.max(0, 2 - Math.floor(Math.log10(big))));
  },
  fixed: (v, d) => (report.isNum(v) ? v.toFixed(d) : "–"),
  table(head, rows, attrs) {
    const t = report.el("table", attrs || {});
    for (const h of head) t.append(h instanceof Node ? h : report.el("tr", {}, ...h.map((c) => report.el("th", {}, c))));
    for (const r of rows) t.append(r instanceof Node ? r : report.el("tr", {}, ...r.map(report.cell)));
    return t;
  },
  cell(v) {
    if (v instanceof Node) return v.tagName === "TD" ? v : report.el("td", {}, v);
    return report.isNum(v) ? report.el("td", { class: "num", "data-value": String(v) }, String(v)) : report.el("td", {}, report.text(v));
  },
  collapsible(summary, open, ...content) {
    return report.el("details", { open: open ? "" : null }, report.el("summary", {}, summary), ...content);
  },
  // Draws a Vega-Lite spec into a new chart box; the page's status waits for every chart.
  draw(parent, title, spec, attrs) {
    const div = report.el("div", Object.assign({ class: "chart", "data-chart": title }, attrs || {}));
    parent.append(div);
    spec.$schema = "https://vega.github.io/schema/vega-lite/v5.json";
    spec.title = { text: title, anchor: "start", limit: 0, fontSize: 12 };
    // The page's Content-Security-Policy allows no eval and no injected style: expressions are
    // interpreted (vega-interpreter), and the tooltip's style is in the page's own sheet.
    const options = { renderer: "svg", actions: false, ast: true, expr: vega.expressionInterpreter,
                      defaultStyle: false, tooltip: { disableDefaultStyle: true } };
    report.charts.push(vegaEmbed(div, spec, options)
      .then(() => { div.dataset.drawn = "true"; })
      .catch((e) => { report.errors.push(title + ": " + e); }));
    return div;
  },
  // Builds one part of the page; a part that fails is reported and the others still show.
  part(root, name, build) {
    try {
      const s = build();
      if (s) root.append(s);
    } catch (e) {
      report.errors.push(name + ": " + (e && e.stack ? e.stack : e));
    }
  },
  // When every chart has drawn or failed: body[data-status] "done" and the counts, so a headless
  // browser can tell a page that works from one that does not.
  finish(root) {
    window.addEventListener("error", (e) => report.errors.push(String(e.message)));
    const status = report.el("pre", { id: "report-errors" });
    root.append(status);
    Promise.allSettled(report.charts).then(() => {
      document.body.dataset.chartsExpected = String(report.charts.length);
      document.body.dataset.chartsDrawn = String(document.querySelectorAll("div.chart[data-drawn=true]").length);
      document.body.dataset.errors = String(report.errors.length);
      status.textContent = report.errors.join("\n");
      document.body.dataset.status = "done";
    });
  },
};
