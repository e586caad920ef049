// Results a node presents: titled tables whose rows are methods (or any labelled variant) and
// whose columns are named metrics with their units. The engine writes every table a run
// published into its record (run.json "results") when the run ends; `embedflow sweep` aggregates
// them across seeds and points, and the reports show them as tables rather than guessing from
// files. A node writes its own files as before; publishing is what makes the numbers comparable.
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

// Publishes a table for the node `ctx` belongs to. A node may publish several tables (distinct
// titles); publishing a title again replaces the earlier table. Safe from any thread.
void publish_results(const NodeContext& ctx, const ResultTable& table);
void publish_results(std::string_view node_id, const ResultTable& table);

// Where tables go (the engine installs one per run; an empty sink drops them). Returns the sink
// it replaces. Called on the publishing thread; must be thread-safe.
using ResultsSink = std::function<void(std::string_view node_id, const ResultTable& table)>;
ResultsSink set_results_sink(ResultsSink sink);

}  // namespace embedflow
