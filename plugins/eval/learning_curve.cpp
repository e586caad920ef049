// eval.learning_curve — retrieval quality against training step: embeddings of one evaluation set
// taken at several model snapshots (torch.embed with `mode: every_snapshot` adds `step`) are
// ranked per step (self-retrieval, the query left out, as eval.retrieval does without a gallery),
// giving P@1, R-precision and MAP@R per step. Writes <out>.csv and <out>.png and emits one `curve`
// record; eval.curve_chart draws several runs' curves in one chart.
//
// Inputs:  in     embedding f32[B,D], label i64[B], step i64[B]
// Outputs: curve  method: str[], step: i64[S], p_at_1, r_precision, map_at_r: f64[S] (at end of stream)
//
// Caveats: holds every step's embeddings until the end of the stream (steps x rows x D floats).
//
//   nodes:
//     train: {type: torch.train, params: {..., snapshot_every: 100}}
//     embed: {type: torch.embed, params: {mode: every_snapshot}}
//     curve: {type: eval.learning_curve, params: {name: "siamese", distance: cosine, out: out/curve}}
//   edges: [train.model -> embed.model, test.out -> embed.in, embed.out -> curve.in]
#include <embedflow/atomic_file.hpp>
#include <cblas.h>

#include <fstream>
#include <map>

#include <embedflow/features.hpp>
#include <embedflow/plot/line_chart.hpp>

#include "eval_types.hpp"
#include "report.hpp"
#include "retrieval.hpp"

namespace embedflow::eval {
namespace {

using namespace evalcore;

class LearningCurve final : public Node {
 public:
  void open(NodeContext& ctx) override {
    const Params& p = ctx.params();
    spec_.kind = parse_distance(p.string("distance"));
    name_ = p.has("name") ? p.string("name") : ctx.id();
    out_ = p.has("out") ? p.string("out") : "";
    options_.exclude_self = true;
    options_.bootstrap = 0;
    options_.ranks = {1};
    options_.max_rank = 1;
    options_.threads = std::max(1, ctx.threads());
    openblas_set_num_threads(options_.threads);
  }

  void process(std::size_t, const RecordPtr& batch, Emitter&) override {
    const Array& e = batch->get("embedding");
    const Array& label = batch->get("label");
    const Array& step = batch->get("step");
    if (e.dtype() != DType::f32 || e.rank() != 2)
      throw DataError(cat("embedding must be f32[B,D], got ", e.describe()));
    const std::int64_t n = e.dim(0), d = e.dim(1);
    if (label.numel() != n || step.numel() != n)
      throw DataError(cat("batch of ", n, " embeddings has ", label.numel(), " labels and ", step.numel(),
                          " steps (torch.embed's mode: every_snapshot adds step)"));
    const float* x = e.data<float>();
    for (std::int64_t i = 0; i < n; ++i) {
      FeatureSet& set = by_step_[step.as_int(i)];
      if (set.dim > 0 && set.dim != d)
        throw DataError(cat("step ", step.as_int(i), ": embeddings of ", d, " dims after ", set.dim, " dims"));
      set.append(x + i * d, 1, d);
      set.label.push_back(label.as_int(i));
    }
  }

  void close(Emitter& out) override {
    if (by_step_.empty()) throw DataError("no embeddings arrived before end of stream");
    std::vector<std::int64_t> steps;
    std::vector<double> p1, rprec, map_r;
    for (const auto& [step, set] : by_step_) {
      BlockScorer scorer(spec_, set.view(), set.view());
      RetrievalLabels labels{set.label.data(), set.label.data()};
      const RetrievalSummary s = evaluate_retrieval(scorer, labels, options_).summary;
      steps.push_back(step);
      p1.push_back(s.p_at_1);
      rprec.push_back(s.r_precision);
      map_r.push_back(s.map_at_r);
      log_info(name_, "step ", step, ", ", set.rows(), " items: P@1 ", percent(s.p_at_1), "%, MAP@R ",
               percent(s.map_at_r), "%");
    }
    if (!out_.empty()) {
      AtomicOutputFile csv_file(out_ + ".csv");
      std::ostream& csv = csv_file.stream();
      csv.precision(17);
      csv << "step,p_at_1,r_precision,map_at_r\n";
      for (std::size_t i = 0; i < steps.size(); ++i)
        csv << steps[i] << ',' << p1[i] << ',' << rprec[i] << ',' << map_r[i] << '\n';
      if (!csv) throw Error(cat("cannot write ", out_, ".csv"));
      csv_file.commit();
      LineChart chart;
      chart.title = cat(name_, ": retrieval against training step");
      chart.x_label = "training step";
      chart.y_label = "%";
      PlotSeries a{"MAP@R", {}, {}}, b{"P@1", {}, {}};
      for (std::size_t i = 0; i < steps.size(); ++i) {
        a.x.push_back(static_cast<double>(steps[i]));
        a.y.push_back(100 * map_r[i]);
        b.x.push_back(static_cast<double>(steps[i]));
        b.y.push_back(100 * p1[i]);
      }
      chart.series = {a, b};
      save_line_chart(out_ + ".png", chart);
    }
    Record r;
    r.set("method", Array::string_scalar(name_));
    r.set("step", Array::from_vector<std::int64_t>({static_cast<std::int64_t>(steps.size())}, steps));
    r.set("p_at_1", Array::from_vector<double>({static_cast<std::int64_t>(p1.size())}, p1));
    r.set("r_precision", Array::from_vector<double>({static_cast<std::int64_t>(rprec.size())}, rprec));
    r.set("map_at_r", Array::from_vector<double>({static_cast<std::int64_t>(map_r.size())}, map_r));
    out.emit(0, std::move(r));
  }

 private:
  DistanceSpec spec_;
  RetrievalOptions options_;
  std::string name_, out_;
  std::map<std::int64_t, FeatureSet> by_step_;
};

}  // namespace

NodeType learning_curve_type() {
  return NodeTypeBuilder("eval.learning_curve")
      .doc("Retrieval (P@1, R-precision, MAP@R) of one evaluation set embedded at several training steps: a learning curve.")
      .example("curve: {type: eval.learning_curve, params: {name: siamese, distance: cosine, out: out/siamese_curve}}")
      .input("in", "embedding: f32[B,D], label: i64[B], step: i64[B]", "embeddings per snapshot (torch.embed mode: every_snapshot)")
      .output("curve", kCurveSchema, "one record at end of stream, for eval.curve_chart")
      .param(Param::choice("distance", distance_names()).default_value("euclidean").doc("ranking measure"))
      .param(Param::string("name").optional().doc("run name in charts and the curve record (default: the node id)"))
      .param(Param::path("out").optional().not_fingerprinted().doc("output prefix: <out>.csv and <out>.png"))
      .create<LearningCurve>();
}

}  // namespace embedflow::eval
