// crowd.pair_accuracy — held-out pair prediction (the CEN paper's Fig. 9): a pair is predicted
// "same cluster" iff its distance d < threshold, and the accuracy is the fraction of test pairs
// whose prediction equals the worker's label.
//
// Inputs:  test  — scored pairs (crowd.cen_score's pairs: distance f32[B], pair_label f32[B]);
//          train — optional, scored training pairs, to fit the threshold (baselines);
// Outputs: metrics — one record at the end: method str[1], series str[1], x, accuracy,
//          threshold, pairs, positive_fraction, train_accuracy (NaN without train) f64[].
// Threshold: `threshold` when > 0 (for a CEN (xi_n + xi_p)/2, the paper's rule); else the value
//   that maximises accuracy on the train pairs (a midpoint between two sorted train distances,
//   ties to the smaller), which is how the siamese and triplet baselines, whose distances have
//   no margin pair to halve, are given their best single threshold.
// Caveats: holds the distances (4 bytes + 1 byte a pair) until the end.
//
//   acc: {type: crowd.pair_accuracy, params: {name: CEN-mixture, threshold: 0.55}}
//   edges: [score.pairs -> acc.test, acc.metrics -> report.in]   (graphs/cen_crowd.yaml)
#include <algorithm>
#include <cmath>
#include <numeric>

#include "crowd_types.hpp"

namespace embedflow::crowd {
namespace {

struct Scored {
  std::vector<float> d;
  std::vector<std::uint8_t> same;
  void add(const Record& r, const char* port) {
    const Array& d_ = r.get("distance");
    const Array& l = r.get("pair_label");
    if (d_.numel() != l.numel())
      throw DataError(cat(port, ": distance has ", d_.numel(), " entries but pair_label ", l.numel()));
    for (std::int64_t i = 0; i < d_.numel(); ++i) {
      const double v = d_.as_double(i);
      if (!std::isfinite(v)) throw DataError(cat(port, ": distance ", v, " of pair ", d.size(), " is not finite"));
      d.push_back(static_cast<float>(v));
      same.push_back(l.as_double(i) > 0.5 ? 1 : 0);
    }
  }
  double accuracy(double t) const {
    std::size_t ok = 0;
    for (std::size_t i = 0; i < d.size(); ++i) ok += ((d[i] < t) == (same[i] != 0));
    return d.empty() ? NAN : static_cast<double>(ok) / static_cast<double>(d.size());
  }
};

// The threshold maximising accuracy on `s`: sweep the sorted distances, counting positives
// below and negatives at or above each cut.
double fit_threshold(const Scored& s) {
  std::vector<std::size_t> order(s.d.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return s.d[a] < s.d[b]; });
  std::size_t negatives = 0;
  for (auto v : s.same) negatives += v == 0;
  // cut before position k: pairs [0,k) predicted same.
  std::size_t pos_below = 0, neg_below = 0, best_ok = negatives;
  double best = order.empty() ? 0.0 : s.d[order[0]] - 1.0;
  for (std::size_t k = 1; k <= order.size(); ++k) {
    (s.same[order[k - 1]] ? pos_below : neg_below)++;
    if (k < order.size() && s.d[order[k]] == s.d[order[k - 1]]) continue;
    const std::size_t ok = pos_below + (negatives - neg_below);
    if (ok > best_ok) {
      best_ok = ok;
      best = k < order.size() ? 0.5 * (double(s.d[order[k - 1]]) + double(s.d[order[k]])) : double(s.d[order[k - 1]]) + 1.0;
    }
  }
  return best;
}

class PairAccuracy final : public Node {
 public:
  void open(NodeContext& ctx) override { ctx_ = &ctx; }
  void process(std::size_t port, const RecordPtr& r, Emitter&) override {
    (port == 0 ? test_ : train_).add(*r, port == 0 ? "test" : "train");
  }
  void close(Emitter& out) override {
    const Params& p = ctx_->params();
    double t = p.number("threshold");
    if (t <= 0) {
      if (train_.d.empty()) throw DataError("threshold is not set and no train pairs arrived to fit it on");
      t = fit_threshold(train_);
    }
    if (test_.d.empty()) throw DataError("no test pairs arrived");
    const double acc = test_.accuracy(t);
    const double pos = std::accumulate(test_.same.begin(), test_.same.end(), 0.0) / static_cast<double>(test_.same.size());
    const std::string name = p.string("name"), series = p.string("series").empty() ? name : p.string("series");
    log_info(ctx_->id(), name, ": held-out pair accuracy ", acc, " at threshold ", t, " on ", test_.d.size(), " pairs");
    Record r;
    r.set("method", Array::strings({name}));
    r.set("series", Array::strings({series}));
    r.set("x", Array::scalar<double>(p.number("x")));
    r.set("accuracy", Array::scalar<double>(acc));
    r.set("threshold", Array::scalar<double>(t));
    r.set("pairs", Array::scalar<double>(static_cast<double>(test_.d.size())));
    r.set("positive_fraction", Array::scalar<double>(pos));
    r.set("train_accuracy", Array::scalar<double>(train_.d.empty() ? NAN : train_.accuracy(t)));
    out.emit(0, std::move(r));
  }

 private:
  NodeContext* ctx_ = nullptr;
  Scored test_, train_;
};

}  // namespace

NodeType pair_accuracy_type() {
  return NodeTypeBuilder("crowd.pair_accuracy")
      .doc("Held-out pair prediction accuracy: same cluster iff distance < threshold; the threshold is given (a CEN's "
           "(xi_n + xi_p)/2) or fitted to maximise accuracy on scored train pairs (baselines).")
      .example("acc: {type: crowd.pair_accuracy, params: {name: CEN-mixture, threshold: 0.55}}")
      .param(Param::string("name").doc("method name: the row of crowd.report"))
      .param(Param::string("series").default_value("").doc("curve this point belongs to in crowd.report's chart; empty: name"))
      .param(Param::number("x").default_value(-1.0).doc("x of this point in the chart, e.g. the reader's train_fraction; -1: none"))
      .param(Param::number("threshold").default_value(0.0).min(0.0).doc(
          "predict same iff distance < threshold; 0: fit on the train input"))
      .input("test", "distance: f32[B], pair_label: f32[B]", "scored held-out pairs")
      .optional_input("train", "distance: f32[B], pair_label: f32[B]", "scored training pairs (threshold fitting)")
      .output("metrics", "method: str[1], accuracy: f64[], threshold: f64[]", "one record at the end")
      .check([](SchemaContext& c) {
        if (c.params().number("threshold") <= 0 && !c.connected("train"))
          c.error("threshold 0 fits the threshold on train pairs: connect the `train` input or set threshold", "threshold");
      })
      .create<PairAccuracy>();
}

}  // namespace embedflow::crowd
