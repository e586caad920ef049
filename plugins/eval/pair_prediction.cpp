// eval.pair_prediction — held-out pair accuracy: a pair (a, b) is predicted "similar" when
// d(a, b) <= threshold. The threshold is `threshold` when given, else calibrated to maximise
// accuracy on `validation_pairs`. Pairs are CSV rows a,b,similar (0/1) of ids that are looked
// up in the embeddings' `id` field. Writes <out>.json and emits {accuracy, threshold, tp, ...}.
//
// Inputs:  in       embedding f32[B,D], id i64[B] or str[B]
// Outputs: metrics  accuracy f64[], threshold f64[] (one record at end of stream)
//
// Caveats: give exactly one of `threshold` and `validation_pairs` (checked at graph load).
// Pairs naming unknown ids are counted as `missing`, never silently dropped.
//
//   seed: 1
//   nodes:
//     emb:   {type: io.hdf5_reader, params: {path: data/reid_128.h5, object: gallery, batch_size: 256}}
//     pairs: {type: eval.pair_prediction, params: {pairs: data/test_pairs.csv, validation_pairs: data/val_pairs.csv, out: out/pairs}}
//   edges: [emb.out -> pairs.in]
#include <embedflow/features.hpp>

#include "eval_types.hpp"
#include "judgements.hpp"
#include "report.hpp"

namespace embedflow::eval {
namespace {

using namespace evalcore;

class PairPrediction final : public Node {
 public:
  void open(NodeContext& ctx) override {
    const Params& p = ctx.params();
    test_path_ = p.string("pairs");
    test_ = read_pair_csv(test_path_);
    if (p.has("validation_pairs")) {
      val_path_ = p.string("validation_pairs");
      validation_ = read_pair_csv(val_path_);
    }
    if (p.has("threshold")) threshold_ = p.number("threshold"), fixed_ = true;
    spec_.kind = parse_distance(p.string("distance"));
    spec_.gamma = p.number("gamma");
    out_ = p.has("out") ? p.string("out") : "";
    name_ = ctx.id();
    features_.what = "embeddings";
  }
  void process(std::size_t, const RecordPtr& batch, Emitter&) override {
    features_.append(*batch, false);
    if (!features_.has_id) throw DataError("embeddings need an 'id' field to match the pair files' ids");
  }
  void close(Emitter& out) override {
    const IdIndex ids = index_ids(features_.id);
    auto check = [&](const PairDistances& d, const std::vector<Pair>& all, const std::string& path) {
      if (d.distance.empty())
        throw DataError(cat("none of the ", all.size(), " pairs in '", path, "' could be evaluated; e.g. id '",
                            d.first_missing, "' is not among the ", ids.size(), " embeddings"));
      if (d.missing > 0)
        log_warning(name_, d.missing, " of ", all.size(), " pairs in '", path, "' name unknown ids (e.g. '", d.first_missing, "')");
    };
    PairScore val_score;
    if (!fixed_) {
      const PairDistances v = pair_distances(validation_, ids, features_.view(), spec_);
      check(v, validation_, val_path_);
      threshold_ = calibrate_threshold(v);
      val_score = score_pairs(v, threshold_);
    }
    const PairDistances t = pair_distances(test_, ids, features_.view(), spec_);
    check(t, test_, test_path_);
    const PairScore s = score_pairs(t, threshold_);
    log_info(name_, "pair accuracy ", percent(s.accuracy()), "% on ", s.n, " held-out pairs at threshold ", threshold_,
             fixed_ ? " (fixed)" : " (calibrated)");
    if (!out_.empty()) {
      JsonWriter j;
      j.begin_object().field("pairs", test_path_).field("distance", distance_name(spec_.kind));
      j.field("threshold", threshold_).field("threshold_source", fixed_ ? "fixed" : "calibrated");
      if (!fixed_) j.field("validation_pairs", val_path_).field("validation_accuracy", val_score.accuracy());
      j.field("accuracy", s.accuracy()).field("n", s.n).field("tp", s.tp).field("tn", s.tn).field("fp", s.fp);
      j.field("fn", s.fn).field("missing", t.missing).end_object();
      write_text_atomic(out_ + ".json", j.str() + "\n");
    }
    Record r;
    r.set("accuracy", Array::scalar<double>(s.accuracy()));
    r.set("threshold", Array::scalar<double>(threshold_));
    r.set("n", Array::scalar<std::int64_t>(s.n));
    r.set("missing", Array::scalar<std::int64_t>(t.missing));
    out.emit(0, std::move(r));
  }

 private:
  std::string test_path_, val_path_, out_, name_;
  std::vector<Pair> test_, validation_;
  double threshold_ = 0;
  bool fixed_ = false;
  DistanceSpec spec_;
  FeatureSet features_;
};

}  // namespace

NodeType pair_prediction_type() {
  return NodeTypeBuilder("eval.pair_prediction")
      .doc("Held-out pair accuracy at a fixed threshold or one calibrated on validation pairs.")
      .example("pairs: {type: eval.pair_prediction, params: {pairs: data/test_pairs.csv, threshold: 1.5}}")
      .param(Param::path("pairs").doc("held-out CSV a,b,similar (0/1) of ids"))
      .param(Param::path("validation_pairs").optional().doc("CSV a,b,similar used to calibrate the threshold"))
      .param(Param::number("threshold").optional().doc("fixed distance threshold: similar iff d <= threshold"))
      .param(Param::choice("distance", distance_names()).default_value("euclidean").doc("measure compared"))
      .param(Param::number("gamma").default_value(1.0).min(0).doc("kernel width"))
      .param(Param::path("out").optional().doc("write <out>.json"))
      .input("in", "embedding: f32[B,D]", "embeddings with an id field (i64 or str)")
      .output("metrics", "accuracy: f64[], threshold: f64[]", "one record at end of stream")
      .check([](SchemaContext& c) {
        const bool fixed = c.params().has("threshold"), val = c.params().has("validation_pairs");
        if (fixed == val)
          c.error("give exactly one of `threshold` (fixed) and `validation_pairs` (calibrated)", fixed ? "threshold" : "");
      })
      .create<PairPrediction>();
}

}  // namespace embedflow::eval
