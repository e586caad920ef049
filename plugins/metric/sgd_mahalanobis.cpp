// metric.sgd_mahalanobis — the re-identification report's own optimiser: SGD directly on A
// from the identity, with A projected onto the PSD cone after every step. loss: pairwise =
// sum y_ij d_A(i,j) over batch pairs (y = +1 same identity, -1 different; the report's
// "Proposed 1"), or triplet = [margin + d_A(i,j) - d_A(i,k)]_+ over each anchor's hardest
// positive / hardest negative plus random triplets, re-mined every epoch ("Proposed 2").
// Validation loss every `validate_every` epochs halves the learning rate when it rises; each
// epoch's A is written to <checkpoint_dir>/epoch_NNN.npy. Emits G = A^(1/2).
//
// Inputs:  train       embedding f32[B,D], label i64[B]
//          validation  (optional) the same fields, identities apart from train's
// Outputs: transform   G f32[D,D], mean f32[D] (one record at end of stream)
//
// Caveats: the pairwise loss is linear in A and unbounded below; `trace_normalize` (default)
// keeps tr(A) = D so it has a minimum. PSD projection is an eigendecomposition per step
// (O(D^3)): use metric.pca first on 2048-d features.
//
//   seed: 1
//   nodes:
//     train: {type: io.hdf5_reader, params: {path: data/reid_128.h5, object: train, batch_size: 256}}
//     sgd:   {type: metric.sgd_mahalanobis, params: {loss: triplet, epochs: 20, out: out/sgd}}
//     sink:  {type: core.sink}
//   edges:
//     - train.out -> sgd.train
//     - sgd.transform -> sink.in
#include <cblas.h>

#include <cstdio>

#include <embedflow/plot/line_chart.hpp>
#include <embedflow/report_files.hpp>

#include "learner_common.hpp"
#include "metric_types.hpp"
#include "npy.hpp"

namespace embedflow::metric {
namespace {

class SgdMahalanobis final : public Learner {
 protected:
  metriccore::Transform learn(NodeContext& ctx, const metriccore::Data& train, const metriccore::Data& validation) override {
    const Params& p = ctx.params();
    metriccore::SgdOptions o;
    o.loss = p.string("loss") == "triplet" ? metriccore::SgdLoss::triplet : metriccore::SgdLoss::pairwise;
    o.learning_rate = p.number("learning_rate");
    o.epochs = static_cast<int>(p.integer("epochs"));
    o.batch_size = static_cast<int>(p.integer("batch_size"));
    o.validate_every = static_cast<int>(p.integer("validate_every"));
    o.random_triplets = static_cast<int>(p.integer("random_triplets"));
    o.margin = p.number("margin");
    o.trace_normalize = p.boolean("trace_normalize");
    o.balance_pairs = p.boolean("balance_pairs");
    o.seed = ctx.seed();
    o.tolerance = p.number("tolerance");
    o.stop = [&ctx] { return ctx.stop_requested(); };
    const std::string dir = p.has("checkpoint_dir") ? p.string("checkpoint_dir") : "";
    if (!dir.empty())
      o.checkpoint = [&](int epoch, const metriccore::Mat& A) {
        char name[32];
        std::snprintf(name, sizeof name, "/epoch_%03d.npy", epoch);
        metriccore::write_npy(dir + name, A, {train.d, train.d});
      };
    if (validation.n == 0) log_warning(ctx.id(), "no validation stream: the learning rate stays fixed");
    // Every step works on D x D matrices (an eigendecomposition, small GEMMs); below ~512 dims
    // OpenBLAS's threads cost more than they save (128-d graph: 14.5 s with 1 thread, 19.6 s
    // with 2), and the graph's other branches use the second core anyway. The setting is
    // process-wide, so the previous one is restored for the nodes that run after this one.
    const int blas_threads = openblas_get_num_threads();
    if (train.d <= 512) openblas_set_num_threads(1);
    metriccore::SgdResult r;
    try {
      r = metriccore::sgd_mahalanobis(train, validation, o);
    } catch (...) {
      openblas_set_num_threads(blas_threads);
      throw;
    }
    openblas_set_num_threads(blas_threads);
    log_info(ctx.id(), p.string("loss"), " SGD: train loss ", r.train_loss.front(), " -> ", r.train_loss.back(),
             r.validation_loss.empty() ? std::string() : cat("; validation ", r.validation_loss.front(), " -> ", r.validation_loss.back()),
             "; final lr ", r.learning_rate.back());
    const bool interrupted = r.epochs_run < o.epochs;
    const std::string reason = r.converged ? "converged" : interrupted ? "stopped" : "iteration_cap";
    if (reason == "iteration_cap")
      log_warning(ctx.id(), "SGD stopped at the epoch cap (epochs ", o.epochs, ") while the training loss still moved: the last",
                  " epoch changed it by ", r.last_relative_change, " (relative; tolerance ", o.tolerance, ")");
    set_outcome(r.epochs_run, r.train_loss.back(), r.converged, reason);
    if (!out_.empty()) {
      JsonWriter j;
      j.begin_object().field("loss", p.string("loss")).field("epochs", o.epochs);
      j.field("iterations", r.epochs_run).field("final_objective", r.train_loss.back()).field("converged", r.converged);
      j.field("stop_reason", reason).field("last_relative_change", r.last_relative_change);
      j.key("train_loss").numbers(r.train_loss).key("learning_rate").numbers(r.learning_rate);
      std::vector<double> ve(r.validation_epoch.begin(), r.validation_epoch.end());
      j.key("validation_epoch").numbers(ve).key("validation_loss").numbers(r.validation_loss);
      j.field("min_eigenvalue_seen", r.max_negative_eigenvalue).end_object();
      write_text_atomic(out_ + ".json", j.str() + "\n");
      LineChart c;
      c.title = cat("SGD Mahalanobis (", p.string("loss"), ")");
      c.x_label = "epoch";
      c.y_label = "loss";
      PlotSeries tr{"train", {}, r.train_loss};
      for (std::size_t i = 0; i < r.train_loss.size(); ++i) tr.x.push_back(double(i + 1));
      c.series.push_back(tr);
      if (!r.validation_loss.empty()) c.series.push_back({"validation", ve, r.validation_loss});
      save_line_chart(out_ + "_loss.png", c);
    }
    return r.transform;
  }
};

}  // namespace

NodeType sgd_mahalanobis_type() {
  NodeTypeBuilder b("metric.sgd_mahalanobis");
  b      .doc("SGD on a PSD Mahalanobis matrix A with the pairwise or triplet loss; emits G = A^(1/2).")
      .example("sgd: {type: metric.sgd_mahalanobis, params: {loss: triplet, epochs: 20}}")
      .param(Param::choice("loss", {"pairwise", "triplet"}).default_value("pairwise").doc("the report's variant (i) or (ii)"))
      .param(Param::number("learning_rate").default_value(1e-3).min(0).doc("initial step size"))
      .param(Param::integer("epochs").default_value(100).min(1).doc("passes over the training set"))
      .param(Param::number("tolerance").default_value(1e-3).min(0)
                 .doc("converged when the last epoch changed the training loss by less than this (relative); all epochs run"))
      .param(Param::integer("batch_size").default_value(50).min(2).doc("points (pairwise) or triplets per step"))
      .param(Param::integer("validate_every").default_value(10).min(1).doc("epochs between validation losses"))
      .param(Param::integer("random_triplets").default_value(2).min(0).doc("random triplets per anchor besides the hardest"))
      .param(Param::number("margin").default_value(1.0).min(0).doc("triplet hinge margin"))
      .param(Param::boolean("trace_normalize").default_value(true).doc("rescale A to trace D after each step"))
      .param(Param::boolean("balance_pairs").default_value(false)
                 .doc("pairwise: same and different pairs weigh 1/2 each (the report's loss weighs every pair alike)"))
      .param(Param::path("checkpoint_dir").optional().doc("write A after every epoch as epoch_NNN.npy"))
      .param(Param::path("out").optional().doc("write <out>.json and <out>_loss.png"))
      .input("train", "*", "training features: embedding f32[B,D], label i64[B] (names as `fields` says)")
      .optional_input("validation", "*", "validation features, the same fields (learning-rate schedule)")
      .output("transform", "G: f32[D,D], mean: f32[D]", "the learned map, once at end of stream")
;
  add_learner_fields(b, "embedding: f32[B,D], label: i64[B]");
  return b.create<SgdMahalanobis>();
}

}  // namespace embedflow::metric
