// eval.triplet_accuracy — the fraction of human-labelled triplets (query, positive, negative)
// on which the embedding agrees: d(query, positive) < d(query, negative). Triplets come from
// Wang et al.'s file (four lines each: query text, query, positive, negative) or from a CSV of
// ids (query,positive,negative); each id is looked up in the `id` field of the embeddings.
// Writes <out>.json and emits one record {method, accuracy, triplet_accuracy (the same number,
// under the name eval.report reads), evaluated, agree, ties, missing}.
//
// Inputs:  in       embedding f32[B,D], id i64[B] or str[B]
// Outputs: metrics  method str[] (`name`, default the node id), accuracy f64[], evaluated i64[],
//                   ... (one record at end of stream; keep method and triplet_accuracy with
//                   core.select before an eval.report that also gets retrieval records, whose
//                   `evaluated` counts queries); with judged triplets also undecided, both,
//                   neither i64[]
//
// Groups: with `groups` (a CSV whose rows follow the triplet file's, row for row, as gen_photos'
// triplet truth file does), the accuracy of each value of its `group_column` is reported too, as
// triplet_accuracy_<value> (eval.report shows _easy and _hard), so a table can tell the easy
// half of a test from the hard one.
//
// Judged triplets: instead of the `triplets` file, port `triplets` takes image.judged_triplets'
// record(s) (query, a, b image ids, judgement A / B / both / neither). A means the query is
// more like A (A is the positive), B that it is more like B; both and neither are undecided:
// they are not scored, and are counted as undecided (both, neither) in the metrics record, the
// JSON and the published results table. Only decided triplets count in `evaluated`. Without a
// judgement field every row is A (query, positive, negative): geo.pair_sampler's triplets
// (output: triplets) renamed anchor -> query, positive -> a, negative -> b are scored as they are,
// the geotags' own test when no person judged the photos.
//
// Results: with judged triplets, publishes the table "triplet accuracy" (one row, the method:
// accuracy, evaluated, ties, missing, undecided, both, neither). With a triplets file it
// publishes none: eval.report's table carries triplet_accuracy, as before.
//
// Caveats: ties count as disagreement and are reported. Triplets naming an id that never
// arrived are counted as `missing`; if none can be evaluated the node fails.
//
//   seed: 1
//   nodes:
//     emb:  {type: io.hdf5_reader, params: {path: data/reid_128.h5, object: gallery, batch_size: 256}}
//     acc:  {type: eval.triplet_accuracy, params: {triplets: data/triplets.csv, out: out/triplets}}
//   edges: [emb.out -> acc.in]
#include <cblas.h>

#include <map>

#include <embedflow/results.hpp>

#include <embedflow/csv.hpp>
#include <embedflow/features.hpp>

#include "eval_types.hpp"
#include "judgements.hpp"
#include "report.hpp"

namespace embedflow::eval {
namespace {

using namespace evalcore;

class TripletAccuracy final : public Node {
 public:
  void open(NodeContext& ctx) override {
    const Params& p = ctx.params();
    ctx_ = &ctx;
    judged_ = ctx.input_connected(kJudged);
    if (!judged_) {
      path_ = p.string("triplets");
      std::string format = p.string("format");
      if (format == "auto") format = path_.size() >= 4 && path_.substr(path_.size() - 4) == ".csv" ? "csv" : "wang";
      triplets_ = format == "csv" ? read_triplet_csv(path_) : read_wang_triplets(path_);
    } else {
      path_ = "port 'triplets'";
    }
    if (p.has("groups")) read_groups(p.string("groups"), p.string("group_column"));
    spec_.kind = parse_distance(p.string("distance"));
    spec_.gamma = p.number("gamma");
    out_ = p.has("out") ? p.string("out") : "";
    name_ = ctx.id();
    method_ = p.has("name") ? p.string("name") : ctx.id();
    features_.what = "embeddings";
  }
  void process(std::size_t port, const RecordPtr& batch, Emitter&) override {
    if (port == kJudged) return add_judged(*batch);
    features_.append(*batch, false);
    if (!features_.has_id) throw DataError("embeddings need an 'id' field to match the triplet file's ids");
  }
  void close(Emitter& out) override {
    if (judged_ && triplets_.empty() && both_ + neither_ == 0) throw DataError("port 'triplets' delivered no triplets");
    if (judged_ && triplets_.empty())
      throw DataError(cat("all ", both_ + neither_, " judged triplets are undecided (", both_, " both, ", neither_,
                          " neither): none can be scored"));
    const IdIndex ids = index_ids(features_.id);
    const TripletScore s = score_triplets(triplets_, ids, features_.view(), spec_);
    if (s.evaluated == 0)
      throw DataError(cat("none of the ", s.total, " triplets in '", path_, "' could be evaluated; e.g. id '",
                          s.first_missing, "' is not among the ", ids.size(), " embeddings"));
    if (s.missing > 0)
      log_warning(name_, s.missing, " of ", s.total, " triplets name ids that never arrived (e.g. '", s.first_missing, "')");
    log_info(name_, "triplet accuracy ", percent(s.accuracy()), "% on ", s.evaluated, " triplets",
             judged_ ? cat("; ", both_ + neither_, " undecided (", both_, " both, ", neither_, " neither) not scored") : "");
    if (judged_) publish(s);
    if (!out_.empty()) {
      JsonWriter j;
      j.begin_object().field("triplets", path_).field("distance", distance_name(spec_.kind));
      j.field("accuracy", s.accuracy()).field("evaluated", s.evaluated).field("agree", s.agree);
      j.field("ties", s.ties).field("missing", s.missing).field("total", s.total);
      if (judged_) j.field("undecided", both_ + neither_).field("both", both_).field("neither", neither_);
      j.end_object();
      write_text_atomic(out_ + ".json", j.str() + "\n");
    }
    Record r;
    for (const auto& [group, members] : groups_) {
      const TripletScore g = score_triplets(members, ids, features_.view(), spec_);
      if (g.evaluated == 0) continue;
      log_info(name_, "  ", group, ": ", percent(g.accuracy()), "% on ", g.evaluated, " triplets");
      r.set("triplet_accuracy_" + group, Array::scalar<double>(g.accuracy()));
    }
    r.set("method", Array::string_scalar(method_));
    r.set("accuracy", Array::scalar<double>(s.accuracy()));
    r.set("triplet_accuracy", Array::scalar<double>(s.accuracy()));
    r.set("evaluated", Array::scalar<std::int64_t>(s.evaluated));
    r.set("agree", Array::scalar<std::int64_t>(s.agree));
    r.set("ties", Array::scalar<std::int64_t>(s.ties));
    r.set("missing", Array::scalar<std::int64_t>(s.missing));
    if (judged_) {
      r.set("undecided", Array::scalar<std::int64_t>(both_ + neither_));
      r.set("both", Array::scalar<std::int64_t>(both_));
      r.set("neither", Array::scalar<std::int64_t>(neither_));
    }
    out.emit(0, std::move(r));
  }

 private:
  // Splits the triplets by the group file's column, row i of the file labelling triplet i.
  void read_groups(const std::string& path, const std::string& column) {
    const CsvTable t = read_csv_table(path, "triplet groups file");
    const int c = t.column(column);
    if (c < 0) throw ConfigError(cat(path, ": no column '", column, "' (columns: ", t.header.size(), ")"));
    if (t.rows.size() != triplets_.size())
      throw DataError(cat(path, ": ", t.rows.size(), " rows, but '", path_, "' holds ", triplets_.size(),
                          " triplets; the groups file must follow the triplet file row for row"));
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
      const std::string g = trim_csv_field(t.rows[i][static_cast<std::size_t>(c)]);
      if (g.empty() || g.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos)
        throw DataError(cat(path, ":", t.lines[i], ": group '", g, "' must be lower-case letters, digits and _"));
      groups_[g].push_back(triplets_[i]);
    }
  }

  static constexpr std::size_t kJudged = 1;

  // image.judged_triplets' record: A and B judgements become (query, positive, negative)
  // triplets; both and neither are counted.
  void add_judged(const Record& r) {
    const Array &q = r.get("query"), &a = r.get("a"), &b = r.get("b");
    const Array* j = r.find("judgement");  // absent: every triplet is A (query, positive, negative)
    const Array* line = r.find("line");
    const std::int64_t n = q.numel();
    if (a.numel() != n || b.numel() != n || (j && j->numel() != n))
      throw DataError(cat("port 'triplets': query, a, b and judgement differ in length: ", r.describe()));
    for (std::int64_t i = 0; i < n; ++i) {
      const std::string v = j ? j->string_at(i) : std::string("A");
      const int at = line ? static_cast<int>(line->as_int(i)) : 0;
      const std::string qi = std::to_string(q.as_int(i)), ai = std::to_string(a.as_int(i)), bi = std::to_string(b.as_int(i));
      if (v == "A" || v == "a") triplets_.push_back({qi, ai, bi, at});
      else if (v == "B" || v == "b") triplets_.push_back({qi, bi, ai, at});
      else if (v == "both") ++both_;
      else if (v == "neither") ++neither_;
      else throw DataError(cat("port 'triplets': judgement '", v, "' (triplet ", i, ") is not one of A, B, both, neither"));
    }
  }

  // The results table of judged triplets, with their undecided counts.
  void publish(const TripletScore& s) const {
    ResultTable t;
    t.title = "triplet accuracy";
    t.columns = {{"accuracy", "accuracy", "%", 100.0, true},   {"evaluated", "triplets scored", "", 1.0, true},
                 {"ties", "ties", "", 1.0, false},             {"missing", "missing", "", 1.0, false},
                 {"undecided", "undecided", "", 1.0, false},   {"both", "both", "", 1.0, false},
                 {"neither", "neither", "", 1.0, false}};
    t.rows.push_back({method_,
                      {{"accuracy", s.accuracy()},
                       {"evaluated", static_cast<double>(s.evaluated)},
                       {"ties", static_cast<double>(s.ties)},
                       {"missing", static_cast<double>(s.missing)},
                       {"undecided", static_cast<double>(both_ + neither_)},
                       {"both", static_cast<double>(both_)},
                       {"neither", static_cast<double>(neither_)}},
                      {}});
    publish_results(*ctx_, t);
  }

  NodeContext* ctx_ = nullptr;
  bool judged_ = false;
  std::int64_t both_ = 0, neither_ = 0;
  std::string path_, out_, name_, method_;
  std::vector<Triplet> triplets_;
  std::map<std::string, std::vector<Triplet>> groups_;
  DistanceSpec spec_;
  FeatureSet features_;
};

}  // namespace

NodeType triplet_accuracy_type() {
  return NodeTypeBuilder("eval.triplet_accuracy")
      .doc("Fraction of human-labelled (query, positive, negative) triplets the embedding orders correctly.")
      .example("acc: {type: eval.triplet_accuracy, params: {triplets: data/triplets.csv, out: out/triplets}}")
      .param(Param::path("triplets").optional().doc(
          "Wang et al. triplet file, or a CSV query,positive,negative of ids; not with port triplets connected"))
      .param(Param::choice("format", {"auto", "wang", "csv"}).default_value("auto").doc("auto: csv for *.csv, else wang"))
      .param(Param::choice("distance", distance_names()).default_value("euclidean").doc("measure compared"))
      .param(Param::number("gamma").default_value(1.0).min(0).doc("kernel width"))
      .param(Param::path("groups").optional().doc(
          "CSV following the triplet file row for row; each value of group_column is scored on its own"))
      .param(Param::string("group_column").default_value("half").doc("the groups file's column (e.g. easy / hard)"))
      .param(Param::path("out").optional().doc("write <out>.json"))
      .param(Param::string("name").optional().doc("method name in the metrics record (eval.report's row; default: the node id)"))
      .input("in", "embedding: f32[B,D]", "embeddings with an id field (i64 or str)")
      .optional_input("triplets", "query: i64[T], a: i64[T], b: i64[T]",
                      "judged triplets of image ids (image.judged_triplets, judgement: str[T]): A and B scored, both and neither "
                      "counted as undecided; without judgement every row is (query, positive, negative), e.g. geo.pair_sampler's "
                      "triplets renamed anchor -> query, positive -> a, negative -> b")
      .output("metrics", "method: str[], accuracy: f64[], triplet_accuracy: f64[], evaluated: i64[]", "one record at end of stream")
      .check([](SchemaContext& c) {
        const bool judged = c.connected("triplets");
        if (judged == c.params().has("triplets"))
          c.error(judged ? "give the triplets either as the triplets file or on port triplets, not both"
                         : "needs the triplets file (parameter triplets) or judged triplets on port triplets",
                  "triplets");
        if (judged && c.params().has("groups"))
          c.error("groups follow the triplets file row for row; they do not apply to judged triplets on port triplets", "groups");
        if (judged) {
          PortSchema out = c.output("metrics");
          for (const char* f : {"undecided", "both", "neither"}) out.add(FieldSchema{f, DType::i64, std::vector<Dim>{}});
          c.set_output("metrics", out);
        }
        // The groups the file names become declared fields, so core.select and eval.report can
        // name them at load. A file that cannot be read here is reported when the node opens.
        if (!c.params().has("groups")) return;
        try {
          const CsvTable t = read_csv_table(c.params().string("groups"), "triplet groups file");
          const int col = t.column(c.params().string("group_column"));
          if (col < 0) return;
          PortSchema out = c.output("metrics");
          for (const auto& row : t.rows) {
            const std::string g = trim_csv_field(row[static_cast<std::size_t>(col)]);
            if (!g.empty() && !out.find("triplet_accuracy_" + g))
              out.add(FieldSchema{"triplet_accuracy_" + g, DType::f64, std::vector<Dim>{}});
          }
          c.set_output("metrics", out);
        } catch (const Error&) {
        }
      })
      .create<TripletAccuracy>();
}

}  // namespace embedflow::eval
