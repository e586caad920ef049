// crowd.bcc — Bayesian crowd clustering (Gomes et al. 2011), the CEN paper's baseline whose
// workers are linear classifiers in one entangled image embedding, fitted by variational Bayes
// (core/bcc.hpp has the model, the bound and the updates; docs/crowd.md the usage).
//
// Inputs:  train       — pair batches: a_id, b_id, worker i64[B], pair_label f32[B] (crowd.grid_reader)
//          pairs       — optional pair batches to score after the fit (held-out pairs)
//          train_annotations, test_annotations — optional submissions: worker, grid i64[N]
//                        (crowd.grid_reader's annotations of each split)
// Outputs: pairs       — per `pairs` batch: a_id, b_id, worker, grid (when present), pair_label and
//                        distance f32[B] = 1 - P(same), P(same) = σ(E[z] / sqrt(1 + π Var[z] / 8)):
//                        crowd.pair_accuracy with threshold 0.5 predicts same iff P(same) > 0.5
//          train_submissions, test_submissions — per record of the matching annotations input:
//                        worker, grid, attributes f32[N,D] = |E[w_j]|, the weight the submission's
//                        worker gives each dimension (a per-worker constant, as CEN-worker's a^w),
//                        for crowd.attribute_retrieval's train and test inputs
//          embeddings  — at the end: id i64[N], embedding f32[N,D] = E[x_i] of every image id
//          workers     — at the end: worker i64[W], attributes f32[W,D] = |E[w_j]|, weights
//                        f32[W,D] = E[w_j], bias f32[W] = E[τ_j]
//          bound       — at the end: sweep i64[T], bound f64[T], the evidence lower bound after
//                        initialisation (sweep 0) and after each sweep (non-decreasing)
// Caveats: holds every training pair (25 bytes each) and the records to score until the end of
// all inputs, then fits (serial: each update uses the ones before it) and emits. Deterministic for
// a seed. Images never in a training pair keep the prior (E[x_i] = 0).
//
//   nodes:
//     train: {type: crowd.grid_reader, params: {path: out/crowd_cen/annotations.csv, split: train, batch_size: 4096}}
//     test:  {type: crowd.grid_reader, params: {path: out/crowd_cen/annotations.csv, split: test, batch_size: 4096}}
//     bcc:   {type: crowd.bcc, params: {images: 1000, workers: 200, dim: 8}}
//     acc:   {type: crowd.pair_accuracy, params: {name: BCC, threshold: 0.5}}
//   edges: [train.out -> bcc.train, test.out -> bcc.pairs, bcc.pairs -> acc.test]
//   (graphs/cen_crowd.yaml also feeds the annotations to crowd.attribute_retrieval)
#include <cmath>
#include <string>
#include <stdexcept>

#include "core/bcc.hpp"
#include "crowd_types.hpp"

namespace embedflow::crowd {
namespace {

enum Port : std::size_t { kTrain = 0, kPairs = 1, kTrainAnnotations = 2, kTestAnnotations = 3 };
enum OutPort : std::size_t { kOutPairs = 0, kOutTrainSubmissions = 1, kOutTestSubmissions = 2, kOutEmbeddings = 3, kOutWorkers = 4,
                             kOutBound = 5 };

class Bcc final : public Node {
 public:
  void open(NodeContext& ctx) override {
    const Params& p = ctx.params();
    options_.items = p.integer("images");
    options_.workers = p.integer("workers");
    options_.dim = p.integer("dim");
    options_.sweeps = p.integer("sweeps");
    options_.tolerance = p.number("tolerance");
    options_.init_std = p.number("init_std");
    options_.prior_shape = p.number("prior_shape");
    options_.prior_rate = p.number("prior_rate");
    options_.seed = ctx.seed();
  }

  void process(std::size_t port, const RecordPtr& r, Emitter&) override {
    if (port != kTrain) {
      held_.emplace_back(port, r);
      return;
    }
    const Array& a = r->get("a_id");
    const Array& b = r->get("b_id");
    const Array& w = r->get("worker");
    const Array& l = r->get("pair_label");
    if (b.numel() != a.numel() || w.numel() != a.numel() || l.numel() != a.numel())
      throw DataError(cat("train: a_id, b_id, worker and pair_label must have one entry per pair: ", r->describe()));
    for (std::int64_t i = 0; i < a.numel(); ++i) pairs_.push_back({a.as_int(i), b.as_int(i), w.as_int(i), l.as_double(i) > 0.5});
  }

  void close(Emitter& out) override {
    try {
      q_ = fit_bcc(pairs_, options_);
    } catch (const std::invalid_argument& e) {
      throw DataError(cat("train: ", e.what()));
    }
    log_info("crowd.bcc", pairs_.size(), " training pairs, ", q_.bound.size() - 1, " sweeps, bound ", q_.bound.front(), " -> ",
             q_.bound.back());
    for (const auto& [port, r] : held_) {
      if (port == kPairs) out.emit(kOutPairs, score(*r));
      else out.emit(port == kTrainAnnotations ? kOutTrainSubmissions : kOutTestSubmissions, submissions(*r));
    }
    emit_tables(out);
  }

 private:
  void check_ids(const Array& ids, std::int64_t n, const char* what) const {
    for (std::int64_t i = 0; i < ids.numel(); ++i)
      if (ids.as_int(i) < 0 || ids.as_int(i) >= n)
        throw DataError(cat(what, " ", ids.as_int(i), " is outside 0..", n - 1, " (raise `", what == std::string("worker") ? "workers" : "images", "`)"));
  }

  Record score(const Record& r) const {
    const Array& a = r.get("a_id");
    const Array& b = r.get("b_id");
    const Array& w = r.get("worker");
    check_ids(a, options_.items, "image");
    check_ids(b, options_.items, "image");
    check_ids(w, options_.workers, "worker");
    std::vector<float> d(static_cast<std::size_t>(a.numel()));
    for (std::int64_t i = 0; i < a.numel(); ++i)
      d[static_cast<std::size_t>(i)] = static_cast<float>(1.0 - q_.probability_same(a.as_int(i), b.as_int(i), w.as_int(i)));
    Record o;
    for (const char* f : {"a_id", "b_id", "worker", "grid", "pair_label"})
      if (const Array* x = r.find(f)) o.set(f, *x);
    o.set("distance", Array::from_vector<float>({a.numel()}, std::move(d)));
    return o;
  }

  Record submissions(const Record& r) const {
    const Array& w = r.get("worker");
    check_ids(w, options_.workers, "worker");
    const std::int64_t n = w.numel(), D = options_.dim;
    std::vector<float> a(static_cast<std::size_t>(n * D));
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t d = 0; d < D; ++d)
        a[static_cast<std::size_t>(i * D + d)] = static_cast<float>(std::fabs(q_.w_mean[static_cast<std::size_t>(w.as_int(i) * D + d)]));
    Record o;
    o.set("worker", w);
    o.set("grid", r.get("grid"));
    o.set("attributes", Array::from_vector<float>({n, D}, std::move(a)));
    return o;
  }

  void emit_tables(Emitter& out) const {
    const std::int64_t D = options_.dim, N = options_.items, W = options_.workers, T = static_cast<std::int64_t>(q_.bound.size());
    auto column = [](std::int64_t n) {
      std::vector<std::int64_t> v(static_cast<std::size_t>(n));
      for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = i;
      return v;
    };
    auto floats = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
    Record e;
    e.set("id", Array::from_vector<std::int64_t>({N}, column(N)));
    e.set("embedding", Array::from_vector<float>({N, D}, floats(q_.x_mean)));
    out.emit(kOutEmbeddings, std::move(e));
    Record w;
    w.set("worker", Array::from_vector<std::int64_t>({W}, column(W)));
    std::vector<float> weights = floats(q_.w_mean), magnitude(weights.size());
    for (std::size_t k = 0; k < weights.size(); ++k) magnitude[k] = std::fabs(weights[k]);
    w.set("attributes", Array::from_vector<float>({W, D}, std::move(magnitude)));
    w.set("weights", Array::from_vector<float>({W, D}, std::move(weights)));
    w.set("bias", Array::from_vector<float>({W}, floats(q_.tau_mean)));
    out.emit(kOutWorkers, std::move(w));
    Record b;
    b.set("sweep", Array::from_vector<std::int64_t>({T}, column(T)));
    b.set("bound", Array::from_vector<double>({T}, q_.bound));
    out.emit(kOutBound, std::move(b));
  }

  BccOptions options_;
  std::vector<BccPair> pairs_;
  std::vector<std::pair<std::size_t, RecordPtr>> held_;
  BccPosterior q_;
};

}  // namespace

NodeType bcc_type() {
  return NodeTypeBuilder("crowd.bcc")
      .doc("Bayesian crowd clustering (Gomes et al. 2011; docs/crowd.md): image embeddings x_i ~ N(0, I) and workers as "
           "linear classifiers, l ~ Bernoulli(sigmoid(x_i^T diag(w_j) x_j + tau_j)), fitted by mean-field variational Bayes "
           "on the training pairs; scores pairs (distance = 1 - P(same)), submissions (|E w_j|), embeddings and workers.")
      .example("bcc: {type: crowd.bcc, params: {images: 1000, workers: 200, dim: 8}}")
      .param(Param::integer("images").min(1).doc("image ids 0..images-1 (one embedding each)"))
      .param(Param::integer("workers").min(1).doc("worker ids 0..workers-1"))
      .param(Param::integer("dim").default_value(8).min(1).doc("D, the embedding size"))
      .param(Param::integer("sweeps").default_value(50).min(1).doc("most coordinate-ascent sweeps over every factor"))
      .param(Param::number("tolerance").default_value(1e-6).min(0.0).doc(
          "stop when a sweep raises the bound by less than this fraction of |bound|"))
      .param(Param::number("init_std").default_value(0.5).min(1e-6).doc(
          "noise N(0, init_std^2) from the node's seed added to the spectral start of E[x_i]; initial variance init_std^2"))
      .param(Param::number("prior_shape").default_value(1.0).min(1e-6).doc("a0 of the Gamma priors on the workers' precisions"))
      .param(Param::number("prior_rate").default_value(1.0).min(1e-6).doc("b0 of the Gamma priors on the workers' precisions"))
      .input("train", "a_id: i64[B], b_id: i64[B], worker: i64[B], pair_label: f32[B]", "training pairs")
      .optional_input("pairs", "a_id: i64[B], b_id: i64[B], worker: i64[B], pair_label: f32[B]", "pairs to score after the fit")
      .optional_input("train_annotations", "worker: i64[N], grid: i64[N]", "train submissions to give attribute weights")
      .optional_input("test_annotations", "worker: i64[N], grid: i64[N]", "test submissions to give attribute weights")
      .output("pairs", "distance: f32[B], pair_label: f32[B]", "scored pairs: distance = 1 - P(same)")
      .output("train_submissions", "worker: i64[N], grid: i64[N], attributes: f32[N,D]", "|E[w_j]| per train submission")
      .output("test_submissions", "worker: i64[N], grid: i64[N], attributes: f32[N,D]", "|E[w_j]| per test submission")
      .output("embeddings", "id: i64[N], embedding: f32[N,D]", "E[x_i] of every image id")
      .output("workers", "worker: i64[W], attributes: f32[W,D], weights: f32[W,D], bias: f32[W]",
              "|E[w_j]|, E[w_j] and E[tau_j] of every worker")
      .output("bound", "sweep: i64[T], bound: f64[T]", "the evidence lower bound after each sweep")
      .create<Bcc>();
}

}  // namespace embedflow::crowd
