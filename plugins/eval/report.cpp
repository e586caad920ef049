// eval.report — gathers the `metrics` records of several evaluators (one per method) into one
// comparison: a Markdown table (chosen metric columns per method), a JSON file with every metric,
// one PNG with every method's CMC curve and, for sweeps, one PNG of metrics against a number
// attached to each method (e.g. label fuzziness p).
//
// Inputs:  in  method str[] and any of: cmc f64[R], map, map_trapezoid, mrr, p_at_1, r_precision,
//          map_at_r, evaluated, no_match f64[], map_ci f64[2] (eval.retrieval sends them all), nmi,
//          ami (eval.clustering), recon_mse (eval.reconstruction), triplet_accuracy
//          (eval.triplet_accuracy), invariance_ratio, invariance_auc (eval.view_invariance); any
//          number of edges
// Outputs: none
//
// Rows: records naming the same method merge into one row, so one model's retrieval, clustering
// and reconstruction records (each evaluator given the same `name`) fill one row. A metric that
// two records of one method both carry is an error naming the method and the metric (two
// evaluators accidentally given the same name).
//
// Columns: `columns` lists the metric columns in order. The token rank-k stands for one column
// per entry of `ranks` (so `ranks: []` or leaving rank-k out drops them); the others are p_at_1
// (P@1), r_precision, map_at_r (MAP@R), map (with its bootstrap interval when the record has one),
// map_trapezoid, mrr, evaluated and no_match (percentages and counts); nmi and ami (k-means on the
// embeddings, shown as fractions with three decimals); recon_mse (reconstruction error per pixel,
// four significant digits); triplet_accuracy (percent); invariance_ratio (four significant
// digits) and invariance_auc (percent) from eval.view_invariance. A metric a row lacks shows as n/a. The JSON always carries every
// metric whatever `columns` says.
// Sweeps: with `x` (method name -> number), <out>_vs_x.png plots each of `plot_metrics` as one
// line over the methods that have an x, in x order; methods without one (baselines) appear as
// horizontal reference lines across the swept range, named in the legend. The table then gains
// an x column (headed `x_label`). The chart is drawn only when at least two methods named in x
// report (a sweep ran); otherwise it is skipped silently, so a graph can keep its x map while its
// sweep branches are switched off.
//
// Caveats: rows follow `order` when given (unknown names after it, alphabetically); otherwise
// alphabetical, since records from parallel branches arrive in no fixed order. Rows without cmc
// are left out of the CMC chart (which is not written when no row has one). P@1 is read from
// the record's p_at_1 when present, else from cmc[0], which is the same number (the fraction of
// evaluated queries whose first match is at rank 1). When the sweep ran, names in `x` that no
// record reports are warned about at the end of the run, not at load (method names come from
// upstream params).
//
//   seed: 1
//   nodes:
//     query: {type: io.hdf5_reader, params: {path: data/reid_128.h5, object: query, batch_size: 256}}
//     l2:    {type: eval.retrieval, params: {distance: euclidean, name: Euclidean}}
//     l1:    {type: eval.retrieval, params: {distance: manhattan, name: Manhattan}}
//     table: {type: eval.report, params: {out: out/table, title: "self-retrieval"}}
//   edges:
//     - query.out -> l2.query
//     - query.out -> l1.query
//     - l2.metrics -> table.in
//     - l1.metrics -> table.in
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include <embedflow/plot/line_chart.hpp>
#include <embedflow/results.hpp>
#include <embedflow/suggest.hpp>

#include "eval_types.hpp"
#include "report.hpp"

namespace embedflow::eval {
namespace {

using namespace evalcore;

// One scalar metric of a metrics record: its `columns` name, table header, JSON key and field.
enum class Format { percent, count, fraction, general };
struct Metric {
  const char* name;
  const char* header;
  const char* json;
  Format format;
};
const Metric kMetrics[] = {
    {"p_at_1", "P@1 %", "P@1", Format::percent},
    {"r_precision", "R-precision %", "R-precision", Format::percent},
    {"map_at_r", "MAP@R %", "MAP@R", Format::percent},
    {"map", "mAP %", "mAP", Format::percent},
    {"map_trapezoid", "mAP trapz %", "mAP_trapezoid", Format::percent},
    {"mrr", "MRR %", "MRR", Format::percent},
    {"evaluated", "queries", "evaluated", Format::count},
    {"no_match", "no match", "no_match", Format::count},
    {"nmi", "NMI", "NMI", Format::fraction},
    {"ami", "AMI", "AMI", Format::fraction},
    {"recon_mse", "recon. MSE", "recon_MSE", Format::general},
    {"ari", "ARI", "ARI", Format::fraction},
    {"purity", "purity", "purity", Format::fraction},
    {"accuracy", "accuracy %", "accuracy", Format::percent},
    {"macro_p_at_1", "macro P@1 %", "macro_P@1", Format::percent},
    {"macro_r_precision", "macro R-precision %", "macro_R-precision", Format::percent},
    {"macro_map_at_r", "macro MAP@R %", "macro_MAP@R", Format::percent},
    {"macro_map", "macro mAP %", "macro_mAP", Format::percent},
    {"macro_mrr", "macro MRR %", "macro_MRR", Format::percent},
    {"single_shot_rank1", "single-shot rank-1 %", "single_shot_rank-1", Format::percent},
    {"triplet_accuracy", "triplet acc. %", "triplet_accuracy", Format::percent},
    {"triplet_accuracy_easy", "easy triplets %", "triplet_accuracy_easy", Format::percent},
    {"triplet_accuracy_hard", "hard triplets %", "triplet_accuracy_hard", Format::percent},
    {"label_precision", "label precision %", "label_precision", Format::percent},
    {"invariance_ratio", "frames / views distance", "invariance_ratio", Format::general},
    {"invariance_auc", "frames closer %", "invariance_auc", Format::percent},
};

std::string format_value(double v, Format f) {
  if (std::isnan(v)) return "n/a";
  char buf[64];
  switch (f) {
    case Format::percent: return percent(v);
    case Format::count: return cat(static_cast<std::int64_t>(v));
    case Format::fraction: std::snprintf(buf, sizeof buf, "%.3f", v); return buf;
    case Format::general: std::snprintf(buf, sizeof buf, "%.4g", v); return buf;
  }
  return cat(v);
}
const char* const kRankToken = "rank-k";

const Metric* find_metric(const std::string& name) {
  for (const auto& m : kMetrics)
    if (name == m.name) return &m;
  return nullptr;
}

std::vector<std::string> metric_names(bool with_rank_token) {
  std::vector<std::string> v;
  if (with_rank_token) v.push_back(kRankToken);
  for (const auto& m : kMetrics) v.push_back(m.name);
  return v;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// Load-time checks: every column and plotted metric is known, and `x` maps names to numbers.
void check_report_params(SchemaContext& c) {
  const Params& p = c.params();
  auto check_names = [&](const std::string& param, bool rank_token_ok) {
    const auto known = metric_names(rank_token_ok);
    std::vector<std::string> seen;
    for (const auto& name : p.strings(param)) {
      if (std::find(known.begin(), known.end(), name) == known.end()) {
        c.error(cat(param, ": unknown metric '", name, "'", did_you_mean(name, known),
                    "; known: ", join(known)),
                param);
      } else if (std::find(seen.begin(), seen.end(), name) != seen.end()) {
        c.error(cat(param, ": '", name, "' is listed twice"), param);
      }
      seen.push_back(name);
    }
  };
  check_names("columns", true);
  check_names("plot_metrics", false);
  if (p.strings("plot_metrics").empty()) c.error("plot_metrics: give at least one metric to plot", "plot_metrics");
  if (!p.has("x")) return;
  const Value& x = p.value("x");
  if (!x.is_map() || x.as_map().empty()) {
    c.error(cat("x must be a non-empty map {method name: number}, got ", x.kind_name(), " ", x.str()), "x");
    return;
  }
  for (const auto& [method, v] : x.as_map())
    if (!v.is_number() || !std::isfinite(v.as_number()))
      c.error(cat("x: the value for method '", method, "' must be a finite number, got ", v.kind_name(), " ", v.str()), "x");
}

struct Row {
  std::string method;
  std::vector<double> cmc;
  std::map<std::string, double> values;  // by Metric::name; absent = the record did not carry it
  std::vector<double> map_ci;
  double x = NAN;

  double get(const std::string& name) const {
    auto it = values.find(name);
    return it == values.end() ? NAN : it->second;
  }
};

class Report final : public Node {
 public:
  void open(NodeContext& ctx) override {
    const Params& p = ctx.params();
    node_id_ = ctx.id();
    out_ = p.string("out");
    title_ = p.string("title");
    for (auto k : p.integers("ranks")) ranks_.push_back(static_cast<int>(k));
    if (p.has("order")) order_ = p.strings("order");
    columns_ = p.strings("columns");
    plot_metrics_ = p.strings("plot_metrics");
    x_label_ = p.string("x_label");
    if (p.has("x"))
      for (const auto& [method, v] : p.value("x").as_map()) x_[method] = v.as_number();
  }
  void process(std::size_t, const RecordPtr& rec, Emitter&) override {
    const std::string method = rec->get("method").is_string() ? rec->get("method").string_at(0) : "?";
    auto it = std::find_if(rows_.begin(), rows_.end(), [&](const Row& r) { return r.method == method; });
    if (it == rows_.end()) {
      rows_.push_back(Row{});
      it = rows_.end() - 1;
      it->method = method;
      if (auto x = x_.find(method); x != x_.end()) it->x = x->second;
    }
    Row& r = *it;
    auto twice = [&](const std::string& metric) {
      return DataError(cat("two metrics records of method '", method, "' both carry ", metric,
                           " (two evaluators with the same `name`?); give them distinct names"));
    };
    if (const Array* cmc = rec->find("cmc")) {
      if (!r.cmc.empty()) throw twice("cmc");
      for (std::int64_t i = 0; i < cmc->numel(); ++i) r.cmc.push_back(cmc->as_double(i));
      if (!rec->find("p_at_1") && !r.cmc.empty()) {
        if (r.values.count("p_at_1")) throw twice("p_at_1");
        r.values["p_at_1"] = r.cmc[0];
      }
    }
    for (const auto& m : kMetrics)
      if (const Array* a = rec->find(m.name)) {
        if (r.values.count(m.name)) throw twice(m.name);
        r.values[m.name] = a->as_double(0);
      }
    if (const Array* a = rec->find("map_ci")) r.map_ci = {a->as_double(0), a->as_double(1)};
  }
  void close(Emitter&) override {
    auto pos = [&](const std::string& m) {
      auto it = std::find(order_.begin(), order_.end(), m);
      return it == order_.end() ? order_.size() : static_cast<std::size_t>(it - order_.begin());
    };
    std::sort(rows_.begin(), rows_.end(), [&](const Row& a, const Row& b) {
      return pos(a.method) != pos(b.method) ? pos(a.method) < pos(b.method) : a.method < b.method;
    });
    // A sweep ran when at least two of the methods named in x reported. With fewer there is no
    // line to draw: a graph that switches its sweep branches off (fuzzy_geo_fashion's default)
    // leaves x naming methods that never ran, which is expected and not worth a warning. When the
    // sweep did run, a name without a record is a missing point (often a misspelt name): warn.
    std::vector<std::pair<std::string, double>> missing;
    for (const auto& [method, v] : x_)
      if (std::none_of(rows_.begin(), rows_.end(), [&](const Row& r) { return r.method == method; }))
        missing.emplace_back(method, v);
    const bool swept = x_.size() - missing.size() >= 2;
    if (swept)
      for (const auto& [method, v] : missing)
        log_warning("eval.report", "x names method '", method, "' (x = ", v, ") but no metrics record has that name");
    write_table_and_json();
    publish_headline(node_id_, result_table());
    // The CMC curves are on the report already: each retrieval node publishes its own.
    if (std::any_of(rows_.begin(), rows_.end(), [](const Row& r) { return !r.cmc.empty(); }))
      save_line_chart(out_ + "_cmc.png", cmc_chart());
    if (swept) {
      const LineChart against = sweep_chart();
      save_line_chart(out_ + "_vs_x.png", against);
      publish_chart(node_id_, result_chart(against));
    }
    log_info("eval.report", "wrote ", out_, ".md with ", rows_.size(), " methods");
  }

 private:
  // The table as the run record holds it: the same columns, values as fractions with their unit.
  ResultTable result_table() const {
    ResultTable t;
    t.title = title_.empty() ? out_ : title_;
    for (const auto& c : columns_) {
      if (c == kRankToken) {
        for (int k : ranks_) t.columns.push_back({cat("rank-", k), cat("rank-", k), "%", 100.0, true});
        continue;
      }
      const Metric& m = *find_metric(c);
      std::string header = m.header;
      if (header.size() > 2 && header.compare(header.size() - 2, 2, " %") == 0) header.resize(header.size() - 2);
      const bool lower_better = c == "recon_mse" || c == "no_match" || c == "invariance_ratio";
      t.columns.push_back({c, header, m.format == Format::percent ? "%" : "", m.format == Format::percent ? 100.0 : 1.0,
                           !lower_better});
    }
    for (const auto& r : rows_) {
      ResultRow row;
      row.label = r.method;
      for (const auto& c : columns_) {
        if (c == kRankToken) {
          for (int k : ranks_)
            row.values.emplace_back(cat("rank-", k), k <= static_cast<int>(r.cmc.size()) ? r.cmc[static_cast<std::size_t>(k - 1)] : NAN);
          continue;
        }
        row.values.emplace_back(c, r.get(c));
      }
      if (r.map_ci.size() == 2) row.intervals.emplace_back("map", std::make_pair(r.map_ci[0], r.map_ci[1]));
      t.rows.push_back(std::move(row));
    }
    return t;
  }

  void write_table_and_json() {
    std::vector<std::string> header{"method"};
    if (!x_.empty()) header.push_back(x_label_);
    for (const auto& c : columns_) {
      if (c == kRankToken)
        for (int k : ranks_) header.push_back(cat("rank-", k, " %"));
      else
        header.push_back(find_metric(c)->header);
    }
    std::vector<std::vector<std::string>> table;
    JsonWriter j;
    j.begin_object().field("title", title_);
    if (!x_.empty()) j.field("x_label", x_label_);
    j.key("methods").begin_array();
    for (const auto& r : rows_) {
      std::vector<std::string> row{r.method};
      if (!x_.empty()) row.push_back(std::isnan(r.x) ? "-" : cat(r.x));
      for (const auto& c : columns_) {
        if (c == kRankToken) {
          for (int k : ranks_)
            row.push_back(k <= static_cast<int>(r.cmc.size()) ? percent(r.cmc[static_cast<std::size_t>(k - 1)]) : "n/a");
          continue;
        }
        const Metric& m = *find_metric(c);
        std::string cell = format_value(r.get(c), m.format);
        if (c == "map" && r.map_ci.size() == 2) cell += cat(" [", percent(r.map_ci[0]), ", ", percent(r.map_ci[1]), "]");
        row.push_back(cell);
      }
      table.push_back(std::move(row));

      j.begin_object().field("method", r.method);
      if (!std::isnan(r.x)) j.field("x", r.x);
      for (int k : ranks_) j.field(cat("rank-", k), k <= static_cast<int>(r.cmc.size()) ? r.cmc[static_cast<std::size_t>(k - 1)] : NAN);
      for (const auto& m : kMetrics) j.field(m.json, r.get(m.name));
      if (r.map_ci.size() == 2) j.key("mAP_ci").numbers(r.map_ci);
      j.key("cmc").numbers(r.cmc);
      j.end_object();
    }
    j.end_array().end_object();
    std::string md = title_.empty() ? "" : cat("### ", title_, "\n\n");
    md += markdown_table(header, table);
    write_text_atomic(out_ + ".md", md);
    write_text_atomic(out_ + ".json", j.str() + "\n");
  }

  LineChart cmc_chart() const {
    LineChart chart;
    chart.title = title_.empty() ? std::string("CMC") : cat("CMC: ", title_);
    chart.x_label = "rank";
    chart.y_label = "matching rate (%)";
    chart.y_min = 0, chart.y_max = 100, chart.x_min = 1;
    double longest = 1;
    for (const auto& r : rows_) {
      if (r.cmc.empty()) continue;
      PlotSeries s{r.method, {}, {}};
      for (std::size_t k = 0; k < r.cmc.size(); ++k) s.x.push_back(double(k + 1)), s.y.push_back(100 * r.cmc[k]);
      longest = std::max(longest, double(r.cmc.size()));
      chart.series.push_back(std::move(s));
    }
    chart.x_max = longest;
    chart.markers = false;
    return chart;
  }

  // Swept methods first (one line per metric, points in x order), then one flat line per
  // baseline and metric across the swept range, so a curve and its reference share the y axis.
  LineChart sweep_chart() const {
    std::vector<const Row*> swept, fixed;
    for (const auto& r : rows_) (std::isnan(r.x) ? fixed : swept).push_back(&r);
    std::stable_sort(swept.begin(), swept.end(), [](const Row* a, const Row* b) { return a->x < b->x; });
    double lo = swept.empty() ? 0.0 : swept.front()->x, hi = swept.empty() ? 1.0 : swept.back()->x;
    if (!(hi > lo)) lo -= 0.5, hi += 0.5;
    std::vector<std::string> labels;
    for (const auto& name : plot_metrics_) labels.push_back(std::string(find_metric(name)->json));
    const bool several = plot_metrics_.size() > 1;

    LineChart chart;
    chart.title = !title_.empty() ? title_ : cat(join(labels), " vs ", x_label_);
    chart.x_label = x_label_;
    chart.y_label = several ? std::string("metric (%)") : cat(labels[0], " (%)");
    chart.x_min = lo, chart.x_max = hi;
    for (std::size_t i = 0; i < plot_metrics_.size(); ++i) {
      PlotSeries s{labels[i], {}, {}};
      for (const Row* r : swept) s.x.push_back(r->x), s.y.push_back(100 * r->get(plot_metrics_[i]));
      if (!swept.empty()) chart.series.push_back(std::move(s));
    }
    for (const Row* r : fixed)
      for (std::size_t i = 0; i < plot_metrics_.size(); ++i) {
        const double y = 100 * r->get(plot_metrics_[i]);
        chart.series.push_back({several ? cat(r->method, " ", labels[i]) : r->method, {lo, hi}, {y, y}});
        chart.series.back().dashed = true;
      }
    return chart;
  }

  std::string node_id_, out_, title_, x_label_;
  std::vector<int> ranks_;
  std::vector<std::string> order_, columns_, plot_metrics_;
  std::map<std::string, double> x_;
  std::vector<Row> rows_;
};

}  // namespace

NodeType report_type() {
  return NodeTypeBuilder("eval.report")
      .doc("One table and one CMC chart comparing the metrics records of several evaluators; optionally metrics vs a swept x.")
      .example("table: {type: eval.report, params: {out: out/table, columns: [p_at_1, r_precision, map_at_r, map]}}")
      .param(Param::path("out").doc("output prefix: <out>.md, <out>.json, <out>_cmc.png (and <out>_vs_x.png with x)"))
      .param(Param::string("title").default_value("").doc("table heading and chart title"))
      .param(Param::integers("ranks").default_value(std::vector<std::int64_t>{1, 10}).min(1)
                 .doc("rank-k columns, placed where `columns` says rank-k ([] for none)"))
      .param(Param::strings("columns")
                 .default_value(std::vector<std::string>{kRankToken, "map", "map_trapezoid", "mrr"})
                 .doc(cat("metric columns in order: ", join(metric_names(true)), " (rank-k expands to `ranks`)")))
      .param(Param::strings("order").optional().doc("method names in the order the rows should appear"))
      .param(Param::any("x").optional()
                 .doc("map method name -> number for sweeps, e.g. {\"siamese p=0\": 0.0, \"siamese p=0.2\": 0.2}; "
                      "writes <out>_vs_x.png when at least two of them report (a sweep ran; otherwise the chart is "
                      "skipped without a warning), methods without an x are drawn as reference lines"))
      .param(Param::string("x_label").default_value("x").doc("x-axis label of <out>_vs_x.png and header of the table's x column"))
      .param(Param::strings("plot_metrics").default_value(std::vector<std::string>{"map_at_r"})
                 .doc(cat("metrics drawn in <out>_vs_x.png: ", join(metric_names(false)))))
      .input("in", "method: str[]", "metrics records; records of one method merge into one row")
      .check(check_report_params)
      .create<Report>();
}

}  // namespace embedflow::eval
