// Results a node presents: titled tables whose rows are methods (or any labelled variant) and
// whose columns are named metrics with their units, charts with named axes and units, and
// figures (an image file the node wrote, such as a mosaic). The engine writes everything a run
// published into its record (run.json "results", "charts", "figures") when the run ends;
// `embedflow sweep` aggregates the tables across seeds and points, and the reports show exactly
// what was published, in the graph's order, rather than guessing from files. A node writes its
// own files as before; publishing is what makes the numbers readable and comparable.
//
//   embedflow::ResultTable t;
//   t.title = "landmark retrieval";
//   t.columns = {{"map_at_r", "MAP@R", "%", 100.0, true}, {"evaluated", "queries", "", 1.0, true}};
//   t.rows.push_back({"T_c^1", {{"map_at_r", 0.052}, {"evaluated", 396}}, {}});
//   embedflow::publish_results(ctx, t);
//
// Values are stored as the node computed them (fractions stay fractions); `scale` and `unit` say
// how to display them (0.052 shown as 5.2 %). NaN means "not measured" and is stored as null.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace embedflow {

class NodeContext;

struct ResultColumn {
  std::string key;               // stable name, e.g. "map_at_r"
  std::string header;            // what a table shows, e.g. "MAP@R"
  std::string unit;              // "%" or "" or "s"...
  double scale = 1.0;            // displayed = value * scale
  bool higher_is_better = true;  // which way "best" points
};

struct ResultRow {
  std::string label;                                           // the method or variant
  std::vector<std::pair<std::string, double>> values;          // by column key
  std::vector<std::pair<std::string, std::pair<double, double>>> intervals;  // optional CIs, by key
};

struct ResultTable {
  std::string title;
  std::vector<ResultColumn> columns;
  std::vector<ResultRow> rows;
};

// One line (or set of bars) of a chart. `lo`/`hi`, when given, are an interval per point, drawn
// as a band or error bars.
struct ChartSeries {
  std::string name;
  std::vector<double> x, y;
  std::vector<double> lo, hi;
  bool dashed = false;  // a reference line (a baseline)
};

// A chart a node presents. Charts with one title from several nodes are drawn as one, their
// series overlaid and named by node when two share a name: every trainer's loss on one chart,
// every method's CMC on another. A comparison of runs overlays them across runs the same way.
//
//   embedflow::ResultChart c;
//   c.title = "training loss";
//   c.x_label = "step"; c.y_label = "loss";
//   c.progress_metrics = {"loss"};   // the series are the node's progress metric "loss"
//   embedflow::publish_chart(ctx, c);
struct ResultChart {
  std::string title;
  std::string x_label, x_unit, y_label, y_unit;
  bool log_x = false;
  bool log_y = false;
  std::string kind = "line";  // "line", or "bars" (a histogram: x are the bins' lower edges)
  std::vector<ChartSeries> series;
  // Series read from this node's progress metrics (the run's metrics.jsonl), against its
  // progress count, so a curve reported step by step need not be held and published again.
  std::vector<std::string> progress_metrics;
  // Charts of fewer than 3 points are not drawn unless the node says they mean something
  // (a two-bar histogram, a single operating point).
  bool few_points = false;
};

// A chart of one of the node's progress metrics against its progress count ("loss" against
// "step"): what a trainer publishes once, at open, for the report to read from metrics.jsonl.
inline ResultChart progress_chart(std::string title, std::string x_label, std::string y_label, std::string metric) {
  ResultChart c;
  c.title = std::move(title);
  c.x_label = std::move(x_label);
  c.y_label = std::move(y_label);
  c.progress_metrics = {std::move(metric)};
  return c;
}

// An image file a node wrote (a mosaic, a heat map) with what it shows. `path` as the node
// wrote it; the report shows it when it lies inside the run's folder.
struct ResultFigure {
  std::string title;
  std::string path;
  std::string caption;
};

// Publishes a table for the node `ctx` belongs to. A node may publish several tables (distinct
// titles); publishing a title again replaces the earlier table. Safe from any thread.
void publish_results(const NodeContext& ctx, const ResultTable& table);
void publish_results(std::string_view node_id, const ResultTable& table);
// The same for the table that answers the run's question (eval.report's): the run report opens
// with it.
void publish_headline(const NodeContext& ctx, const ResultTable& table);
void publish_headline(std::string_view node_id, const ResultTable& table);

// Publishes a chart or a figure for a node; publishing a title again replaces the earlier one.
void publish_chart(const NodeContext& ctx, const ResultChart& chart);
void publish_chart(std::string_view node_id, const ResultChart& chart);
void publish_figure(const NodeContext& ctx, const ResultFigure& figure);
void publish_figure(std::string_view node_id, const ResultFigure& figure);

// Publishes a titled text for a node: what a reader of the run record may want in full that the
// log shows short (a trainer's whole model spec with its defaults). The report lists it under the
// run record. Publishing a title again replaces the earlier text.
void publish_text(const NodeContext& ctx, const std::string& title, const std::string& text);
void publish_text(std::string_view node_id, const std::string& title, const std::string& text);

// Where results go (the engine installs one per run; an empty function drops what it would
// receive). Returns the sink it replaces. Called on the publishing thread; must be thread-safe.
struct ResultsSink {
  std::function<void(std::string_view node_id, const ResultTable& table, bool headline)> table;
  std::function<void(std::string_view node_id, const ResultChart& chart)> chart;
  std::function<void(std::string_view node_id, const ResultFigure& figure)> figure;
  std::function<void(std::string_view node_id, const std::string& title, const std::string& text)> text;
};
ResultsSink set_results_sink(ResultsSink sink);

}  // namespace embedflow
