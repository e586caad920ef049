// eval.clustering — k-means (k-means++ seeding from the node's seed) on the gallery, scored two
// ways: NMI / AMI of the clusters against the identity labels, and the re-identification
// report's k-means-then-kNN retrieval baseline: each query is sent to its nearest centre and
// ranks that cluster's gallery items first (by distance); the rest follow, also by distance,
// so mAP stays defined. Writes the same files and `metrics` record as eval.retrieval, plus the
// clustering scores in <out>.json.
//
// Inputs:  query    embedding f32[B,D], label i64[B], optional camera i64[B]
//          gallery  (optional) the same fields; absent = cluster and search the query set itself
// Outputs: metrics  method, cmc, map, ... (one record at end of stream)
//
// With `retrieval: false` only the clustering is scored: the metrics record is {method, nmi, ami}
// (eval.report merges it into the row of the same method) and <out>.json holds the clustering
// with each gallery row's cluster in arrival order (`assignment`, so the NMI can be checked).
//
// Caveats: clustering runs at close() on all gallery rows; k-means distances are squared L2
// whatever `distance` is (which only orders items inside and outside the cluster).
//
//   seed: 1
//   nodes:
//     query:   {type: io.hdf5_reader, params: {path: data/reid_128.h5, object: query, batch_size: 256}}
//     gallery: {type: io.hdf5_reader, params: {path: data/reid_128.h5, object: gallery, batch_size: 256}}
//     kmeans:  {type: eval.clustering, params: {clusters: 2, out: out/kmeans2}}
//   edges:
//     - query.out -> kmeans.query
//     - gallery.out -> kmeans.gallery
#include "clustering.hpp"
#include "eval_types.hpp"
#include "retrieval_common.hpp"

namespace embedflow::eval {
namespace {

using namespace evalcore;

class Clustering final : public Node {
 public:
  void open(NodeContext& ctx) override {
    settings_ = RetrievalSettings::from(ctx);
    self_ = !ctx.input_connected(1);
    kmeans_.clusters = static_cast<int>(ctx.params().integer("clusters"));
    kmeans_.max_iterations = static_cast<int>(ctx.params().integer("max_iterations"));
    kmeans_.seed = ctx.seed();
    kmeans_.threads = std::max(1, ctx.threads());
    query_.what = "query";
    gallery_.what = "gallery";
    retrieval_ = ctx.params().boolean("retrieval");
  }
  void process(std::size_t port, const RecordPtr& batch, Emitter&) override {
    (port == 0 ? query_ : gallery_).append(*batch, true);
  }
  void close(Emitter& out) override {
    if (query_.rows() == 0) throw DataError("no query embeddings arrived before end of stream");
    const FeatureSet& gallery = self_ ? query_ : gallery_;
    if (gallery.rows() == 0) throw DataError("no gallery embeddings arrived before end of stream");
    if (gallery.dim != query_.dim)
      throw DataError(cat("query embeddings have ", query_.dim, " dims but gallery embeddings have ", gallery.dim));
    const KMeansResult km = kmeans(gallery.view(), kmeans_);
    const std::vector<std::int64_t> query_cluster =
        self_ ? km.assignment : assign_to_centers(query_.view(), km.centers, kmeans_.threads);
    std::vector<std::int64_t> gallery_labels;
    std::vector<std::int64_t> gallery_clusters;
    for (std::size_t i = 0; i < gallery.label.size(); ++i)
      if (gallery.label[i] != settings_.options.junk_label) {
        gallery_labels.push_back(gallery.label[i]);
        gallery_clusters.push_back(km.assignment[i]);
      }
    const double nmi = normalized_mutual_information(gallery_labels, gallery_clusters);
    const double ami = adjusted_mutual_information(gallery_labels, gallery_clusters);
    std::vector<std::int64_t> sizes(static_cast<std::size_t>(kmeans_.clusters), 0);
    for (auto a : km.assignment) sizes[static_cast<std::size_t>(a)]++;
    auto clustering_json = [&](JsonWriter& j) {
      j.key("clustering").begin_object();
      j.field("clusters", kmeans_.clusters).field("iterations", km.iterations).field("inertia", km.inertia);
      j.field("NMI", nmi).field("AMI", ami);
      std::vector<double> s(sizes.begin(), sizes.end());
      j.key("sizes").numbers(s);
      j.end_object();
    };
    if (!retrieval_) {
      log_info(settings_.name, "k-means k=", kmeans_.clusters, " (", km.iterations, " iterations) on ", gallery.rows(),
               " points: NMI ", nmi, ", AMI ", ami);
      if (!settings_.out.empty()) {
        JsonWriter j;
        j.begin_object().field("method", settings_.name);
        clustering_json(j);
        j.key("assignment").numbers(std::vector<double>(km.assignment.begin(), km.assignment.end()));
        j.end_object();
        write_text_atomic(settings_.out + ".json", j.str() + "\n");
      }
      Record m;
      m.set("method", Array::string_scalar(settings_.name));
      m.set("nmi", Array::scalar<double>(nmi));
      m.set("ami", Array::scalar<double>(ami));
      out.emit(0, std::move(m));
      return;
    }

    settings_.options.exclude_self = self_;
    BlockScorer scorer(settings_.spec, query_.view(), gallery.view());
    RetrievalLabels labels{query_.label.data(), gallery.label.data()};
    if (query_.has_camera && gallery.has_camera) {
      labels.query_camera = query_.camera.data();
      labels.gallery_camera = gallery.camera.data();
    }
    labels.query_group = query_cluster.data();
    labels.gallery_group = km.assignment.data();
    const RetrievalResult r = evaluate_retrieval(scorer, labels, settings_.options);
    log_info(settings_.name, "k-means k=", kmeans_.clusters, " (", km.iterations, " iterations): NMI ", nmi, ", AMI ", ami,
             "; cluster-then-kNN rank-1 ", percent(r.summary.cmc[0]), "%, mAP ", percent(r.summary.map), "%");
    Record m = write_retrieval_outputs(settings_, r, query_, gallery, clustering_json);
    m.set("nmi", Array::scalar<double>(nmi));
    m.set("ami", Array::scalar<double>(ami));
    out.emit(0, std::move(m));
  }

 private:
  RetrievalSettings settings_;
  KMeansOptions kmeans_;
  bool self_ = false, retrieval_ = true;
  FeatureSet query_, gallery_;
};

}  // namespace

NodeType clustering_type() {
  NodeTypeBuilder b("eval.clustering");
  b.doc("k-means++ on the gallery: NMI/AMI against labels and the k-means-then-kNN retrieval baseline.")
      .example("kmeans: {type: eval.clustering, params: {clusters: 2, out: out/kmeans2}}")
      .param(Param::integer("clusters").default_value(8).min(1).doc("k of k-means"))
      .param(Param::integer("max_iterations").default_value(100).min(1).doc("Lloyd iterations at most"))
      .param(Param::boolean("retrieval").default_value(true)
                 .doc("also score the cluster-then-kNN retrieval baseline; false: the metrics record is {method, nmi, ami}"))
      .input("query", "embedding: f32[B,D], label: i64[B]", "queries (camera i64[B] optional)")
      .optional_input("gallery", "embedding: f32[G,D], label: i64[G]", "gallery to cluster; unconnected = the queries")
      .output("metrics", kMetricsSchema, "one summary record at end of stream");
  add_retrieval_params(b);
  b.check([](SchemaContext& c) {
    check_retrieval_params(c);
    if (!c.params().boolean("retrieval")) c.set_output("metrics", PortSchema::parse("method: str[], nmi: f64[], ami: f64[]"));
  });
  return b.create<Clustering>();
}

}  // namespace embedflow::eval
