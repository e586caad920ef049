// image.judged_triplets — reads a judged triplet file (Wang-style: query, A, B and a person's
// judgement of which of A and B is more like the query) whose rows name image files by path, or
// by URL through an index file mapping each URL to its downloaded file (`index`, a CSV with
// columns url and path). Each image named gets an id (0, 1, ... in the order the file first
// names it); the images go out once each, for image.decode_by_id to decode (EXIF orientation
// and all), and the triplets go out as ids, for eval.triplet_accuracy's `triplets` port.
//
// Triplet file: a header row; columns query, a, b and optionally judgement, found by header
// name (case-insensitive) or under the file's own names through `columns: {query: q, a: left,
// b: right, judgement: answer}` (fields left out keep their default names). Judgements
// (case-insensitive): A = the query is more like A; B = the query is more like B; both = A and
// B are equally like it; neither = neither is like it. both and neither are undecided: the
// evaluator counts them apart and scores only A and B. Without a judgement column every row is
// A (query, positive, negative, as in Wang et al.'s file).
// Paths: relative image paths are relative to `root`, default the triplet file's folder (or,
// with `index`, the index file's folder).
//
// Outputs: images — id i64[B], path str[B]: each image once, in batches of batch_size;
//          triplets — one record: query, a, b i64[T] (image ids), judgement str[T] (A, B,
//          both, neither), line i64[T] (the row's line in the file).
// Caveats: the whole file is read and checked when the node opens, before anything is emitted:
// a short row, an empty cell, an unknown judgement, a URL the index lacks or an image file
// that is not there stops the run with an error naming the file and line.
//
// Example (Fashion-MNIST images named by URL; needs the eval plugin):
//   nodes:
//     trip:   {type: image.judged_triplets, params: {path: tests/image/data/judged_urls.csv, index: tests/image/data/judged_index.csv}}
//     decode: {type: image.decode_by_id, params: {path_field: path, height: 28, width: 28}}
//     embed:  {type: image.pixel_embedding, params: {height: 7, width: 7}}
//     acc:    {type: eval.triplet_accuracy, params: {out: out/judged_triplets}}
//   edges: [trip.images -> decode.in, decode.out -> embed.in, embed.out -> acc.in, trip.triplets -> acc.triplets]
#include <algorithm>

#include <embedflow/csv.hpp>

#include "core/judged_triplets.hpp"
#include "image_types.hpp"

namespace embedflow::image {
namespace {

constexpr std::size_t kImages = 0, kTriplets = 1;

JudgedTripletOptions options_from(const Params& p) {
  JudgedTripletOptions o;
  o.root = p.string("root");
  o.index = p.string("index");
  if (p.has("columns"))
    for (const auto& [field, name] : p.value("columns").as_map()) o.columns.emplace_back(field, name.as_string());
  return o;
}

class JudgedTriplets final : public Node {
 public:
  void open(NodeContext& ctx) override {
    const Params& p = ctx.params();
    file_ = read_judged_triplets(p.string("path"), options_from(p));
    batch_ = static_cast<std::size_t>(p.integer("batch_size"));
    log_info(ctx.id(), p.string("path"), ": ", file_.triplets.size(), " triplets over ", file_.paths.size(), " images",
             file_.has_judgement
                 ? cat(" (", file_.count(Judgement::a), " A, ", file_.count(Judgement::b), " B, ", file_.count(Judgement::both),
                       " both, ", file_.count(Judgement::neither), " neither)")
                 : std::string(" (no judgement column: each row's A is the closer)"));
    ctx.set_expected_items((file_.paths.size() + batch_ - 1) / batch_ + 1);
  }

  bool produce(Emitter& out) override {
    if (!sent_triplets_) {
      sent_triplets_ = true;
      const auto n = static_cast<std::int64_t>(file_.triplets.size());
      std::vector<std::int64_t> q, a, b, line;
      std::vector<std::string> j;
      for (const JudgedTriplet& t : file_.triplets) {
        q.push_back(t.query), a.push_back(t.a), b.push_back(t.b), line.push_back(t.line);
        j.emplace_back(judgement_name(t.judgement));
      }
      Record r;
      r.set("query", Array::from_vector<std::int64_t>({n}, std::move(q)));
      r.set("a", Array::from_vector<std::int64_t>({n}, std::move(a)));
      r.set("b", Array::from_vector<std::int64_t>({n}, std::move(b)));
      r.set("judgement", Array::strings(std::move(j)));
      r.set("line", Array::from_vector<std::int64_t>({n}, std::move(line)));
      out.emit(kTriplets, std::move(r));
      return true;
    }
    if (next_ >= file_.paths.size()) return false;
    const std::size_t end = std::min(file_.paths.size(), next_ + batch_);
    std::vector<std::int64_t> ids;
    for (std::size_t i = next_; i < end; ++i) ids.push_back(static_cast<std::int64_t>(i));
    const auto n = static_cast<std::int64_t>(ids.size());
    Record r;
    r.set("id", Array::from_vector<std::int64_t>({n}, std::move(ids)));
    r.set("path", Array::strings(std::vector<std::string>(file_.paths.begin() + static_cast<std::ptrdiff_t>(next_),
                                                          file_.paths.begin() + static_cast<std::ptrdiff_t>(end))));
    next_ = end;
    out.emit(kImages, std::move(r));
    return true;
  }

 private:
  JudgedTripletFile file_;
  std::size_t batch_ = 256, next_ = 0;
  bool sent_triplets_ = false;
};

}  // namespace

NodeType judged_triplets_type() {
  return NodeTypeBuilder("image.judged_triplets")
      .deterministic()
      .doc("Reads judged triplets (query, A, B, judgement A / B / both / neither) naming image files by path, or by URL "
           "through a url,path index; emits each image once (id, path) and the triplets as image ids.")
      .example(
          "nodes:\n"
          "  trip:   {type: image.judged_triplets, params: {path: tests/image/data/judged_urls.csv, index: tests/image/data/judged_index.csv}}\n"
          "  decode: {type: image.decode_by_id, params: {path_field: path, height: 28, width: 28}}\n"
          "  embed:  {type: image.pixel_embedding, params: {height: 7, width: 7}}\n"
          "  acc:    {type: eval.triplet_accuracy, params: {out: out/judged_triplets}}\n"
          "edges: [trip.images -> decode.in, decode.out -> embed.in, embed.out -> acc.in, trip.triplets -> acc.triplets]\n")
      .source()
      .param(Param::path("path").doc("triplet CSV with a header row: query, a, b and optionally judgement (see columns)"))
      .param(Param::path("index").default_value("")
                 .doc("CSV with columns url and path: the triplet file's cells are URLs, each read from the file the "
                      "index maps it to; empty: the cells are paths"))
      .param(Param::path("root").default_value("")
                 .doc("prefix for relative image paths; empty: the triplet file's folder (with index: the index file's folder)"))
      .param(Param::any("columns").optional()
                 .doc("the file's header names for the fields, e.g. {query: q_url, a: left, b: right, judgement: answer}; "
                      "fields left out keep their default names"))
      .param(Param::integer("batch_size").default_value(256).min(1).doc("images per record on port images"))
      .output("images", "id: i64[B], path: str[B]", "each image once: its id and file, for image.decode_by_id (path_field: path)")
      .output("triplets", "query: i64[T], a: i64[T], b: i64[T], judgement: str[T], line: i64[T]",
              "one record with every triplet as image ids, its judgement (A, B, both, neither) and its line")
      .check([](SchemaContext& c) {
        if (c.params().has("columns")) check_column_map(c, "columns", judged_triplet_fields());
      })
      .create<JudgedTriplets>();
}

}  // namespace embedflow::image
