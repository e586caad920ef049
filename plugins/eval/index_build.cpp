// eval.index_build — builds a faiss nearest-neighbour index over a gallery stream, for
// eval.index_retrieval and eval.index_knn to search instead of scanning the gallery exactly.
// Kinds: flat (exact), ivf (nlist k-means cells, nprobe visited per query), hnsw (a graph of M
// neighbours per node, efConstruction / efSearch breadths) and ivf_pq (IVF over product-quantised
// codes: pq_m sub-quantisers of pq_nbits bits); metric euclidean, cosine or inner_product. Kinds
// with k-means (ivf, ivf_pq) train on a seeded sample of train_size gallery rows.
//
// Inputs:  gallery  embedding f32[B,D], label i64[B], optional id and camera (names as `fields` says)
// Outputs: index    one record at end of stream: index u8[N] (faiss's write_index bytes), metric,
//                   kind, and the gallery's label / id / camera columns
//
// With `path`, also writes the index as faiss's own file (faiss.read_index opens it) and
// <path>.h5 beside it: the gallery's labels and ids, the index's kind, metric and dimension, and
// the index file's size and CRC-32, which loading checks before faiss reads a byte.
//
// Caveats: the whole gallery is held until end of stream; an index of the rows' own bytes (flat,
// ivf, hnsw) costs 4 D bytes per row again, ivf_pq pq_m * pq_nbits / 8. nlist above the gallery
// (or above train_size) is an error naming the parameter; nlist 0 picks about 4 sqrt(rows). An
// hnsw graph built on several threads depends on their timing (faiss inserts rows in parallel);
// --threads 1 builds the same graph every run.
//
//   seed: 1
//   nodes:
//     gallery: {type: io.hdf5_reader, params: {path: data/reid_128.h5, object: gallery, batch_size: 1024}}
//     index:   {type: eval.index_build, params: {kind: ivf, nlist: 64, nprobe: 8, path: out/gallery.faiss}}
//   edges:
//     - gallery.out -> index.gallery
#include "eval_types.hpp"
#include "index_common.hpp"

namespace embedflow::eval {
namespace {

using namespace evalcore;

class IndexBuild final : public Node {
 public:
  void open(NodeContext& ctx) override {
    const Params& p = ctx.params();
    spec_.kind = parse_ann_kind(p.string("kind"));
    spec_.metric = parse_ann_metric(p.string("metric"));
    spec_.nlist = p.integer("nlist");
    spec_.nprobe = p.integer("nprobe");
    spec_.hnsw_m = p.integer("M");
    spec_.ef_construction = p.integer("ef_construction");
    spec_.ef_search = p.integer("ef_search");
    spec_.pq_m = p.integer("pq_m");
    spec_.pq_nbits = p.integer("pq_nbits");
    spec_.train_size = p.integer("train_size");
    spec_.seed = ctx.seed();
    path_ = p.has("path") ? p.string("path") : "";
    fields_ = FieldNames::from(p);
    threads_ = std::max(1, ctx.threads());
    name_ = ctx.id();
    gallery_.what = "gallery";
  }
  void process(std::size_t, const RecordPtr& batch, Emitter&) override { gallery_.append(*batch, true, fields_); }
  void close(Emitter& out) override {
    if (gallery_.rows() == 0) throw DataError("no gallery embeddings arrived before end of stream");
    AnnIndex index = AnnIndex::build(spec_, gallery_.view(), threads_);
    std::vector<std::uint8_t> bytes = index.to_bytes();
    log_info(name_, index.describe(), ": ", index.rows(), " rows of ", index.dim(), " dims, ", bytes.size() >> 10, " KiB");
    if (!path_.empty()) save_index_files(path_, bytes, index, gallery_);
    out.emit(0, index_record(index, std::move(bytes), gallery_));
  }

 private:
  AnnSpec spec_;
  std::string path_, name_;
  FieldNames fields_;
  FeatureSet gallery_;
  int threads_ = 1;
};

}  // namespace

NodeType index_build_type() {
  NodeTypeBuilder b("eval.index_build");
  b.doc("Builds a faiss index (flat, ivf, hnsw, ivf_pq) over a gallery stream for eval.index_retrieval and "
        "eval.index_knn; optionally saves it (faiss's file plus <path>.h5 with the gallery's labels).")
      .example("index: {type: eval.index_build, params: {kind: ivf, nlist: 64, nprobe: 8, path: out/gallery.faiss}}")
      .param(Param::choice("kind", ann_kind_names()).default_value("ivf")
                 .doc("flat: exact; ivf: k-means cells; hnsw: neighbour graph; ivf_pq: cells of product-quantised codes"))
      .param(Param::choice("metric", ann_metric_names()).default_value("euclidean")
                 .doc("ranking measure: squared L2, cosine (rows scaled to unit length) or inner product"))
      .param(Param::integer("nlist").default_value(0).min(0).doc("ivf, ivf_pq: k-means cells (0: about 4 sqrt(gallery rows))"))
      .param(Param::integer("nprobe").default_value(8).min(1).doc("ivf, ivf_pq: cells visited per query (searchers may override)"))
      .param(Param::integer("M").default_value(32).min(2).doc("hnsw: neighbours per graph node"))
      .param(Param::integer("ef_construction").default_value(40).range(1, 1 << 20).doc("hnsw: search breadth while inserting"))
      .param(Param::integer("ef_search").default_value(64).range(1, 1 << 20).doc("hnsw: search breadth per query (searchers may override)"))
      .param(Param::integer("pq_m").default_value(16).min(1).doc("ivf_pq: sub-quantisers; must divide the dimension"))
      .param(Param::integer("pq_nbits").default_value(8).range(1, 16).doc("ivf_pq: bits per sub-quantiser code"))
      .param(Param::integer("train_size").default_value(0).min(0)
                 .doc("gallery rows (a seeded sample) that k-means trains on; 0: up to 256 per centroid"))
      .param(Param::path("path").optional().not_fingerprinted().doc("also write the index here, and <path>.h5 beside it"))
      .input("gallery", "*", "gallery rows: embedding f32[B,D], label i64[B], id and camera optional (names as `fields` says)")
      .output("index", kIndexSchema, "the index and the gallery's labels, one record at end of stream");
  add_fields_param(b);
  b.check([](SchemaContext& c) {
    const DimBindings dims = check_fields(c, {{"gallery", "embedding: f32[B,D], label: i64[B]"}});
    const Params& p = c.params();
    if (p.string("kind") == "ivf_pq")
      if (auto d = dims.find("D"); d != dims.end() && d->second % p.integer("pq_m") != 0)
        c.error(cat("pq_m = ", p.integer("pq_m"), " does not divide the embedding dimension ", d->second), "pq_m");
    if (p.integer("nlist") > 0 && p.integer("nprobe") > p.integer("nlist"))
      c.error(cat("nprobe = ", p.integer("nprobe"), " is larger than nlist = ", p.integer("nlist")), "nprobe");
  });
  return b.create<IndexBuild>();
}

}  // namespace embedflow::eval
