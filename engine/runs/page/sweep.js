// The sweep report's page script (sweep_report.cpp inlines it after the chart library). It reads
// the data element (sweep.json as the sweep wrote it, plus each point's link), builds every
// section with DOM calls and textContent only, and draws the charts with vega-embed. When every
// chart has drawn, or failed, it sets body[data-status] to "done", and body[data-charts-expected],
// body[data-charts-drawn] and body[data-errors] to counts, as the run report does, so a headless
// browser can tell a page that works from one that does not.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("sweep-data").textContent);
  const sweep = data.sweep;
  const root = document.getElementById("report");
  const errors = [];
  window.addEventListener("error", (e) => errors.push(String(e.message)));

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) e.setAttribute(k, String(v));
    for (const c of children) if (c !== undefined && c !== null) e.append(c instanceof Node ? c : String(c));
    return e;
  }
  const isNum = (v) => typeof v === "number" && isFinite(v);
  const list = (v) => (Array.isArray(v) ? v : []);
  const text = (v) => (v === null || v === undefined ? "" : typeof v === "object" ? JSON.stringify(v) : String(v));
  function table(columns, rows, attrs) {
    const t = el("table", attrs || {});
    t.append(el("tr", {}, ...columns.map((c) => el("th", {}, c))));
    for (const r of rows) t.append(r instanceof Node ? r : el("tr", {}, ...r.map(cell)));
    return t;
  }
  // A table cell: numbers right-aligned, carrying the value they show.
  function cell(v) {
    if (v instanceof Node) return v.tagName === "TD" ? v : el("td", {}, v);
    return isNum(v) ? el("td", { class: "num", "data-value": String(v) }, String(v)) : el("td", {}, text(v));
  }
  function collapsible(summary, open, ...content) {
    const d = el("details", { open: open ? "" : null }, el("summary", {}, summary), ...content);
    return d;
  }

  // Displayed numbers: scale x value, to a number of decimals that shows about three significant
  // digits of the column's largest value.
  function decimalsFor(values) {
    const big = Math.max(0, ...values.filter(isNum).map(Math.abs));
    if (big === 0) return 2;
    return Math.min(6, Math.max(0, 2 - Math.floor(Math.log10(big))));
  }
  const fixed = (v, d) => (isNum(v) ? v.toFixed(d) : "–");
  const unitText = (c) => (c.unit ? " (" + c.unit + ")" : "");
  const scaleOf = (c) => (isNum(c.scale) ? c.scale : 1);
  // With one variant (a seeds-only sweep) the variant says nothing: rows are named by label.
  const oneVariant = list(sweep.variants).length <= 1;
  const rowName = (r) => (!oneVariant && r.variant !== undefined && r.variant !== null && r.variant !== "" ? r.variant + " · " : "") + text(r.label);
  const sameRow = (r, ref) => ref && text(r.variant) === text(ref.variant) && text(r.label) === text(ref.label);
  const stat = (r, key) => (r.metrics && r.metrics[key] && typeof r.metrics[key] === "object" ? r.metrics[key] : null);

  const section = (name, title) => el("section", { class: "part", "data-part": name }, el("h2", {}, title));
  // Builds one part of the page; a part that fails is reported and the others still show.
  function part(name, build) {
    try {
      const s = build();
      if (s) root.append(s);
    } catch (e) {
      errors.push(name + ": " + (e && e.stack ? e.stack : e));
    }
  }

  // Variant name -> its swept variables' values.
  const variantValues = new Map();
  const isObj = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
  for (const v of list(sweep.variants)) if (isObj(v)) variantValues.set(text(v.name), isObj(v.values) ? v.values : {});
  for (const p of list(sweep.points))
    if (isObj(p) && !variantValues.has(text(p.variant))) variantValues.set(text(p.variant), isObj(p.values) ? p.values : {});
  const variables = list(sweep.variables).map(text);
  const seeds = list(sweep.seeds);

  // The best row of a column: the sweep's choice, else the best mean.
  function bestRow(res, c) {
    const rows = list(res.rows);
    const named = res.best && res.best[c.key];
    if (named) {
      const r = rows.find((x) => sameRow(x, named));
      if (r) return r;
    }
    let best = null;
    const higher = c.higher_is_better !== false;
    for (const r of rows) {
      const m = stat(r, c.key);
      if (!m || !isNum(m.mean)) continue;
      const bm = best && stat(best, c.key).mean;
      if (!best || (higher ? m.mean > bm : m.mean < bm)) best = r;
    }
    return best;
  }
  function testBetween(res, key, a, b) {
    return list(res.tests).find((t) => t.metric === key && ((sameRow(a, t.a) && sameRow(b, t.b)) || (sameRow(a, t.b) && sameRow(b, t.a))));
  }

  // ---- 1. title and statistics ----
  part("title", () => {
    const points = list(sweep.points);
    const failed = points.filter((p) => p.status === "failed");
    const head = el("header", { class: "title" });
    head.append(el("h1", {}, "embedflow sweep: " + text(sweep.graph)));
    const facts = [points.length + " points", list(sweep.variants).length + " variants", seeds.length + " seeds" +
      (seeds.length ? " (" + seeds.map(text).join(", ") + ")" : "")];
    if (variables.length) facts.push("swept: " + variables.join(", "));
    facts.push("status: " + text(sweep.status));
    if (isNum(sweep.seconds)) facts.push(sweep.seconds.toFixed(1) + " s");
    head.append(el("p", { class: "facts", "data-sweep-status": text(sweep.status) }, facts.join(" · ")));
    if (failed.length) head.append(el("p", { class: "failed-note" }, failed.length + " of " + points.length + " points failed; see Points below."));
    head.append(el("p", { class: "stats" }, "Statistics: mean over " + seeds.length + " seed" + (seeds.length === 1 ? "" : "s") +
      "; 95% t-interval; paired t-test across seeds, two-sided, uncorrected."));
    head.append(el("p", { class: "written" }, "Written " + text(data.generated) + " from " + text(data.dir) + ". Hover a cell or a chart for its values."));
    return head;
  });

  // ---- 2. results tables ----
  function resultsTable(res) {
    const columns = list(res.columns);
    const rows = list(res.rows);
    const withVariant = rows.some((r) => r.variant !== undefined && r.variant !== null && r.variant !== "");
    const head = [...(withVariant ? ["variant"] : []), "label", ...columns.map((c) => text(c.header || c.key) + unitText(c))];
    const best = new Map(columns.map((c) => [c.key, bestRow(res, c)]));
    const decimals = new Map(columns.map((c) => [c.key, decimalsFor(rows.flatMap((r) => {
      const m = stat(r, c.key);
      return m ? [m.mean, ...(Array.isArray(m.ci) ? m.ci : [])].map((v) => (isNum(v) ? v * scaleOf(c) : null)) : [];
    }))]));
    const trs = rows.map((r) => {
      const tr = el("tr", {});
      if (withVariant) tr.append(el("td", { class: "variant" }, text(r.variant)));
      tr.append(el("td", { class: "label" }, text(r.label)));
      for (const c of columns) {
        const m = stat(r, c.key);
        if (!m || !isNum(m.mean)) {
          tr.append(el("td", { class: "num missing", "data-metric": c.key }, "–"));
          continue;
        }
        const s = scaleOf(c), d = decimals.get(c.key);
        const ci = Array.isArray(m.ci) && isNum(m.ci[0]) && isNum(m.ci[1]) ? m.ci : null;
        const shown = fixed(m.mean * s, d) + (ci ? " [" + fixed(ci[0] * s, d) + ", " + fixed(ci[1] * s, d) + "]" : "");
        const td = el("td", { class: "num cell", "data-metric": c.key, "data-value": String(m.mean), "data-n": isNum(m.n) ? m.n : null }, shown);
        let hover = "mean " + fixed(m.mean * s, d + 2) + text(c.unit) + ", n " + text(m.n) +
          (isNum(m.sd) ? ", sd " + fixed(m.sd * s, d + 2) : "") + (ci ? ", 95% CI [" + fixed(ci[0] * s, d + 2) + ", " + fixed(ci[1] * s, d + 2) + "]" : "");
        if (Array.isArray(m.values) && m.values.length)
          hover += "\nper seed: " + m.values.map((v, i) => (Array.isArray(m.seeds) ? text(m.seeds[i]) + ": " : "") + fixed(v * s, d + 2)).join(", ");
        const b = best.get(c.key);
        if (b === r) {
          td.classList.add("best");
          td.setAttribute("data-best", "true");
          hover += "\nbest of the column";
        } else if (b) {
          const t = testBetween(res, c.key, r, b);
          if (t && isNum(t.p)) {
            td.setAttribute("data-p", String(t.p));
            if (t.p >= 0.05) td.classList.add("tied");
            hover += "\np = " + t.p.toPrecision(3) + " against the best (" + rowName(b) + "), paired t-test, n " + text(t.n) +
              (t.p >= 0.05 ? ": not significantly different" : "");
          } else {
            hover += "\nno test against the best";
          }
        }
        td.setAttribute("title", hover);
        tr.append(td);
      }
      return tr;
    });
    return table(head, trs, { class: "results", "data-node": text(res.node) });
  }
  part("results", () => {
    const results = list(sweep.results);
    const s = section("results", "Results");
    if (!results.length) s.append(el("p", {}, "No results: no point reported a metrics table."));
    for (const res of results) {
      s.append(el("h3", {}, text(res.node) + (res.title ? ": " + text(res.title) : "")));
      s.append(resultsTable(res));
    }
    if (results.length)
      s.append(el("p", { class: "legend" }, "Each cell: mean [95% interval] over seeds. ",
        el("span", { class: "best-sample" }, "Bold"), ": the best of its column. ",
        el("span", { class: "tied-sample" }, "Shaded"), ": not significantly different from the best (paired t-test, p ≥ 0.05). Hover a cell for its p-value and per-seed values."));
    return s;
  });

  // ---- 3. charts ----
  const charts = [];
  function draw(parent, title, spec, attrs) {
    const div = el("div", Object.assign({ class: "chart", "data-chart": title }, attrs || {}));
    parent.append(div);
    spec.$schema = "https://vega.github.io/schema/vega-lite/v5.json";
    spec.title = { text: title, anchor: "start", limit: 0, fontSize: 12 };
    // The page's Content-Security-Policy allows no eval and no injected style: expressions are
    // interpreted (vega-interpreter), and the tooltip's style is in the page's own sheet.
    const options = { renderer: "svg", actions: false, ast: true, expr: vega.expressionInterpreter,
                      defaultStyle: false, tooltip: { disableDefaultStyle: true } };
    charts.push(vegaEmbed(div, spec, options)
      .then(() => { div.dataset.drawn = "true"; })
      .catch((e) => { errors.push(title + ": " + e); }));
  }
  // A variable's values as numbers when every one reads as a number.
  function numericValues(values) {
    const nums = values.map((v) => (typeof v === "number" ? v : String(v).trim() === "" ? NaN : Number(v)));
    return nums.every((n) => isFinite(n)) ? nums : null;
  }
  // Means against x with their intervals as error bars, one colour per series. Data fields have
  // fixed names: names from the sweep never become field names (a dot in one would be a path).
  function lineSpec(points, xTitle, yTitle, xType, xOrder, line) {
    const series = new Set(points.map((p) => p.series));
    const x = { field: "x", type: xType, title: xTitle };
    if (xType === "quantitative") {
      // Values a decade or more apart (learning rates, weight decays) on a log axis.
      const xs = points.map((p) => p.x);
      const logScale = xs.every((v) => v > 0) && Math.max(...xs) >= 10 * Math.min(...xs);
      x.scale = logScale ? { type: "log" } : { zero: false };
      // A grid's few values are the ticks: each point sits on a labelled value.
      const distinct = [...new Set(xs)].sort((a, b) => a - b);
      if (distinct.length <= 12) x.axis = { values: distinct, format: ".4~g", grid: true };
    } else {
      // Points rather than bands: error bar ticks stay small and lines join the points.
      x.sort = xOrder;
      x.scale = { type: "point", padding: 0.5 };
      x.axis = { labelAngle: 0, labelLimit: 220 };
    }
    const color = { field: "series", type: "nominal", title: null,
                    legend: series.size > 1 && line ? { orient: "bottom", labelLimit: 400, columns: 2 } : null };
    const tooltip = [{ field: "series", type: "nominal", title: "series" }, { field: "x", type: xType === "quantitative" ? "quantitative" : "nominal", title: xTitle },
      { field: "y", type: "quantitative", title: yTitle, format: ".4~g" }, { field: "lo", type: "quantitative", title: "95% low", format: ".4~g" },
      { field: "hi", type: "quantitative", title: "95% high", format: ".4~g" }, { field: "n", type: "quantitative", title: "seeds" }];
    return {
      width: 460, height: 220,
      data: { values: points },
      layer: [
        { transform: [{ filter: "isValid(datum.lo) && isValid(datum.hi)" }],
          mark: { type: "errorbar", ticks: true },
          encoding: { x, y: { field: "lo", type: "quantitative", title: yTitle, scale: { zero: false } }, y2: { field: "hi" }, color } },
        { mark: line ? { type: "line", point: { filled: true, size: 40 }, tooltip: true } : { type: "point", filled: true, size: 60, tooltip: true },
          encoding: { x, y: { field: "y", type: "quantitative", title: yTitle, scale: { zero: false } }, color, tooltip } },
      ],
    };
  }
  part("charts", () => {
    const s = section("charts", "Charts");
    s.append(el("p", {}, "Mean over seeds with its 95% interval, for each metric against each swept variable; one line per label and per value of the other swept variables."));
    const box = el("div", { class: "charts" });
    s.append(box);
    for (const res of list(sweep.results)) {
      const rows = list(res.rows);
      const labels = new Set(rows.map((r) => text(r.label)));
      for (const c of list(res.columns)) {
        const sc = scaleOf(c);
        const yTitle = text(c.header || c.key) + unitText(c);
        const prefix = text(res.node) + ": " + text(c.header || c.key);
        const usable = rows.filter((r) => stat(r, c.key) && isNum(stat(r, c.key).mean));
        const point = (r, x, series) => {
          const m = stat(r, c.key);
          const ci = Array.isArray(m.ci) && isNum(m.ci[0]) && isNum(m.ci[1]) ? m.ci : [null, null];
          return { x, y: m.mean * sc, lo: isNum(ci[0]) ? ci[0] * sc : null, hi: isNum(ci[1]) ? ci[1] * sc : null,
                   n: isNum(m.n) ? m.n : null, series };
        };
        let drawn = 0;
        for (const v of variables) {
          const valueOf = (r) => text((variantValues.get(text(r.variant)) || {})[v]);
          const distinct = [...new Set(usable.map(valueOf))];
          if (distinct.length < 2) continue;
          const nums = numericValues(distinct);
          const asNumber = new Map(distinct.map((d, i) => [d, nums ? nums[i] : d]));
          const others = variables.filter((o) => o !== v);
          const points = usable.map((r) => {
            const vals = variantValues.get(text(r.variant)) || {};
            const parts = [...(labels.size > 1 || !others.length ? [text(r.label)] : []), ...others.map((o) => o + "=" + text(vals[o]))];
            return point(r, asNumber.get(valueOf(r)), parts.join(", "));
          });
          draw(box, prefix + " against " + v, lineSpec(points, v, yTitle, nums ? "quantitative" : "ordinal", distinct, true));
          ++drawn;
        }
        if (!drawn && usable.length) {
          // Nothing swept (seeds only), or no variable took two values: a dot per row.
          const names = usable.map(rowName);
          draw(box, prefix, lineSpec(usable.map((r, i) => point(r, names[i], names[i])), "label", yTitle, "nominal", names, false));
        }
      }
    }
    // --against METRIC:ROW: every metric against the METRIC of each variant's ROW row (e.g. what
    // each model learnt against its pair set's label precision). A row's label loses the text
    // that follows ROW in that variant's ROW row (the variant's tag, e.g. its pair set's name),
    // so one model's rows across variants form one line.
    for (const a of list(sweep.against)) {
      if (!isObj(a)) continue;
      const metric = text(a.metric), rowPrefix = text(a.row);
      const xOf = new Map();
      let xTitle = metric;
      for (const res of list(sweep.results)) {
        const col = list(res.columns).find((c) => text(c.key) === metric);
        if (!col) continue;
        for (const r of list(res.rows)) {
          const label = text(r.label), m = stat(r, metric);
          if (!label.startsWith(rowPrefix) || !m || !isNum(m.mean) || xOf.has(text(r.variant))) continue;
          xOf.set(text(r.variant), { x: m.mean * scaleOf(col), tag: label.slice(rowPrefix.length).trim() });
          xTitle = text(col.header || col.key) + unitText(col) + " (" + rowPrefix + ")";
        }
      }
      if (new Set([...xOf.values()].map((v) => v.x)).size < 2) {
        s.append(el("p", {}, "Against " + metric + " of the " + rowPrefix + " rows: fewer than two variants with distinct values."));
        continue;
      }
      for (const res of list(sweep.results)) {
        for (const c of list(res.columns)) {
          if (text(c.key) === metric) continue;
          const sc = scaleOf(c);
          const points = [];
          for (const r of list(res.rows)) {
            const label = text(r.label), m = stat(r, c.key), at = xOf.get(text(r.variant));
            if (!at || label.startsWith(rowPrefix) || !m || !isNum(m.mean)) continue;
            const series = at.tag && label.includes(at.tag) ? label.replace(at.tag, "").replace(/\s+/g, " ").trim() : label;
            const ci = Array.isArray(m.ci) && isNum(m.ci[0]) && isNum(m.ci[1]) ? m.ci : [null, null];
            points.push({ x: at.x, y: m.mean * sc, lo: isNum(ci[0]) ? ci[0] * sc : null, hi: isNum(ci[1]) ? ci[1] * sc : null,
                          n: isNum(m.n) ? m.n : null, series });
          }
          if (new Set(points.map((p) => p.x)).size < 2) continue;
          const title = text(res.node) + ": " + text(c.header || c.key) + " against " + xTitle;
          draw(box, title, lineSpec(points, xTitle, text(c.header || c.key) + unitText(c), "quantitative", null, true),
               { "data-series": JSON.stringify([...new Set(points.map((p) => p.series))]),
                 "data-x": JSON.stringify([...new Set(points.map((p) => p.x))].sort((a, b) => a - b)) });
        }
      }
    }
    if (!charts.length) s.append(el("p", {}, "Nothing to chart."));
    return s;
  });

  // ---- 4. pairwise tests ----
  part("tests", () => {
    const s = section("tests", "Pairwise tests");
    const rows = [];
    for (const res of list(sweep.results)) {
      const byKey = new Map(list(res.columns).map((c) => [c.key, c]));
      for (const t of list(res.tests)) {
        const c = byKey.get(t.metric) || { key: t.metric };
        const sc = scaleOf(c);
        const ci = Array.isArray(t.ci) && isNum(t.ci[0]) && isNum(t.ci[1]) ? t.ci : null;
        const diff = isNum(t.mean_difference)
          ? el("td", { class: "num", "data-value": String(t.mean_difference) }, fixed(t.mean_difference * sc, 3) + (ci ? " [" + fixed(ci[0] * sc, 3) + ", " + fixed(ci[1] * sc, 3) + "]" : "") + text(c.unit ? " " + c.unit : ""))
          : el("td", {}, "–");
        const p = isNum(t.p) ? el("td", { class: "num" + (t.p < 0.05 ? " significant" : ""), "data-value": String(t.p) }, t.p.toPrecision(3)) : el("td", {}, "–");
        // t is a string ("inf") when every paired difference was the same.
        const tCell = isNum(t.t) ? el("td", { class: "num", "data-value": String(t.t) }, t.t.toFixed(3))
          : el("td", { class: "num" }, typeof t.t === "string" ? t.t : "–");
        rows.push([text(res.node), text(c.header || t.metric), rowName(t.a || {}), rowName(t.b || {}), t.n, diff, tCell, p]);
      }
    }
    s.append(el("p", {}, text(rows.length) + " tests: " + "paired t-test across seeds (a − b), two-sided, uncorrected for multiple comparisons; bold p < 0.05."));
    if (rows.length) s.append(collapsible("Show every test", rows.length <= 20,
      table(["table", "metric", "a", "b", "n", "mean difference a − b [95% CI]", "t", "p"], rows, { class: "tests" })));
    return s;
  });

  // ---- 5. stages ----
  part("stages", () => {
    const stages = list(sweep.stages);
    if (!stages.length) return null;
    const s = section("stages", "Stages: computed once, replayed from the cache");
    s.append(table(["node", "type", "cached", "computed", "replayed", "skipped"],
      stages.map((g) => [text(g.node), text(g.type), g.cached === true ? "yes" : g.cached === false ? "no" : text(g.cached), g.computed, g.replayed, g.skipped]),
      { class: "stages" }));
    return s;
  });

  // ---- 6. points ----
  part("points", () => {
    const points = list(sweep.points);
    const s = section("points", "Points");
    const rows = points.map((p) => {
      const failed = p.status === "failed";
      const status = el("td", { class: "status" }, text(p.status) + (isNum(p.exit_code) && p.exit_code !== 0 ? " (exit " + p.exit_code + ")" : "") +
        (p.resumed === true ? ", resumed" : ""));
      const nodes = p.nodes && typeof p.nodes === "object" ? Object.entries(p.nodes).map(([k, v]) => k + ": " + text(v)).join(", ") : "";
      const link = typeof p.href === "string" ? el("a", { href: p.href }, p.has_report ? "report" : "folder") : text(p.dir);
      const tr = el("tr", { class: "point" + (failed ? " failed" : ""), "data-status": text(p.status), "data-name": text(p.name) },
        el("td", {}, text(p.name)), el("td", {}, text(p.variant)), cell(p.seed), status,
        isNum(p.seconds) ? el("td", { class: "num", "data-value": String(p.seconds) }, p.seconds.toFixed(p.seconds < 10 ? 2 : 1)) : el("td", {}),
        el("td", { class: "nodes" }, nodes), el("td", {}, link));
      if (failed || p.error) tr.append(el("td", { class: "error" }, text(p.error)));
      else tr.append(el("td", {}));
      return tr;
    });
    s.append(table(["point", "variant", "seed", "status", "seconds", "nodes", "output", "error"], rows, { class: "points" }));
    return s;
  });

  // ---- 7. graph differences ----
  part("differences", () => {
    const diffs = list(sweep.graph_differences);
    if (!diffs.length) return null;
    const s = section("differences", "How the variants' graphs differ");
    for (const d of diffs) {
      const items = list(d.differences);
      s.append(collapsible(text(d.variant) + " against " + text(d.against) + " (" + items.length + " difference" + (items.length === 1 ? "" : "s") + ")",
        false, items.length ? el("ul", {}, ...items.map((x) => el("li", {}, text(x)))) : el("p", {}, "the same graph")));
    }
    return s;
  });

  // ---- 8. selection ----
  part("selection", () => {
    const sel = sweep.selection;
    if (!sel || typeof sel !== "object") return null;
    const s = section("selection", "Selected variant");
    // The metric is "[node/][label/]key": its column gives the value's unit.
    const path = text(sel.metric);
    const parts = path.split("/");
    const key = parts[parts.length - 1];
    const res = list(sweep.results).find((r) => (parts.length < 3 || text(r.node) === parts[0]) && list(r.columns).some((c) => c.key === key));
    const col = res && list(res.columns).find((c) => c.key === key);
    const shown = (v) => (col ? fixed(v * scaleOf(col), decimalsFor([v * scaleOf(col)]) + 1) + text(col.unit) : String(v));
    const ci = Array.isArray(sel.ci) && isNum(sel.ci[0]) && isNum(sel.ci[1]) ? " [" + shown(sel.ci[0]) + ", " + shown(sel.ci[1]) + "]" : "";
    if (sel.best_variant !== undefined && sel.best_variant !== null) {
      s.append(el("p", { class: "chosen", "data-value": isNum(sel.value) ? String(sel.value) : null }, "Chosen by ", el("code", {}, path),
        " (mean over seeds, " + (sel.higher_is_better === false ? "lowest" : "highest") + " best): ",
        el("strong", { class: "best-variant" }, text(sel.best_variant)), isNum(sel.value) ? " — " + shown(sel.value) + ci : ""));
    } else {
      s.append(el("p", {}, "Selection by ", el("code", {}, path), ": none chosen."));
    }
    const then = list(sel.then);
    if (sel.dir !== undefined)
      s.append(el("p", { class: sel.status === "failed" ? "failed-note" : "" }, "Then run" + (isNum(sel.seed) ? " with seed " + sel.seed : "") +
        (then.length ? " and " + then.map(text).join("  ") : "") + " in " + text(sel.dir) + ": " + text(sel.status) +
        (isNum(sel.seconds) ? " (" + sel.seconds.toFixed(1) + " s)" : "") + "."));
    if (sel.error) s.append(el("p", { class: "failed-note selection-error" }, text(sel.error)));
    for (const r of list(sel.results)) {
      const columns = list(r.columns);
      s.append(el("h3", {}, text(r.node) + (r.title ? ": " + text(r.title) : "")));
      // A run record's table: each row's "values" (or "metrics") by column key, plain numbers.
      s.append(table(["label", ...columns.map((c) => text(c.header || c.key) + unitText(c))],
        list(r.rows).map((row) => [text(row.label), ...columns.map((c) => {
          const src = (row.values && typeof row.values === "object" && !Array.isArray(row.values) ? row.values : row.metrics) || {};
          let v = src[c.key];
          if (v && typeof v === "object") v = v.mean;
          return isNum(v) ? el("td", { class: "num", "data-metric": c.key, "data-value": String(v) }, fixed(v * scaleOf(c), decimalsFor([v * scaleOf(c)]) + 1))
            : el("td", { class: "num missing" }, "–");
        })]), { class: "selection-results", "data-node": text(r.node) }));
    }
    return s;
  });

  // ---- provenance ----
  part("provenance", () => {
    const rows = [["graph", text(sweep.graph)], ["command", list(sweep.command).map(text).join(" ")], ["created", text(sweep.created)],
      ["base overrides", list(sweep.base_overrides).map(text).join("  ")], ["swept variables", variables.join(", ")],
      ["seeds", seeds.map(text).join(", ")], ["folder", text(data.dir)], ["format", text(sweep.format)]];
    return el("section", { class: "part", "data-part": "provenance" }, collapsible("Provenance", false, table(["field", "value"], rows, { class: "provenance" })));
  });

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
