// The run report's page script (run_report.cpp inlines common.js and this file after the chart
// library). Results first: the headline table, then every table, chart and figure the run's
// nodes published, in the graph's order; tables and charts of one title are merged across nodes
// and across runs. The run records follow, collapsed.
(function () {
  const { el, isNum, list, text, isObj, table, collapsible, draw, part, fixed, decimalsFor } = report;
  window.addEventListener("error", (e) => report.errors.push(String(e.message)));
  const data = JSON.parse(document.getElementById("report-data").textContent);
  const root = document.getElementById("report");
  const runs = list(data.runs);
  const many = runs.length > 1;
  const names = runs.map((r, i) => text(r.name) || "run " + (i + 1));
  const unitText = (u) => (u ? " (" + u + ")" : "");
  const scaleOf = (c) => (isNum(c.scale) ? c.scale : 1);

  // Nodes in the graph's order: the first run's, then any only another run has.
  const nodeOrder = [];
  for (const r of runs) for (const id of list(r.node_order)) if (!nodeOrder.includes(text(id))) nodeOrder.push(text(id));
  const nodeRank = (id) => (nodeOrder.includes(id) ? nodeOrder.indexOf(id) : nodeOrder.length);

  // ---- merging: one group per title, holding every node's and every run's part ----
  function groupsOf(kind) {
    const groups = new Map();
    runs.forEach((r, ri) => {
      for (const item of list(r[kind])) {
        if (!isObj(item)) continue;
        const title = text(item.title);
        if (!groups.has(title)) groups.set(title, { title, items: [], firstNode: text(item.node) });
        const g = groups.get(title);
        g.items.push({ run: ri, item });
        if (nodeRank(text(item.node)) < nodeRank(g.firstNode)) g.firstNode = text(item.node);
      }
    });
    return groups;
  }
  const tableGroups = groupsOf("tables");
  const chartGroups = groupsOf("charts");
  const figureGroups = groupsOf("figures");

  // ---- tables ----
  function tableView(g) {
    const columns = [];
    const byKey = new Map();
    for (const { item } of g.items)
      for (const c of list(item.columns))
        if (isObj(c) && !byKey.has(text(c.key))) {
          byKey.set(text(c.key), c);
          columns.push(c);
        }
    // Rows by label; a label two nodes of one run both use is told apart by its node.
    const labelNodes = new Map();
    for (const { item } of g.items)
      for (const row of list(item.rows)) {
        const l = text(row.label);
        if (!labelNodes.has(l)) labelNodes.set(l, new Set());
        labelNodes.get(l).add(text(item.node));
      }
    const rows = new Map();
    for (const { run, item } of g.items)
      for (const row of list(item.rows)) {
        if (!isObj(row)) continue;
        const l = text(row.label);
        const key = labelNodes.get(l).size > 1 ? l + " (" + text(item.node) + ")" : l;
        if (!rows.has(key)) rows.set(key, { label: key, node: text(item.node), cells: runs.map(() => null) });
        rows.get(key).cells[run] = row;
      }
    const value = (row, c) => (row && isObj(row.values) && isNum(row.values[c.key]) ? row.values[c.key] : null);
    const interval = (row, c) => {
      const ci = row && isObj(row.intervals) ? row.intervals[c.key] : null;
      return Array.isArray(ci) && isNum(ci[0]) && isNum(ci[1]) ? ci : null;
    };
    const head1 = [el("th", { rowspan: many ? 2 : 1 }, "")];
    const head2 = [];
    const decimals = new Map();
    for (const c of columns) {
      const s = scaleOf(c);
      const shown = [];
      for (const r of rows.values()) for (const cell of r.cells) {
        const v = value(cell, c);
        if (v !== null) shown.push(v * s);
        const ci = interval(cell, c);
        if (ci) shown.push(ci[0] * s, ci[1] * s);
      }
      // Whole numbers (counts) without decimals; others to about three significant digits of
      // the column's largest, and at least one decimal.
      const whole = shown.every((v) => Number.isInteger(v));
      decimals.set(c.key, whole ? 0 : Math.max(1, decimalsFor(shown)));
      const header = text(c.header || c.key) + unitText(c.unit);
      if (!many) {
        head1.push(el("th", { "data-metric": c.key }, header));
        continue;
      }
      head1.push(el("th", { class: "run", colspan: 2 * runs.length - 1, "data-metric": c.key }, header));
      runs.forEach((_, i) => {
        head2.push(el("th", { "data-run": names[i] }, names[i]));
        if (i > 0) head2.push(el("th", { class: "delta" }, "Δ"));
      });
    }
    // The best value of each column within each run, when there are rows to choose between.
    const best = new Map();
    if (rows.size > 1)
      for (const c of columns)
        runs.forEach((_, ri) => {
          let b = null;
          for (const r of rows.values()) {
            const v = value(r.cells[ri], c);
            if (v !== null && (b === null || (c.higher_is_better !== false ? v > b : v < b))) b = v;
          }
          best.set(c.key + "\u0000" + ri, b);
        });
    const trs = [];
    for (const r of rows.values()) {
      const tr = el("tr", { "data-label": r.label });
      tr.append(el("td", { class: "label" }, r.label));
      for (const c of columns) {
        const s = scaleOf(c), d = decimals.get(c.key);
        runs.forEach((_, ri) => {
          const v = value(r.cells[ri], c);
          if (v === null) {
            tr.append(el("td", { class: "num missing", "data-metric": c.key, "data-run": names[ri] }, "–"));
          } else {
            const ci = interval(r.cells[ri], c);
            const shown = fixed(v * s, d) + (ci ? " [" + fixed(ci[0] * s, d) + ", " + fixed(ci[1] * s, d) + "]" : "");
            const hover = String(v * s) + (c.unit ? " " + c.unit : "") + (s !== 1 ? " (stored " + String(v) + ")" : "") +
              (ci ? "\n95% interval [" + String(ci[0] * s) + ", " + String(ci[1] * s) + "]" : "");
            const isBest = best.get(c.key + "\u0000" + ri) === v;
            tr.append(el("td", { class: "num value" + (isBest ? " best" : ""), "data-metric": c.key, "data-run": names[ri],
                                 "data-value": String(v), title: hover }, shown));
          }
          if (ri > 0) {
            const v0 = value(r.cells[0], c);
            if (v === null || v0 === null) {
              tr.append(el("td", { class: "num delta missing" }, ""));
            } else {
              const delta = v - v0;
              const dir = delta === 0 ? "" : (delta > 0) === (c.higher_is_better !== false) ? " better" : " worse";
              tr.append(el("td", { class: "num delta" + dir, "data-metric": c.key, "data-run": names[ri], "data-delta": String(delta),
                                   title: "Δ against " + names[0] + ": " + String(delta * s) },
                           (delta > 0 ? "+" : "") + fixed(delta * s, d)));
            }
          }
        });
      }
      trs.push(tr);
    }
    const head = [el("tr", {}, ...head1)];
    if (many) head.push(el("tr", {}, ...head2));
    const nodes = [...new Set(g.items.map(({ item }) => text(item.node)))];
    const box = el("div", { class: "result-table" });
    box.append(el("h3", {}, g.title, " ", el("span", { class: "node-id" }, nodes.join(", "))));
    box.append(table(head, trs, { class: "results", "data-title": g.title }));
    if ([...rows.values()].some((r) => r.cells.some((cell) => cell && isObj(cell.intervals))))
      box.append(el("p", { class: "note" }, "Brackets: the 95% interval the node computed. Hover a value for its full precision."));
    return box;
  }

  // ---- charts ----
  const maxPointsPerSeries = 1500;
  function chartView(parent, g) {
    const nodes = new Set(g.items.map(({ item }) => text(item.node)));
    const first = g.items[0].item;
    const x = isObj(first.x) ? first.x : {}, y = isObj(first.y) ? first.y : {};
    const points = [];
    let longest = 0, fewOk = false, bars = false, bands = false;
    // Series keep their own names when those tell them apart (every method's CMC); otherwise
    // they are named by their node (every trainer's "loss").
    const ownNames = new Map();
    for (const { run, item } of g.items)
      for (const s of list(item.series)) if (isObj(s)) ownNames.set(run + "\u0000" + text(s.name), (ownNames.get(run + "\u0000" + text(s.name)) || 0) + 1);
    const namesDistinct = [...ownNames.entries()].every(([k, n]) => n === 1 && k.split("\u0000")[1] !== "");
    for (const { run, item } of g.items) {
      fewOk = fewOk || item.few_points === true;
      bars = bars || item.kind === "bars";
      const series = list(item.series);
      for (const s of series) {
        if (!isObj(s)) continue;
        let name = text(s.name);
        if (nodes.size > 1 && !namesDistinct) name = text(item.node) + (series.length > 1 || !name ? (name ? ": " + name : "") : "");
        if (many) name = names[run] + " · " + name;
        const xs = list(s.x), ys = list(s.y), lo = list(s.lo), hi = list(s.hi);
        const n = Math.min(xs.length, ys.length);
        longest = Math.max(longest, n);
        // Long curves are thinned evenly for drawing, their last point kept.
        const step = Math.max(1, Math.ceil(n / maxPointsPerSeries));
        for (let i = 0; i < n; i += step) {
          const j = i + step >= n ? n - 1 : i;
          if (!isNum(xs[j]) || !isNum(ys[j])) continue;
          const p = { x: xs[j], y: ys[j], series: name };
          if (isNum(lo[j]) && isNum(hi[j])) { p.lo = lo[j]; p.hi = hi[j]; bands = true; }
          points.push(p);
          if (j === n - 1) break;
        }
      }
    }
    const title = g.title;
    if (longest < 3 && !fewOk) {
      parent.append(el("p", { class: "note", "data-chart-skipped": title }, title + ": not drawn (" + longest +
        " point" + (longest === 1 ? "" : "s") + "; a chart needs 3 unless its node says otherwise)."));
      return;
    }
    const seriesCount = new Set(points.map((p) => p.series)).size;
    const xTitle = text(x.label) + unitText(x.unit), yTitle = text(y.label) + unitText(y.unit);
    const xEnc = { field: "x", type: "quantitative", title: xTitle, scale: x.log ? { type: "log" } : { zero: false } };
    const yEnc = { field: "y", type: "quantitative", title: yTitle, scale: y.log ? { type: "log" } : { zero: bars },
                   axis: { format: ".3~g" } };
    const color = { field: "series", type: "nominal", title: null,
                    legend: seriesCount > 1 ? { orient: "bottom", labelLimit: 400, columns: 2 } : null };
    const tooltip = [{ field: "series", type: "nominal", title: "series" }, { field: "x", type: "quantitative", title: xTitle },
                     { field: "y", type: "quantitative", title: yTitle, format: ".6~g" }];
    const layers = [];
    if (bands)
      layers.push({ transform: [{ filter: "isValid(datum.lo) && isValid(datum.hi)" }], mark: { type: "errorband", opacity: 0.2 },
                    encoding: { x: xEnc, y: { field: "lo", type: "quantitative", title: yTitle }, y2: { field: "hi" }, color } });
    const perSeries = points.length / Math.max(1, seriesCount);
    layers.push({ mark: bars ? { type: "bar", opacity: seriesCount > 1 ? 0.55 : 0.9, tooltip: true }
                             : { type: "line", point: perSeries <= 60, tooltip: true, strokeWidth: 1.5 },
                  encoding: { x: xEnc, y: yEnc, color, tooltip } });
    draw(parent, title, { width: 520, height: 240, data: { values: points }, layer: layers },
         { "data-points": String(longest), "data-series": String(seriesCount), "data-few-points": fewOk ? "true" : null });
  }

  // ---- figures ----
  function figureView(parent, g) {
    for (const { run, item } of g.items) {
      const caption = (many ? names[run] + " · " : "") + g.title + (item.caption ? ": " + text(item.caption) : "");
      if (item.src) parent.append(el("figure", {}, el("img", { src: item.src, alt: caption }), el("figcaption", {}, caption)));
      else parent.append(el("p", { class: "note" }, caption + " (" + text(item.file) + "): " + text(item.note)));
    }
  }

  // ---- 1. title ----
  part(root, "title", () => {
    const head = el("header", { class: "title" });
    const r0 = isObj(runs[0].record) ? runs[0].record : {};
    const graph = isObj(r0.graph) ? text(r0.graph.path) : "";
    head.append(el("h1", {}, many ? graph + ": " + runs.length + " runs compared" : graph));
    for (const [i, r] of runs.entries()) {
      const rec = isObj(r.record) ? r.record : {};
      const facts = [];
      if (many) facts.push(names[i]);
      facts.push("run " + text(rec.run_id), text(rec.status));
      if (isNum(rec.seconds)) facts.push(rec.seconds < 120 ? rec.seconds.toFixed(1) + " s" : (rec.seconds / 60).toFixed(1) + " min");
      if (rec.seed !== undefined) facts.push("seed " + text(rec.seed));
      if (list(rec.overrides).length) facts.push("--set " + list(rec.overrides).map(text).join(" --set "));
      head.append(el("p", { class: "facts", "data-run-status": text(rec.status) }, facts.join(" · ")));
      if (rec.error) head.append(el("p", { class: "failed-note" }, text(rec.error)));
    }
    const desc = isObj(r0.graph) ? text(r0.graph.description) : "";
    if (desc) {
      const sentence = desc.split(/(?<=\.)\s|\n\s*\n/)[0];
      head.append(el("p", { class: "description" }, sentence));
    }
    head.append(el("p", { class: "written" }, "Written " + text(data.generated) + ". Hover a value or a chart for full precision."));
    return head;
  });

  // ---- 2. headline ----
  const shown = new Set();
  part(root, "headline", () => {
    const heads = [...tableGroups.values()].filter((g) => g.items.some(({ item }) => item.headline === true));
    if (!heads.length) return null;
    const s = el("section", { class: "headline" }, el("h2", {}, "Headline"));
    for (const g of heads) {
      s.append(tableView(g));
      shown.add("tables\u0000" + g.title);
    }
    return s;
  });

  // ---- 3. results in the graph's order ----
  part(root, "results", () => {
    const s = el("section", { class: "results" }, el("h2", {}, "Results"));
    let any = false;
    const kinds = [["tables", tableGroups], ["charts", chartGroups], ["figures", figureGroups]];
    const byNode = [];
    for (const [kind, groups] of kinds) for (const g of groups.values()) byNode.push({ kind, g, rank: nodeRank(g.firstNode) });
    byNode.sort((a, b) => a.rank - b.rank);  // stable: tables, charts, figures within a node
    let chartBox = null, figureBox = null;
    for (const { kind, g } of byNode) {
      if (shown.has(kind + "\u0000" + g.title)) continue;
      shown.add(kind + "\u0000" + g.title);
      any = true;
      if (kind === "tables") {
        chartBox = figureBox = null;
        s.append(tableView(g));
      } else if (kind === "charts") {
        if (!chartBox) s.append((chartBox = el("div", { class: "charts" })));
        chartView(chartBox, g);
      } else {
        if (!figureBox) s.append((figureBox = el("div", { class: "figures" })));
        figureView(figureBox, g);
      }
    }
    if (!any) s.append(el("p", {}, "No node of this graph published results (tables, charts or figures). The files the run wrote are listed below."));
    return s;
  });

  // ---- 4. how the graphs differ ----
  if (many)
    part(root, "differences", () => {
      const s = el("section", { class: "differences" }, el("h2", {}, "How the graphs differ from " + names[0] + "'s"));
      for (const d of list(data.graph_differences)) {
        const items = list(d.differences).map((x) => el("li", {}, text(x.what) + (x.from !== undefined ? ": " + text(x.from) + " → " + text(x.to) : "")));
        s.append(el("h3", {}, text(d.run)), items.length ? el("ul", { class: "differences" }, ...items) : el("p", {}, "the same graph (apart from output paths)"));
      }
      return s;
    });

  // ---- 5. the records, collapsed ----
  function recordView(run, i) {
    const r = isObj(run.record) ? run.record : {};
    const g = isObj(r.graph) ? r.graph : {};
    const v = isObj(r.versions) ? r.versions : {};
    const s = el("section", { class: "run", "data-run-id": text(r.run_id) });
    s.append(el("h2", {}, (many ? names[i] + ": " : "") + "run " + text(r.run_id)));
    const rows = [
      ["run id", r.run_id], ["status", text(r.status) + (r.exit_code !== undefined ? " (exit " + text(r.exit_code) + ")" : "")],
      ["folder", run.dir], ["graph", g.path], ["graph sha256", g.sha256],
      ["command", list(r.command).map(text).join(" ")], ["working directory", r.cwd],
      ["overrides", list(r.overrides).map(text).join("  ")], ["seed", r.seed], ["threads", r.threads],
      ["start", r.start], ["end", r.end], ["seconds", r.seconds],
      ["embedflow", text(v.embedflow) + (v.git_commit ? " (" + text(v.git_commit) + ")" : "")],
      ["host", isObj(r.host) ? text(r.host.hostname) + ", " + text(r.host.cores) + " cores, " +
        (isNum(r.host.memory_bytes) ? (r.host.memory_bytes / 2 ** 30).toFixed(1) + " GiB, " : "") + text(r.host.os) : ""],
    ];
    if (r.rerun_of) rows.push(["rerun of", r.rerun_of]);
    if (r.error) rows.push(["error", r.error]);
    s.append(collapsible("Run record", false, table([["field", "value"]], rows, { class: "record" })));
    if (g.description) s.append(collapsible("Graph description", false, el("pre", {}, text(g.description))));
    const texts = list(r.texts).filter(isObj);
    if (texts.length)
      s.append(collapsible("Node notes (" + texts.length + ")", false,
        table([["node", "what", "text"]], texts.map((t) => [text(t.node), text(t.title), el("td", {}, el("pre", {}, text(t.text)))]), { class: "texts" })));
    const box = el("div", { class: "graph-box" });
    box.innerHTML = text(run.graph_svg);  // built by the report from the graph, every name escaped
    s.append(collapsible("Graph as it ran", false, box, el("pre", {}, text(g.resolved_yaml))));
    if (list(r.nodes).length)
      s.append(collapsible("Node timings", false, table([["node", "type", "mode", "cache", "records in", "records out", "wall s", "CPU s", "progress"]],
        list(r.nodes).map((n) => [n.id, n.type, n.mode, n.cache || "", n.records_in, n.records_out,
          isNum(n.wall_s) ? Number(n.wall_s.toFixed(3)) : n.wall_s, isNum(n.cpu_s) ? Number(n.cpu_s.toFixed(3)) : n.cpu_s,
          isObj(n.progress) ? text(n.progress.done) + (n.progress.total ? "/" + text(n.progress.total) : "") + " " + text(n.progress.unit) : ""]),
        { class: "nodes" })));
    const libs = [];
    for (const p of list(v.plugins)) libs.push([text(p.name), text(p.version), text(p.libraries)]);
    const loaded = isObj(v.loaded_libraries) ? Object.entries(v.loaded_libraries).map(([k, p]) => [k, "", list(p).map(text).join(" ")]) : [];
    if (libs.length || loaded.length)
      s.append(collapsible("Plugins and libraries", false, table([["name", "version", "libraries"]], libs.concat(loaded), { class: "libraries" })));
    if (list(run.files).length)
      s.append(collapsible("Other files in the run folder (" + list(run.files).length + ")", false,
        table([["file", "bytes / note"]], list(run.files).map((f) => [text(f.file), f.note !== undefined ? text(f.note) : f.bytes]), { class: "files" })));
    return s;
  }
  part(root, "records", () => {
    const s = el("div", { class: "records" });
    runs.forEach((run, i) => s.append(recordView(run, i)));
    return s;
  });

  report.finish(root);
})();
