// eval.index_retrieval — retrieval evaluation through a nearest-neighbour index instead of an
// exact scan of the gallery: the same metrics as eval.retrieval (CMC rank-k, mAP, P@1,
// R-precision, MAP@R, MRR, bootstrap intervals, per-label scores, the same files and `metrics`
// record), from each query's top `depth` list, plus the index's recall@k against exact search
// (k = the largest rank), measured on `recall_queries` evenly spaced queries.
//
// Inputs:  query    embedding f32[B,D], label i64[B], optional camera i64[B] (names as `fields` says)
//          index    (optional) an eval.index_build's record; or set `path` to an index file
//          gallery  (optional) the indexed gallery's rows, in index order: exact scores and recall
//                   for an ivf_pq index, which holds only codes
// Outputs: metrics  eval.retrieval's record plus recall (f64[], NaN when not measured)
//
// How the lists are ranked: by `rescore` (index_common.hpp). By default flat, ivf and hnsw lists
// keep faiss's distances (exact up to float rounding: the rows are stored) and ivf_pq lists are
// rescored with eval.retrieval's double-precision scores when the gallery port brings the rows;
// ties by gallery row. A flat index at depth >= the gallery gives eval.retrieval's numbers
// (exactly with rescore: always; in faiss's order, unless two rows lie within float rounding of
// a query's distance). The index decides which rows are candidates.
//
// Caveats: depth 0 reads max(max_rank, keep_top, the largest gallery label's rows up to 1000) per
// query, which makes CMC, P@1, R-precision and MAP@R those of the full ranking when the index
// finds the neighbours (and labels hold at most 1000 rows); a query's positives past its list add nothing to its AP, so mAP is the mAP at that
// depth (a lower bound), and `truncated_queries` in <out>.json counts the queries concerned.
// exclude_self evaluates the indexed gallery against itself: query i is gallery row i.
//
//   seed: 1
//   nodes:
//     gallery: {type: io.hdf5_reader, params: {path: data/reid_128.h5, object: gallery, batch_size: 1024}}
//     query:   {type: io.hdf5_reader, params: {path: data/reid_128.h5, object: query, batch_size: 256}}
//     index:   {type: eval.index_build, params: {kind: ivf, nlist: 64, nprobe: 8}}
//     eval:    {type: eval.index_retrieval, params: {nprobe: 16, ranks: [1, 10], out: out/reid_ivf}}
//   edges:
//     - gallery.out -> index.gallery
//     - index.index -> eval.index
//     - query.out -> eval.query
#include <algorithm>
#include <limits>
#include <unordered_map>

#include "eval_types.hpp"
#include "index_candidates.hpp"
#include "index_common.hpp"
#include "retrieval_common.hpp"

namespace embedflow::eval {
namespace {

using namespace evalcore;

// depth 0 follows the largest label up to here: lists of queries x depth rows must fit in memory
// (10k queries x 1000 rows: 160 MB).
constexpr std::int64_t kAutoDepthCap = 1000;

class IndexRetrieval final : public Node {
 public:
  void open(NodeContext& ctx) override {
    const Params& p = ctx.params();
    search_.open(ctx);
    s_ = RetrievalSettings::ranking(ctx);
    s_.options.exclude_self = p.boolean("exclude_self");
    depth_ = p.integer("depth");
    query_.what = "query";
    gallery_.what = "gallery";
  }
  void process(std::size_t port, const RecordPtr& batch, Emitter&) override {
    if (port == 0) query_.append(*batch, true, s_.fields);
    else if (port == 1) search_.take_record(batch);
    else gallery_.append(*batch, false, s_.fields);
  }
  void close(Emitter& out) override {
    if (query_.rows() == 0) throw DataError("no query embeddings arrived before end of stream");
    const IndexedGallery g = search_.load(query_.dim, "query embeddings");
    if (s_.options.exclude_self && query_.rows() != g.index.rows())
      throw DataError(cat("exclude_self needs the queries to be the indexed gallery, got ", query_.rows(), " queries and ",
                          g.index.rows(), " indexed rows"));
    set_measure(g.index.metric());
    const bool rescore = search_.rescores(g, gallery_);
    const GalleryRows rows = search_.exact_rows(g, gallery_, rescore || search_.recall_queries() > 0);
    const Candidates c = ranked_candidates(g, rows, rescore);
    const RetrievalLabels labels{query_.label.data(), g.label.data(),
                                 query_.has_camera && !g.camera.empty() ? query_.camera.data() : nullptr,
                                 query_.has_camera && !g.camera.empty() ? g.camera.data() : nullptr};
    const CandidateOutcomes outcomes = outcomes_from_candidates(c, labels, g.index.rows(), s_.options);
    RetrievalResult r;
    r.queries = outcomes.queries;
    r.summary = summarize(r.queries, s_.options);
    keep_top_lists(c, r);
    const std::int64_t k =
        s_.options.ranks.empty() ? 10 : *std::max_element(s_.options.ranks.begin(), s_.options.ranks.end());
    const RecallReport recall = measure_recall(g, rows, query_.view(), k, s_.options.exclude_self, search_);
    log_info(s_.name, query_.rows(), " queries x ", g.index.rows(), " indexed: rank-1 ", percent(r.summary.cmc[0]),
             "%, mAP@", c.depth, " ", percent(r.summary.map), "%");
    if (outcomes.truncated > 0)
      log_info(s_.name, outcomes.truncated, " queries have positives past depth ", c.depth,
               ": their AP counts only those within it");
    publish_recall(s_.node, s_.name, g, recall, search_, rescore, timing_);
    FeatureSet gallery_labels;
    gallery_labels.label = g.label;
    gallery_labels.has_camera = !g.camera.empty();
    Record m = write_retrieval_outputs(s_, r, query_, gallery_labels, [&](JsonWriter& j) {
      write_recall_json(j, g, recall, search_, rescore, timing_);
      j.field("depth", c.depth).field("truncated_queries", outcomes.truncated);
    });
    m.set("recall", Array::scalar<double>(recall.measured ? recall.recall : std::numeric_limits<double>::quiet_NaN()));
    out.emit(0, std::move(m));
  }

 private:
  // The exact path's distance for rescoring and the names in the outputs; an inner product has
  // none (its ranks are the index's).
  void set_measure(AnnMetric metric) {
    s_.spec = exact_spec(metric);
    s_.distance_label = metric == AnnMetric::inner_product ? "inner_product (values negated)" : "";
  }

  // Each query's list from the index, ordered for ranking (see the header).
  Candidates ranked_candidates(const IndexedGallery& g, const GalleryRows& rows, bool rescore) {
    std::int64_t depth = depth_;
    if (depth == 0) {
      std::unordered_map<std::int64_t, std::int64_t> per_label;
      for (auto y : g.label) depth = std::max(depth, ++per_label[y]);
      if (depth > kAutoDepthCap)
        log_info(s_.name, "the largest gallery label has ", depth, " rows; lists stop at ", kAutoDepthCap,
                 " (set depth for more): R-precision and MAP@R of larger labels are those at that depth");
      depth = std::max<std::int64_t>({std::min(depth, kAutoDepthCap), s_.options.max_rank, s_.options.keep_top});
    }
    depth = std::min(g.index.rows(), depth + (s_.options.exclude_self ? 1 : 0));
    const std::int64_t fetch = std::min(g.index.rows(), depth + (rescore ? kRescoreMargin : 0));
    Candidates c = ordered_candidates(g, rows, query_.view(), fetch, search_, rescore, &timing_);
    // The margin only settled the order at the end of the list; the list itself is `depth` long.
    return fetch == depth ? c : first_valid(c, depth, false);
  }

  // keep_top: each query's first valid rows, for <out>_ranklists.csv.
  void keep_top_lists(const Candidates& c, RetrievalResult& r) const {
    if (s_.options.keep_top <= 0) return;
    const Candidates top = first_valid(c, s_.options.keep_top, s_.options.exclude_self);
    r.top_index = top.index;
    r.top_score.assign(top.score.begin(), top.score.end());
  }

  RetrievalSettings s_;
  IndexSearch search_;
  SearchTiming timing_;
  std::int64_t depth_ = 0;
  FeatureSet query_, gallery_;
};

}  // namespace

NodeType index_retrieval_type() {
  NodeTypeBuilder b("eval.index_retrieval");
  b.doc("Retrieval evaluation through a faiss index (eval.index_build's): eval.retrieval's metrics from each query's "
        "top list, and the index's recall@k against exact search.")
      .example("eval: {type: eval.index_retrieval, params: {path: out/gallery.faiss, nprobe: 16, ranks: [1, 10], out: out/reid_ivf}}")
      .input("query", "*", "queries: embedding f32[B,D], label i64[B], camera i64[B] optional (names as `fields` says)")
      .optional_input("index", kIndexSchema, "an eval.index_build's index record (or set path)")
      .optional_input("gallery", "*", "the indexed gallery's rows in index order, for exact scores and recall under ivf_pq")
      .output("metrics", kMetricsSchema, "one summary record at end of stream, with recall");
  add_index_search_params(b);
  b.param(Param::integer("depth").default_value(0).min(0)
              .doc("rows each query's list holds (0: max(max_rank, keep_top, the largest gallery label's rows up to 1000))"))
      .param(Param::boolean("exclude_self").default_value(false).doc("the queries are the indexed gallery: query i skips row i"));
  add_ranking_params(b);
  b.check(check_retrieval_params);
  b.check(check_index_source);
  return b.create<IndexRetrieval>();
}

}  // namespace embedflow::eval
