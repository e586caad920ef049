// eval.curve_chart — draws the learning curves of several runs (eval.learning_curve's `curve`
// records, any number of edges into `curves`) in one chart, one line per run, and writes them
// side by side as <out>.csv (run,step,p_at_1,r_precision,map_at_r) and <out>.png.
//
// Inputs:  curves  method: str[], step: i64[S], p_at_1, r_precision, map_at_r: f64[S]
// Outputs: none; writes the files at end of stream
//
//   nodes:
//     chart: {type: eval.curve_chart, params: {metric: map_at_r, out: out/learning_curves}}
//   edges: [curve_p0.curve -> chart.curves, curve_p20.curve -> chart.curves]
#include <embedflow/atomic_file.hpp>
#include <algorithm>
#include <fstream>

#include <embedflow/csv.hpp>
#include <embedflow/plot/line_chart.hpp>

#include "eval_types.hpp"

namespace embedflow::eval {
namespace {

const std::vector<std::string> kMetrics{"p_at_1", "r_precision", "map_at_r"};
const std::vector<std::string> kMetricLabels{"P@1", "R-precision", "MAP@R"};

class CurveChart final : public Node {
 public:
  void open(NodeContext& ctx) override {
    const Params& p = ctx.params();
    metric_ = p.string("metric");
    out_ = p.string("out");
    title_ = p.string("title");
  }

  void process(std::size_t, const RecordPtr& rec, Emitter&) override {
    Run run;
    run.name = rec->get("method").string_at(0);
    const Array& step = rec->get("step");
    for (std::int64_t i = 0; i < step.numel(); ++i) run.step.push_back(step.as_int(i));
    for (std::size_t m = 0; m < kMetrics.size(); ++m) {
      const Array& v = rec->get(kMetrics[m]);
      if (v.numel() != step.numel())
        throw DataError(cat("curve '", run.name, "': ", kMetrics[m], " has ", v.numel(), " values for ", step.numel(), " steps"));
      for (std::int64_t i = 0; i < v.numel(); ++i) run.values[m].push_back(v.as_double(i));
    }
    runs_.push_back(std::move(run));
  }

  void close(Emitter&) override {
    if (runs_.empty()) throw DataError("no curve records arrived before end of stream");
    // Arrival order depends on which run finished first; the files must not.
    std::sort(runs_.begin(), runs_.end(), [](const Run& a, const Run& b) { return a.name < b.name; });
    const std::size_t m = static_cast<std::size_t>(std::find(kMetrics.begin(), kMetrics.end(), metric_) - kMetrics.begin());
    AtomicOutputFile csv_file(out_ + ".csv");
    std::ostream& csv = csv_file.stream();
    csv.precision(17);
    csv << "run,step,p_at_1,r_precision,map_at_r\n";
    LineChart chart;
    chart.title = title_.empty() ? cat(kMetricLabels[m], " against training step") : title_;
    chart.x_label = "training step";
    chart.y_label = cat(kMetricLabels[m], " %");
    for (const Run& r : runs_) {
      PlotSeries s{r.name, {}, {}};
      for (std::size_t i = 0; i < r.step.size(); ++i) {
        csv << csv_field(r.name) << ',' << r.step[i] << ',' << r.values[0][i] << ',' << r.values[1][i] << ','
            << r.values[2][i] << '\n';
        s.x.push_back(static_cast<double>(r.step[i]));
        s.y.push_back(100 * r.values[m][i]);
      }
      chart.series.push_back(std::move(s));
    }
    if (!csv) throw Error(cat("cannot write ", out_, ".csv"));
    csv_file.commit();
    save_line_chart(out_ + ".png", chart);
    log_info("eval.curve_chart", "wrote ", out_, ".png with ", runs_.size(), " runs");
  }

 private:
  struct Run {
    std::string name;
    std::vector<std::int64_t> step;
    std::vector<double> values[3];
  };
  std::string metric_, out_, title_;
  std::vector<Run> runs_;
};

}  // namespace

NodeType curve_chart_type() {
  return NodeTypeBuilder("eval.curve_chart")
      .doc("One chart (PNG) and one CSV of several runs' learning curves from eval.learning_curve.")
      .example("chart: {type: eval.curve_chart, params: {metric: map_at_r, out: out/learning_curves}}")
      .input("curves", kCurveSchema, "curve records, one per run")
      .param(Param::choice("metric", kMetrics).default_value("map_at_r").doc("the metric on the y axis"))
      .param(Param::path("out").not_fingerprinted().doc("output prefix: <out>.csv and <out>.png"))
      .param(Param::string("title").default_value("").doc("chart title (default: '<metric> against training step')"))
      .create<CurveChart>();
}

}  // namespace embedflow::eval
