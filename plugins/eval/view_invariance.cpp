// eval.view_invariance — how close an embedding keeps one view under changing conditions (the
// frames of a time-lapse: one viewpoint, the light of different hours) relative to different
// views of a scene. Over every pair of `same` embeddings (the frames) and every pair of distinct
// `views` embeddings that share a label (different views of one scene) it reports
//   ratio = mean distance of frame pairs / mean distance of same-scene view pairs (lower: the
//           light moves the embedding less than a change of viewpoint does), and
//   auc   = P(a frame pair is closer than a same-scene view pair), ties counting one half
//           (0.5: no better than chance; 1: every frame pair closer than every view pair).
// Writes <out>.json and emits one record {method, invariance_ratio, invariance_auc, frame_pairs,
// view_pairs} for eval.report.
//
// Inputs:  same   embedding f32[B,D] (the frames of one view)
//          views  embedding f32[B,D], label i64[B] (other photos, labelled by scene)
// Outputs: metrics (one record at end of stream)
//
// Caveats: everything is computed at close(); pairs are enumerated, so memory is the pair
// distances: keep the inputs to a few thousand rows. Fewer than two frames, or no two views
// sharing a label, is a DataError.
//
//   seed: 1
//   nodes:
//     frames: {type: io.hdf5_reader, params: {path: data/frames.h5, batch_size: 64}}
//     views:  {type: io.hdf5_reader, params: {path: data/views.h5, batch_size: 64}}
//     inv:    {type: eval.view_invariance, params: {distance: cosine, out: out/invariance}}
//   edges: [frames.out -> inv.same, views.out -> inv.views]
#include <algorithm>
#include <cmath>

#include <embedflow/features.hpp>

#include "eval_types.hpp"
#include <embedflow/report_files.hpp>

namespace embedflow::eval {
namespace {

double pair_distance(const float* a, const float* b, std::int64_t d, bool cosine) {
  double dot = 0, na = 0, nb = 0, sq = 0;
  for (std::int64_t k = 0; k < d; ++k) {
    dot += static_cast<double>(a[k]) * b[k];
    na += static_cast<double>(a[k]) * a[k];
    nb += static_cast<double>(b[k]) * b[k];
    const double t = static_cast<double>(a[k]) - b[k];
    sq += t * t;
  }
  if (!cosine) return std::sqrt(sq);
  const double n = std::sqrt(na) * std::sqrt(nb);
  return n > 0 ? 1.0 - dot / n : 1.0;
}

// P(x < y) + P(x == y) / 2 for x drawn from `a`, y from `b` (Mann-Whitney), by sorting.
double auc_below(std::vector<double> a, std::vector<double> b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  double wins = 0;
  std::size_t lo = 0, hi = 0;
  for (double y : b) {
    while (lo < a.size() && a[lo] < y) ++lo;
    while (hi < a.size() && a[hi] <= y) ++hi;
    wins += static_cast<double>(lo) + 0.5 * static_cast<double>(hi - lo);
  }
  return wins / (static_cast<double>(a.size()) * static_cast<double>(b.size()));
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

class ViewInvariance final : public Node {
 public:
  void open(NodeContext& ctx) override {
    const Params& p = ctx.params();
    cosine_ = p.string("distance") == "cosine";
    out_ = p.has("out") ? p.string("out") : "";
    name_ = ctx.id();
    method_ = p.has("name") ? p.string("name") : ctx.id();
    same_.what = "frames";
    views_.what = "views";
  }
  void process(std::size_t port, const RecordPtr& batch, Emitter&) override {
    if (port == 0) same_.append(*batch, false);
    else views_.append(*batch, true);
  }
  void close(Emitter& out) override {
    if (same_.rows() < 2) throw DataError(cat("fewer than two frames arrived on `same` (", same_.rows(), ")"));
    if (views_.rows() > 0 && views_.dim != same_.dim)
      throw DataError(cat("frames have ", same_.dim, " dims but views have ", views_.dim));
    const std::int64_t d = same_.dim;
    std::vector<double> frames, views;
    for (std::int64_t i = 0; i < same_.rows(); ++i)
      for (std::int64_t j = i + 1; j < same_.rows(); ++j)
        frames.push_back(pair_distance(&same_.x[static_cast<std::size_t>(i * d)], &same_.x[static_cast<std::size_t>(j * d)], d, cosine_));
    for (std::int64_t i = 0; i < views_.rows(); ++i)
      for (std::int64_t j = i + 1; j < views_.rows(); ++j)
        if (views_.label[static_cast<std::size_t>(i)] == views_.label[static_cast<std::size_t>(j)])
          views.push_back(pair_distance(&views_.x[static_cast<std::size_t>(i * d)], &views_.x[static_cast<std::size_t>(j * d)], d, cosine_));
    if (views.empty()) throw DataError(cat("no two of the ", views_.rows(), " views share a label: nothing to compare the frames with"));
    const double frame_mean = mean(frames), view_mean = mean(views);
    const double ratio = view_mean > 0 ? frame_mean / view_mean : NAN;
    const double auc = auc_below(frames, views);
    log_info(name_, method_, ": frame pairs ", frame_mean, " apart against ", view_mean, " for same-scene views (ratio ", ratio,
             ", AUC ", auc, "; ", frames.size(), " and ", views.size(), " pairs)");
    if (!out_.empty()) {
      JsonWriter j;
      j.begin_object().field("method", method_).field("distance", cosine_ ? "cosine" : "euclidean");
      j.field("frames", same_.rows()).field("frame_pairs", static_cast<std::int64_t>(frames.size()));
      j.field("view_pairs", static_cast<std::int64_t>(views.size())).field("frame_mean", frame_mean).field("view_mean", view_mean);
      j.field("ratio", ratio).field("auc", auc).end_object();
      write_text_atomic(out_ + ".json", j.str() + "\n");
    }
    Record r;
    r.set("method", Array::string_scalar(method_));
    r.set("invariance_ratio", Array::scalar<double>(ratio));
    r.set("invariance_auc", Array::scalar<double>(auc));
    r.set("frame_pairs", Array::scalar<std::int64_t>(static_cast<std::int64_t>(frames.size())));
    r.set("view_pairs", Array::scalar<std::int64_t>(static_cast<std::int64_t>(views.size())));
    out.emit(0, std::move(r));
  }

 private:
  bool cosine_ = true;
  std::string out_, name_, method_;
  FeatureSet same_, views_;
};

}  // namespace

NodeType view_invariance_type() {
  return NodeTypeBuilder("eval.view_invariance")
      .doc("How close one view's frames under changing light stay, against different views of a scene: the ratio of mean "
           "distances and the probability that a frame pair is the closer one.")
      .example("inv: {type: eval.view_invariance, params: {distance: cosine, out: out/invariance}}")
      .param(Param::choice("distance", {"cosine", "euclidean"}).default_value("cosine").doc("distance between embeddings"))
      .param(Param::path("out").optional().doc("write <out>.json"))
      .param(Param::string("name").optional().doc("method name in the metrics record (eval.report's row; default: the node id)"))
      .input("same", "embedding: f32[B,D]", "embeddings of one view's frames under changing conditions")
      .input("views", "embedding: f32[B,D], label: i64[B]", "embeddings of other views, labelled by scene")
      .output("metrics", "method: str[], invariance_ratio: f64[], invariance_auc: f64[]", "one record at end of stream")
      .create<ViewInvariance>();
}

}  // namespace embedflow::eval
