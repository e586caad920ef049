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
//                   `evaluated` counts queries)
//
// Groups: with `groups` (a CSV whose rows follow the triplet file's, row for row, as gen_photos'
// triplet truth file does), the accuracy of each value of its `group_column` is reported too, as
// triplet_accuracy_<value> (eval.report shows _easy and _hard), so a table can tell the easy
// half of a test from the hard one.
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
    path_ = p.string("triplets");
    std::string format = p.string("format");
    if (format == "auto") format = path_.size() >= 4 && path_.substr(path_.size() - 4) == ".csv" ? "csv" : "wang";
    triplets_ = format == "csv" ? read_triplet_csv(path_) : read_wang_triplets(path_);
    if (p.has("groups")) read_groups(p.string("groups"), p.string("group_column"));
    spec_.kind = parse_distance(p.string("distance"));
    spec_.gamma = p.number("gamma");
    out_ = p.has("out") ? p.string("out") : "";
    name_ = ctx.id();
    method_ = p.has("name") ? p.string("name") : ctx.id();
    features_.what = "embeddings";
  }
  void process(std::size_t, const RecordPtr& batch, Emitter&) override {
    features_.append(*batch, false);
    if (!features_.has_id) throw DataError("embeddings need an 'id' field to match the triplet file's ids");
  }
  void close(Emitter& out) override {
    const IdIndex ids = index_ids(features_.id);
    const TripletScore s = score_triplets(triplets_, ids, features_.view(), spec_);
    if (s.evaluated == 0)
      throw DataError(cat("none of the ", s.total, " triplets in '", path_, "' could be evaluated; e.g. id '",
                          s.first_missing, "' is not among the ", ids.size(), " embeddings"));
    if (s.missing > 0)
      log_warning(name_, s.missing, " of ", s.total, " triplets name ids that never arrived (e.g. '", s.first_missing, "')");
    log_info(name_, "triplet accuracy ", percent(s.accuracy()), "% on ", s.evaluated, " triplets");
    if (!out_.empty()) {
      JsonWriter j;
      j.begin_object().field("triplets", path_).field("distance", distance_name(spec_.kind));
      j.field("accuracy", s.accuracy()).field("evaluated", s.evaluated).field("agree", s.agree);
      j.field("ties", s.ties).field("missing", s.missing).field("total", s.total).end_object();
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
      .param(Param::path("triplets").doc("Wang et al. triplet file, or a CSV query,positive,negative of ids"))
      .param(Param::choice("format", {"auto", "wang", "csv"}).default_value("auto").doc("auto: csv for *.csv, else wang"))
      .param(Param::choice("distance", distance_names()).default_value("euclidean").doc("measure compared"))
      .param(Param::number("gamma").default_value(1.0).min(0).doc("kernel width"))
      .param(Param::path("groups").optional().doc(
          "CSV following the triplet file row for row; each value of group_column is scored on its own"))
      .param(Param::string("group_column").default_value("half").doc("the groups file's column (e.g. easy / hard)"))
      .param(Param::path("out").optional().doc("write <out>.json"))
      .param(Param::string("name").optional().doc("method name in the metrics record (eval.report's row; default: the node id)"))
      .input("in", "embedding: f32[B,D]", "embeddings with an id field (i64 or str)")
      .output("metrics", "method: str[], accuracy: f64[], triplet_accuracy: f64[], evaluated: i64[]", "one record at end of stream")
      .check([](SchemaContext& c) {
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
