// eval.clustering — k-means (k-means++ seeding from the node's seed, `n_init` restarts keeping the
// lowest inertia) on the gallery, or a given assignment read from the field `assignment` names,
// scored two ways: NMI / AMI / ARI / purity of the clusters against the labels, and the
// re-identification report's k-means-then-kNN retrieval baseline: each query is sent to its
// nearest centre and ranks that cluster's gallery items first (by distance); the rest follow,
// also by distance, so mAP stays defined. Writes the same files and `metrics` record as
// eval.retrieval, plus the clustering scores in <out>.json.
//
// Inputs:  query    embedding f32[B,D], label i64[B], optional camera i64[B]
//          gallery  (optional) the same fields; absent = cluster and search the query set itself
// Outputs: metrics  method, cmc, map, ... (one record at end of stream)
//
// With `retrieval: false` only the clustering is scored: the metrics record is {method, nmi, ami,
// ari, purity, inertia}
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
    kmeans_.clusters = static_cast<int>(ctx.params().integer("clusters"));
    clusters_ = kmeans_.clusters;
    kmeans_.max_iterations = static_cast<int>(ctx.params().integer("max_iterations"));
    kmeans_.n_init = static_cast<int>(ctx.params().integer("n_init"));
    if (ctx.params().has("assignment")) assignment_field_ = ctx.params().string("assignment");
    kmeans_.seed = ctx.seed();
    kmeans_.threads = std::max(1, ctx.threads());
    query_.what = "query";
    gallery_.what = "gallery";
    retrieval_ = ctx.params().boolean("retrieval");
  }
  void process(std::size_t port, const RecordPtr& batch, Emitter&) override {
    FeatureSet& set = port == 0 ? query_ : gallery_;
    const std::int64_t before = set.rows();
    set.append(*batch, true, settings_.fields);
    // The assignment travels with the clustered rows: the gallery, or the queries when they are
    // clustered themselves.
    if (!assignment_field_.empty() && (port == 1 || settings_.self_retrieval)) {
      const std::string where = cat(set.what, " batch ", set.batches - 1);
      const Array* a = batch->find(assignment_field_);
      const std::int64_t n = set.rows() - before;
      if (!a) throw ConfigError(cat(where, ": no assignment field '", assignment_field_, "' (fields: ", batch->describe(), ")"));
      if (a->is_string() || a->dtype() == DType::f32 || a->dtype() == DType::f64)
        throw ConfigError(cat(where, ": assignment field '", assignment_field_, "' must hold integers, got ", a->describe()));
      if (a->numel() != n)
        throw ConfigError(cat(where, ": assignment field '", assignment_field_, "' has ", a->numel(), " values for ", n,
                              " rows; row ", before + std::min(a->numel(), n), " has no cluster"));
      for (std::int64_t i = 0; i < n; ++i) assignment_.push_back(a->as_int(i));
    }
  }
  void close(Emitter& out) override {
    const FeatureSet& gallery = checked_gallery(query_, gallery_, settings_.self_retrieval);
    KMeansResult km;
    if (assignment_field_.empty()) {
      km = kmeans(gallery.view(), kmeans_);
    } else {
      // Scores the given clusters: their centres are the means of their rows (for the queries'
      // nearest centre), cluster ids are renumbered 0.. in increasing order.
      std::vector<std::int64_t> ids;
      km.inertia = assignment_inertia(gallery.view(), assignment_, km.centers, ids);
      km.assignment.reserve(assignment_.size());
      for (auto a : assignment_)
        km.assignment.push_back(std::lower_bound(ids.begin(), ids.end(), a) - ids.begin());
      clusters_ = static_cast<int>(ids.size());
    }
    const std::vector<std::int64_t> query_cluster =
        settings_.self_retrieval ? km.assignment : assign_to_centers(query_.view(), km.centers, kmeans_.threads);
    std::vector<std::int64_t> gallery_labels;
    std::vector<std::int64_t> gallery_clusters;
    for (std::size_t i = 0; i < gallery.label.size(); ++i)
      if (gallery.label[i] != settings_.options.junk_label) {
        gallery_labels.push_back(gallery.label[i]);
        gallery_clusters.push_back(km.assignment[i]);
      }
    const double nmi = normalized_mutual_information(gallery_labels, gallery_clusters);
    const double ami = adjusted_mutual_information(gallery_labels, gallery_clusters);
    const double ari = adjusted_rand_index(gallery_labels, gallery_clusters);
    const double pur = purity(gallery_labels, gallery_clusters);
    std::vector<std::int64_t> sizes(static_cast<std::size_t>(clusters_), 0);
    for (auto a : km.assignment) sizes[static_cast<std::size_t>(a)]++;
    const std::string source = assignment_field_.empty() ? cat("k-means k=", clusters_, " (best of ", kmeans_.n_init,
                                                                " restarts, ", km.iterations, " iterations)")
                                                          : cat("assignment '", assignment_field_, "' (", clusters_, " clusters)");
    auto clustering_json = [&](JsonWriter& j) {
      j.key("clustering").begin_object();
      j.field("source", assignment_field_.empty() ? std::string("kmeans") : "field " + assignment_field_);
      j.field("clusters", clusters_).field("inertia", km.inertia);
      if (assignment_field_.empty()) {
        j.field("iterations", km.iterations).field("n_init", kmeans_.n_init).field("best_init", km.best_init);
        j.key("init_inertia").numbers(km.init_inertia);
      }
      j.field("NMI", nmi).field("AMI", ami).field("ARI", ari).field("purity", pur);
      std::vector<double> s(sizes.begin(), sizes.end());
      j.key("sizes").numbers(s);
      j.end_object();
    };
    auto add_scores = [&](Record& m) {
      m.set("nmi", Array::scalar<double>(nmi));
      m.set("ami", Array::scalar<double>(ami));
      m.set("ari", Array::scalar<double>(ari));
      m.set("purity", Array::scalar<double>(pur));
      m.set("inertia", Array::scalar<double>(km.inertia));
    };
    if (!retrieval_) {
      log_info(settings_.name, source, " on ", gallery.rows(), " points: NMI ", nmi, ", AMI ", ami, ", ARI ", ari,
               ", purity ", pur);
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
      add_scores(m);
      out.emit(0, std::move(m));
      return;
    }

    BlockScorer scorer(settings_.spec, query_.view(), gallery.view());
    RetrievalLabels labels = retrieval_labels(query_, gallery);
    labels.query_group = query_cluster.data();
    labels.gallery_group = km.assignment.data();
    const RetrievalResult r = evaluate_retrieval(scorer, labels, settings_.options);
    log_info(settings_.name, source, ": NMI ", nmi, ", AMI ", ami, ", ARI ", ari, ", purity ", pur,
             "; cluster-then-kNN rank-1 ", percent(r.summary.cmc[0]), "%, mAP ", percent(r.summary.map), "%");
    Record m = write_retrieval_outputs(settings_, r, query_, gallery, clustering_json);
    add_scores(m);
    out.emit(0, std::move(m));
  }

 private:
  RetrievalSettings settings_;
  KMeansOptions kmeans_;
  bool retrieval_ = true;
  int clusters_ = 0;
  std::string assignment_field_;           // empty: run k-means
  std::vector<std::int64_t> assignment_;  // the clustered rows' given clusters, in arrival order
  FeatureSet query_, gallery_;
};

}  // namespace

NodeType clustering_type() {
  NodeTypeBuilder b("eval.clustering");
  b.doc("k-means++ (n_init restarts) on the gallery, or a given assignment: NMI/AMI/ARI/purity against labels and the "
        "k-means-then-kNN retrieval baseline.")
      .example("kmeans: {type: eval.clustering, params: {clusters: 2, out: out/kmeans2}}")
      .param(Param::integer("clusters").default_value(8).min(1).doc("k of k-means"))
      .param(Param::integer("max_iterations").default_value(100).min(1).doc("Lloyd iterations at most"))
      .param(Param::integer("n_init").default_value(1).min(1)
                 .doc("k-means restarts from independent k-means++ seedings; the lowest inertia is kept"))
      .param(Param::string("assignment").optional()
                 .doc("score the clusters in this integer field of the clustered rows (the gallery, or the queries "
                      "without one) instead of running k-means; `clusters` is then ignored"))
      .param(Param::boolean("retrieval").default_value(true)
                 .doc("also score the cluster-then-kNN retrieval baseline; false: the metrics record is {method, nmi, ami}"))
      .input("query", "*", "queries: embedding f32[B,D], label i64[B], camera i64[B] optional (names as `fields` says)")
      .optional_input("gallery", "*", "gallery to cluster, the same fields; unconnected = the queries")
      .output("metrics", kMetricsSchema, "one summary record at end of stream");
  add_retrieval_params(b);
  b.check([](SchemaContext& c) {
    check_retrieval_params(c);
    if (c.params().has("assignment")) {
      const std::string field = c.params().string("assignment");
      const bool self = !c.connected("gallery");
      const std::string port = self ? "query" : "gallery";
      const PortSchema& arriving = c.input(port);
      if (!arriving.is_any() && !arriving.find(field))
        c.error(cat("assignment: field '", field, "' does not arrive on input '", port, "' (it carries ", arriving.str(), ")"),
                "assignment");
    }
    if (!c.params().boolean("retrieval"))
      c.set_output("metrics",
                   PortSchema::parse("method: str[], nmi: f64[], ami: f64[], ari: f64[], purity: f64[], inertia: f64[]"));
  });
  return b.create<Clustering>();
}

}  // namespace embedflow::eval
