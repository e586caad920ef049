// eval.report — gathers the `metrics` records of several evaluators (one per method) into one
// comparison: a Markdown table (rank-k and mAP per method), a JSON file and one PNG with every
// method's CMC curve.
//
// Inputs:  in  method str[], cmc f64[R], map f64[] (any number of edges; one record per method)
// Outputs: none
//
// Caveats: rows follow `order` when given (unknown names after it, alphabetically); otherwise
// alphabetical, since records from parallel branches arrive in no fixed order.
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

#include "eval_types.hpp"
#include "plot.hpp"
#include "report.hpp"

namespace embedflow::eval {
namespace {

using namespace evalcore;

struct Row {
  std::string method;
  std::vector<double> cmc;
  double map = 0, map_trapezoid = NAN, mrr = NAN;
  std::vector<double> map_ci;
};

class Report final : public Node {
 public:
  void open(NodeContext& ctx) override {
    const Params& p = ctx.params();
    out_ = p.string("out");
    title_ = p.string("title");
    for (auto k : p.integers("ranks")) ranks_.push_back(static_cast<int>(k));
    if (p.has("order")) order_ = p.strings("order");
  }
  void process(std::size_t, const RecordPtr& rec, Emitter&) override {
    Row r;
    r.method = rec->get("method").is_string() ? rec->get("method").string_at(0) : "?";
    const Array& cmc = rec->get("cmc");
    for (std::int64_t i = 0; i < cmc.numel(); ++i) r.cmc.push_back(cmc.as_double(i));
    r.map = rec->get("map").as_double(0);
    if (const Array* a = rec->find("map_trapezoid")) r.map_trapezoid = a->as_double(0);
    if (const Array* a = rec->find("mrr")) r.mrr = a->as_double(0);
    if (const Array* a = rec->find("map_ci")) r.map_ci = {a->as_double(0), a->as_double(1)};
    for (const auto& existing : rows_)
      if (existing.method == r.method)
        throw DataError(cat("two evaluators report method '", r.method, "'; give them distinct `name`s"));
    rows_.push_back(std::move(r));
  }
  void close(Emitter&) override {
    auto pos = [&](const std::string& m) {
      auto it = std::find(order_.begin(), order_.end(), m);
      return it == order_.end() ? order_.size() : static_cast<std::size_t>(it - order_.begin());
    };
    std::sort(rows_.begin(), rows_.end(), [&](const Row& a, const Row& b) {
      return pos(a.method) != pos(b.method) ? pos(a.method) < pos(b.method) : a.method < b.method;
    });
    std::vector<std::string> header{"method"};
    for (int k : ranks_) header.push_back(cat("rank-", k, " %"));
    header.insert(header.end(), {"mAP %", "mAP trapz %", "MRR %"});
    std::vector<std::vector<std::string>> table;
    JsonWriter j;
    j.begin_object().field("title", title_).key("methods").begin_array();
    LineChart chart;
    chart.title = title_.empty() ? std::string("CMC") : cat("CMC: ", title_);
    chart.x_label = "rank";
    chart.y_label = "matching rate (%)";
    chart.y_min = 0, chart.y_max = 100, chart.x_min = 1;
    double longest = 1;
    for (const auto& r : rows_) {
      std::vector<std::string> row{r.method};
      j.begin_object().field("method", r.method);
      for (int k : ranks_) {
        const bool has = k <= static_cast<int>(r.cmc.size());
        row.push_back(has ? percent(r.cmc[static_cast<std::size_t>(k - 1)]) : "n/a");
        j.field(cat("rank-", k), has ? r.cmc[static_cast<std::size_t>(k - 1)] : NAN);
      }
      std::string map = percent(r.map);
      if (r.map_ci.size() == 2) map += cat(" [", percent(r.map_ci[0]), ", ", percent(r.map_ci[1]), "]");
      row.push_back(map);
      row.push_back(std::isnan(r.map_trapezoid) ? "n/a" : percent(r.map_trapezoid));
      row.push_back(std::isnan(r.mrr) ? "n/a" : percent(r.mrr));
      j.field("mAP", r.map).field("mAP_trapezoid", r.map_trapezoid).field("MRR", r.mrr);
      j.key("cmc").numbers(r.cmc);
      j.end_object();
      table.push_back(std::move(row));
      PlotSeries s{r.method, {}, {}};
      for (std::size_t k = 0; k < r.cmc.size(); ++k) s.x.push_back(double(k + 1)), s.y.push_back(100 * r.cmc[k]);
      longest = std::max(longest, double(r.cmc.size()));
      chart.series.push_back(std::move(s));
    }
    j.end_array().end_object();
    chart.x_max = longest;
    chart.markers = false;
    std::string md = title_.empty() ? "" : cat("### ", title_, "\n\n");
    md += markdown_table(header, table);
    write_text_atomic(out_ + ".md", md);
    write_text_atomic(out_ + ".json", j.str() + "\n");
    save_line_chart(out_ + "_cmc.png", chart);
    log_info("eval.report", "wrote ", out_, ".md with ", rows_.size(), " methods");
  }

 private:
  std::string out_, title_;
  std::vector<int> ranks_;
  std::vector<std::string> order_;
  std::vector<Row> rows_;
};

}  // namespace

NodeType report_type() {
  return NodeTypeBuilder("eval.report")
      .doc("One table and one CMC chart comparing the metrics records of several evaluators.")
      .example("table: {type: eval.report, params: {out: out/table, ranks: [1, 10]}}")
      .param(Param::path("out").doc("output prefix: <out>.md, <out>.json, <out>_cmc.png"))
      .param(Param::string("title").default_value("").doc("table heading and chart title"))
      .param(Param::integers("ranks").default_value(std::vector<std::int64_t>{1, 10}).min(1).doc("rank-k columns"))
      .param(Param::strings("order").optional().doc("method names in the order the rows should appear"))
      .input("in", "method: str[], cmc: f64[R], map: f64[]", "metrics records, one per method")
      .create<Report>();
}

}  // namespace embedflow::eval
