// metric.lmnn — Large Margin Nearest Neighbour (Weinberger & Saul 2009): learns L (A = L^T L)
// so each point's k same-identity target neighbours are closer than any other identity by a
// margin of 1. Gradient descent on L from the identity with bold-driver step-size adaptation
// (x1.01 after a successful step, x0.5 and retry after a failed one); impostors found by
// blocked GEMM or a KD-tree over the transformed points. Emits G = L; <out>.json and
// <out>_objective.png record the objective per accepted step.
//
// Inputs:  train      embedding f32[B,D], label i64[B]
// Outputs: transform  G f32[D,D], mean f32[D] (one record at end of stream)
//
// Caveats: each step costs O(n^2 D) for the impostor search plus O(n D^2); reduce D with
// metric.pca first on 2048-d features. Identities with one training row get no targets.
//
//   seed: 1
//   nodes:
//     train: {type: io.hdf5_reader, params: {path: data/reid_128.h5, object: train, batch_size: 256}}
//     lmnn:  {type: metric.lmnn, params: {k: 3, max_iterations: 50, out: out/lmnn}}
//     sink:  {type: core.sink}
//   edges:
//     - train.out -> lmnn.train
//     - lmnn.transform -> sink.in
#include <embedflow/plot/line_chart.hpp>
#include <embedflow/report_files.hpp>

#include "learner_common.hpp"
#include "metric_types.hpp"

namespace embedflow::metric {
namespace {

class Lmnn final : public Learner {
 protected:
  metriccore::Transform learn(NodeContext& ctx, const metriccore::Data& train, const metriccore::Data&) override {
    const Params& p = ctx.params();
    metriccore::LmnnOptions o;
    o.k = static_cast<int>(p.integer("k"));
    o.push_weight = p.number("push_weight");
    o.learning_rate = p.number("learning_rate");
    o.max_iterations = static_cast<int>(p.integer("max_iterations"));
    o.tolerance = p.number("tolerance");
    o.impostors = p.string("impostor_search") == "kdtree" ? metriccore::ImpostorSearch::kdtree : metriccore::ImpostorSearch::gemm;
    o.threads = std::max(1, ctx.threads());
    o.stop = [&ctx] { return ctx.stop_requested(); };
    const auto r = metriccore::lmnn(train, o);
    log_info(ctx.id(), "LMNN: objective ", r.objective.front(), " -> ", r.objective.back(), " in ", r.iterations,
             " iterations (", r.stop_reason, "); active triplets ", r.active_triplets.front(), " -> ", r.active_triplets.back());
    if (r.stop_reason == "iteration_cap")
      log_warning(ctx.id(), "LMNN stopped at the iteration cap (max_iterations ", o.max_iterations,
                  ") before the relative objective decrease fell below tolerance ", o.tolerance,
                  "; raise max_iterations for a converged metric");
    set_outcome(r.iterations, r.objective.back(), r.converged, r.stop_reason);
    if (!out_.empty()) {
      JsonWriter j;
      j.begin_object().field("k", o.k).field("push_weight", o.push_weight).field("iterations", r.iterations);
      j.field("final_objective", r.objective.back()).field("converged", r.converged).field("stop_reason", r.stop_reason);
      j.field("final_learning_rate", r.final_learning_rate).key("objective").numbers(r.objective);
      std::vector<double> active(r.active_triplets.begin(), r.active_triplets.end());
      j.key("active_triplets").numbers(active).end_object();
      write_text_atomic(out_ + ".json", j.str() + "\n");
      LineChart c;
      c.title = "LMNN objective";
      c.x_label = "accepted step";
      c.y_label = "objective";
      PlotSeries s{"objective", {}, r.objective};
      for (std::size_t i = 0; i < r.objective.size(); ++i) s.x.push_back(double(i));
      c.series.push_back(s);
      save_line_chart(out_ + "_objective.png", c);
    }
    return r.transform;
  }
};

}  // namespace

NodeType lmnn_type() {
  NodeTypeBuilder b("metric.lmnn");
  b      .doc("Large Margin Nearest Neighbour metric learning; emits G = L with A = L^T L.")
      .example("lmnn: {type: metric.lmnn, params: {k: 3, max_iterations: 100}}")
      .param(Param::integer("k").default_value(3).min(1).doc("target neighbours per point"))
      .param(Param::number("push_weight").default_value(0.5).range(0, 1).doc("mu: objective = (1-mu) pull + mu push"))
      .param(Param::number("learning_rate").default_value(0.01).min(0).doc("first step as a fraction of ||L||"))
      .param(Param::integer("max_iterations").default_value(200).min(1).doc("gradient steps at most"))
      .param(Param::number("tolerance").default_value(1e-6).min(0).doc("stop below this relative objective decrease"))
      .param(Param::choice("impostor_search", {"gemm", "kdtree"}).default_value("gemm").doc("how impostors are found"))
      .param(Param::path("out").optional().doc("write <out>.json and <out>_objective.png"))
      .input("train", "*", "training features: embedding f32[B,D], label i64[B] (names as `fields` says)")
      .output("transform", "G: f32[D,D], mean: f32[D]", "the learned map, once at end of stream")
;
  add_learner_fields(b, "embedding: f32[B,D], label: i64[B]");
  return b.create<Lmnn>();
}

}  // namespace embedflow::metric
