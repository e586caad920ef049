// eval.retrieval — exact kNN retrieval evaluation: ranks the whole gallery for every query (or
// every item against the others, when `gallery` is not connected) and reports CMC rank-k, mAP
// (non-interpolated and Market-1501 trapezoid), P@1, R-precision, MAP@R and MRR, with bootstrap
// intervals over queries. Writes <out>.json, <out>.md and <out>_cmc.png, and emits one
// `metrics` record for eval.report. With at most 50 query labels (class-style retrieval) the JSON
// (`per_label`) and Markdown also break P@1, R-precision, MAP@R and mAP down by query label.
//
// Inputs:  query    embedding f32[B,D], label i64[B], optional camera i64[B]
//          gallery  (optional) the same fields; absent = self-retrieval, the query itself excluded
// Outputs: metrics  method, cmc, map, ... (one record at end of stream)
//
// Caveats: everything is computed at close(), after both streams ended; memory is the features
// plus one query_block x gallery_block float buffer. Queries with no valid match are counted in
// `no_match` and left out of the means (as torchreid does). Same-identity-same-camera exclusion
// applies only when both streams carry `camera`. Kernels rank as their base distance except
// where exp() underflows in float.
//
//   seed: 1
//   nodes:
//     query:   {type: io.hdf5_reader, params: {path: data/reid_128.h5, object: query, batch_size: 256}}
//     gallery: {type: io.hdf5_reader, params: {path: data/reid_128.h5, object: gallery, batch_size: 256}}
//     eval:    {type: eval.retrieval, params: {distance: cosine, ranks: [1, 10], out: out/reid_cosine}}
//   edges:
//     - query.out -> eval.query
//     - gallery.out -> eval.gallery
#include "eval_types.hpp"
#include "retrieval_common.hpp"

namespace embedflow::eval {
namespace {

using namespace evalcore;

class Retrieval final : public Node {
 public:
  void open(NodeContext& ctx) override {
    settings_ = RetrievalSettings::from(ctx);
    query_.what = "query";
    gallery_.what = "gallery";
  }
  void process(std::size_t port, const RecordPtr& batch, Emitter&) override {
    (port == 0 ? query_ : gallery_).append(*batch, true, settings_.fields);
  }
  void close(Emitter& out) override {
    const FeatureSet& gallery = checked_gallery(query_, gallery_, settings_.self_retrieval);
    BlockScorer scorer(settings_.spec, query_.view(), gallery.view());
    const RetrievalLabels labels = retrieval_labels(query_, gallery);
    const RetrievalResult r = evaluate_retrieval(scorer, labels, settings_.options);
    log_info(settings_.name, query_.rows(), " queries x ", gallery.rows(), " gallery: rank-1 ",
             percent(r.summary.cmc[0]), "%, mAP ", percent(r.summary.map), "%");
    out.emit(0, write_retrieval_outputs(settings_, r, query_, gallery));
  }

 private:
  RetrievalSettings settings_;
  FeatureSet query_, gallery_;
};

}  // namespace

NodeType retrieval_type() {
  NodeTypeBuilder b("eval.retrieval");
  b.doc("Exact kNN retrieval evaluation (CMC, mAP, P@1, R-precision, MAP@R, MRR) with re-id exclusion rules.")
      .example("eval: {type: eval.retrieval, params: {distance: euclidean, ranks: [1, 10], out: out/reid}}")
      .input("query", "*", "queries: embedding f32[B,D], label i64[B], camera i64[B] optional (names as `fields` says)")
      .optional_input("gallery", "*", "gallery, the same fields; unconnected = self-retrieval")
      .output("metrics", kMetricsSchema, "one summary record at end of stream");
  add_retrieval_params(b);
  b.check(check_retrieval_params);
  return b.create<Retrieval>();
}

}  // namespace embedflow::eval
