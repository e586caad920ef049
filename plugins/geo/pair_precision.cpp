// geo.pair_precision — how fuzzy a geotag pair set is, measured against what the photos show:
// the label precision of its positives (the fraction of pairs labelled similar whose photos show
// the same thing, by a truth file's key column, e.g. gen_photos' facade_key) and of its
// negatives (the fraction labelled dissimilar whose keys differ). This is the seed's
// "quantifying the amount of fuzziness": P_{1,2000} against P_{100,2000} is a precision against
// a size. Photos missing from the truth file are counted and left out.
//
// Inputs:  in — pair batches from geo.pair_sampler (anchor, other, label)
// Outputs: metrics — method str[] (`name`), label_precision, negative_precision f64[],
//          positives, negatives, unjudged i64[] (one record at end of stream, for eval.report)
// Caveats: deterministic; holds the truth file's keys in memory.
//
//   nodes:
//     photos:    {type: geo.csv_photos, params: {path: tests/geo/data/photos_small.csv, on_bad_row: skip}}
//     pairs:     {type: geo.pair_sampler, params: {positive_radius_m: 100, negative_min_m: 2000}}
//     precision: {type: geo.pair_precision, params: {truth: tests/geo/data/photos_small.csv, key_column: user}}
//     show:      {type: core.sink, params: {mode: print}}
//   edges: [photos.out -> pairs.photos, pairs.out -> precision.in, precision.metrics -> show.in]
#include <unordered_map>

#include "embedflow/csv.hpp"
#include "embedflow/embedflow.hpp"
#include "embedflow/results.hpp"
#include "geo_types.hpp"

namespace embedflow::geo {
namespace {

class PairPrecision final : public Node {
 public:
  void open(NodeContext& ctx) override {
    const Params& p = ctx.params();
    id_ = ctx.id();
    name_ = p.has("name") ? p.string("name") : ctx.id();
    const CsvTable t = read_csv_table(p.string("truth"), "truth file");
    const int idc = t.column(p.string("id_column")), kc = t.column(p.string("key_column"));
    if (idc < 0 || kc < 0)
      throw ConfigError(cat(p.string("truth"), ": needs columns '", p.string("id_column"), "' and '", p.string("key_column"), "'"));
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
      const std::string id = trim_csv_field(t.rows[i][static_cast<std::size_t>(idc)]);
      std::int64_t v = 0;
      try {
        std::size_t used = 0;
        v = std::stoll(id, &used);
        if (used != id.size()) throw std::invalid_argument("trailing text");
      } catch (const std::exception&) {
        throw DataError(cat(p.string("truth"), ":", t.lines[i], ": id '", id, "' is not an integer"));
      }
      keys_[v] = trim_csv_field(t.rows[i][static_cast<std::size_t>(kc)]);
    }
  }
  void process(std::size_t, const RecordPtr& in, Emitter&) override {
    const Array& a = in->get("anchor");
    const Array& o = in->get("other");
    const Array& l = in->get("label");
    for (std::int64_t i = 0; i < a.numel(); ++i) {
      auto ka = keys_.find(a.as_int(i)), ko = keys_.find(o.as_int(i));
      if (ka == keys_.end() || ko == keys_.end()) {
        ++unjudged_;
        continue;
      }
      const bool same = ka->second == ko->second;
      if (l.as_int(i) == 1) {
        ++positives_;
        correct_pos_ += same;
      } else {
        ++negatives_;
        correct_neg_ += !same;
      }
    }
  }
  void close(Emitter& out) override {
    const double pos = positives_ ? static_cast<double>(correct_pos_) / static_cast<double>(positives_) : NAN;
    const double neg = negatives_ ? static_cast<double>(correct_neg_) / static_cast<double>(negatives_) : NAN;
    if (unjudged_) log_warning(id_, unjudged_, " pairs name photos the truth file does not have; left out");
    log_info(id_, name_, ": label precision ", pos, " of ", positives_, " positives, ", neg, " of ", negatives_, " negatives");
    ResultTable t;
    t.title = "pair set label precision";
    t.columns = {{"label_precision", "positives correct", "%", 100.0, true},
                 {"negative_precision", "negatives correct", "%", 100.0, true},
                 {"positives", "positive pairs", "", 1.0, true}};
    t.rows.push_back({name_, {{"label_precision", pos}, {"negative_precision", neg}, {"positives", static_cast<double>(positives_)}}, {}});
    publish_results(id_, t);
    Record r;
    r.set("method", Array::string_scalar(name_));
    r.set("label_precision", Array::scalar<double>(pos));
    r.set("negative_precision", Array::scalar<double>(neg));
    r.set("positives", Array::scalar<std::int64_t>(positives_));
    r.set("negatives", Array::scalar<std::int64_t>(negatives_));
    r.set("unjudged", Array::scalar<std::int64_t>(unjudged_));
    out.emit(0, std::move(r));
  }

 private:
  std::string id_, name_;
  std::unordered_map<std::int64_t, std::string> keys_;
  std::int64_t positives_ = 0, negatives_ = 0, correct_pos_ = 0, correct_neg_ = 0, unjudged_ = 0;
};

}  // namespace

NodeType pair_precision_type() {
  return NodeTypeBuilder("geo.pair_precision")
      .deterministic()
      .doc("Label precision of a geotag pair set against a truth file: positives whose photos show the same thing, "
           "negatives that do not.")
      .example(
          "nodes:\n"
          "  photos:    {type: geo.csv_photos, params: {path: tests/geo/data/photos_small.csv, on_bad_row: skip}}\n"
          "  pairs:     {type: geo.pair_sampler, params: {positive_radius_m: 100, negative_min_m: 2000}}\n"
          "  precision: {type: geo.pair_precision, params: {truth: tests/geo/data/photos_small.csv, key_column: user}}\n"
          "  show:      {type: core.sink, params: {mode: print}}\n"
          "edges: [photos.out -> pairs.photos, pairs.out -> precision.in, precision.metrics -> show.in]\n")
      .param(Param::path("truth").doc("CSV with a photo id column and a key column (gen_photos --truth)"))
      .param(Param::string("id_column").default_value("id").doc("the truth file's photo id column"))
      .param(Param::string("key_column").default_value("facade_key").doc("two photos show the same thing when these are equal"))
      .param(Param::string("name").optional().doc("the pair set's name in the metrics record (default: the node id)"))
      .input("in", "anchor: i64[N], other: i64[N], label: i64[N]", "pairs from geo.pair_sampler")
      .output("metrics", "method: str[], label_precision: f64[], negative_precision: f64[]", "one record at end of stream")
      .create<PairPrecision>();
}

}  // namespace embedflow::geo
