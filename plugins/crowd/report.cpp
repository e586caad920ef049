// crowd.report — merges the metrics records of the crowd evaluators (crowd.pair_accuracy,
// crowd.attribute_retrieval) into one table per method, and draws each series' accuracy against
// x (the amount of training data) as a curve.
//
// Inputs:  in — records with method str[1] and scalar numeric fields (any number of edges);
//          series str[1] and x (>= 0) put a record's `plot_metric` on a curve.
// Outputs: none. Files: <out>.md (Markdown table), <out>.csv (same table), <out>_curve.csv
//          (series, x, value) and <out>_curve.png when some record has an x >= 0. The Markdown
//          table rounds to 4 decimals; the CSV files keep 10 significant digits.
// Rows: records of one method merge (the same field twice with different values is an error
// naming the method and field); row order follows `order`, then first arrival... which varies
// with parallel branches, so the rest is sorted by name.
//
//   table: {type: crowd.report, params: {out: out/cen/table, columns: [accuracy, retrieval]}}
#include <embedflow/atomic_file.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>

#include <embedflow/csv.hpp>

#include <embedflow/plot/line_chart.hpp>

#include "core/draw.hpp"
#include "crowd_types.hpp"

namespace embedflow::crowd {
namespace {

std::string show(double v, const std::string& field) {
  if (std::isnan(v)) return "n/a";
  char b[32];
  const bool count = field == "pairs" || field == "submissions" || field == "x_steps";
  std::snprintf(b, sizeof b, count ? "%.0f" : "%.4f", v);
  return b;
}

class Report final : public Node {
 public:
  void open(NodeContext& ctx) override { ctx_ = &ctx; }
  void process(std::size_t, const RecordPtr& r, Emitter&) override {
    const Array* m = r->find("method");
    if (!m || !m->is_string() || m->numel() != 1) throw DataError(cat("metrics record without method str[1]: ", r->describe()));
    const std::string method = m->string_at(0);
    auto& row = rows_[method];
    for (const auto& [name, a] : r->fields()) {
      if (name == "method") continue;
      if (name == "series") {
        series_[method] = a.string_at(0);
        continue;
      }
      if (a.is_string() || a.numel() != 1) continue;
      const double v = a.as_double(0);
      auto it = row.find(name);
      if (it != row.end() && !(it->second == v || (std::isnan(v) && std::isnan(it->second))) && name != "x")
        throw DataError(cat("method '", method, "' reports '", name, "' twice (", it->second, " and ", v, ")"));
      row[name] = v;
      if (std::find(fields_.begin(), fields_.end(), name) == fields_.end()) fields_.push_back(name);
    }
  }
  void close(Emitter&) override {
    const Params& p = ctx_->params();
    const std::string out = p.string("out");
    std::vector<std::string> cols = p.strings("columns");
    if (cols.empty())
      for (const auto& f : fields_)
        if (f != "x") cols.push_back(f);
    std::vector<std::string> order;
    for (const auto& m : p.strings("order"))
      if (rows_.count(m)) order.push_back(m);
    for (const auto& [m, row] : rows_)
      if (std::find(order.begin(), order.end(), m) == order.end()) order.push_back(m);
    make_parent(out + ".md");
    AtomicOutputFile md_file(out + ".md"), csv_file(out + ".csv");
    std::ostream &md = md_file.stream(), &csv = csv_file.stream();
    md << "# " << p.string("title") << "\n\n| method |";
    csv << "method";
    for (const auto& c : cols) md << " " << c << " |", csv << "," << csv_field(c);
    md << "\n|---|";
    csv << "\n";
    for (std::size_t i = 0; i < cols.size(); ++i) md << "---|";
    md << "\n";
    for (const auto& m : order) {
      md << "| " << m << " |";
      csv << csv_field(m);
      for (const auto& c : cols) {
        auto it = rows_[m].find(c);
        const double v = it == rows_[m].end() ? NAN : it->second;
        md << " " << show(v, c) << " |";
        char full[40];
        std::snprintf(full, sizeof full, "%.10g", v);
        csv << "," << (std::isnan(v) ? std::string("") : std::string(full));  // full precision for scripts
      }
      md << "\n";
      csv << "\n";
    }
    if (!md || !csv) throw DataError(cat("cannot write ", out, ".md / .csv"));
    md_file.commit();
    csv_file.commit();
    // Curves: per series, (x, plot_metric) sorted by x.
    const std::string metric = p.string("plot_metric");
    std::map<std::string, std::vector<std::pair<double, double>>> curves;
    for (const auto& [m, row] : rows_) {
      auto x = row.find("x"), y = row.find(metric);
      if (x == row.end() || y == row.end() || !(x->second >= 0)) continue;
      curves[series_.count(m) ? series_[m] : m].emplace_back(x->second, y->second);
    }
    if (curves.empty()) return;
    LineChart chart;
    chart.title = p.string("title");
    chart.x_label = p.string("x_label");
    chart.y_label = metric;
    AtomicOutputFile cc_file(out + "_curve.csv");
    std::ostream& cc = cc_file.stream();
    cc << "series,x," << metric << "\n";
    for (auto& [name, pts] : curves) {
      std::sort(pts.begin(), pts.end());
      PlotSeries s{name, {}, {}};
      for (auto [x, y] : pts) {
        s.x.push_back(x), s.y.push_back(y);
        cc << csv_field(name) << "," << x << "," << y << "\n";
      }
      chart.series.push_back(std::move(s));
    }
    cc_file.commit();
    save_line_chart(out + "_curve.png", chart);
  }

 private:
  NodeContext* ctx_ = nullptr;
  std::map<std::string, std::map<std::string, double>> rows_;
  std::map<std::string, std::string> series_;
  std::vector<std::string> fields_;
};

}  // namespace

NodeType report_type() {
  return NodeTypeBuilder("crowd.report")
      .doc("Merges crowd metrics records (method + scalar fields) into a Markdown/CSV table per method, and plots "
           "plot_metric against x per series (<out>_curve.png/.csv).")
      .example("table: {type: crowd.report, params: {out: out/cen_crowd/table, columns: [accuracy, retrieval]}}")
      .param(Param::path("out").not_fingerprinted().doc("path prefix of the files, e.g. out/cen/table"))
      .param(Param::string("title").default_value("crowd evaluation").doc("table and chart title"))
      .param(Param::strings("columns").default_value(std::vector<std::string>{}).doc("metric columns in order; empty: every field seen"))
      .param(Param::strings("order").default_value(std::vector<std::string>{}).doc("row order (methods); others follow by name"))
      .param(Param::string("plot_metric").default_value("accuracy").doc("the metric drawn against x"))
      .param(Param::string("x_label").default_value("train_fraction").doc("the chart's x axis label"))
      .input("in", "method: str[1]", "metrics records")
      .create<Report>();
}

}  // namespace embedflow::crowd
