// eval.tsne — a 2-D t-SNE map of a stream's embeddings, for eval.scatter to draw: exact t-SNE as
// scikit-learn's TSNE(method="exact") computes it (core/tsne.hpp: the same affinities, learning
// rate "auto", early exaggeration, momentum and gains schedule, PCA initialisation), so a plot
// here and one from scikit-learn of the same points can be read the same way.
//
// Inputs:  in   embedding f32[B,D] (or the field `field` names), optional label and id [B]
// Outputs: out  one record at end of stream: embedding f32[N,2] (the map), and label / id when
//               every input record had them (scatter colours by label)
//
// Caveats: exact t-SNE costs O(N^2) memory and time per iteration (1000 points, 1000 iterations:
// about 3 s on one core); beyond `max_points` an evenly spaced subset (every k-th point in arrival
// order) is embedded and the log says so. Deterministic for a seed and any --threads (PCA
// initialisation is deterministic; `init: random` draws from the node's seed). A map shows
// neighbourhoods: distances between far clusters and cluster sizes in it mean little.
//
//   seed: 1
//   nodes:
//     emb:  {type: io.hdf5_reader, params: {path: data/embeddings.h5, batch_size: 256}}
//     tsne: {type: eval.tsne, params: {perplexity: 30}}
//     plot: {type: eval.scatter, params: {out: out/tsne.png, title: "embeddings, t-SNE", x_label: "t-SNE 1", y_label: "t-SNE 2"}}
//   edges:
//     - emb.out -> tsne.in
//     - tsne.out -> plot.in
#include <algorithm>
#include <stdexcept>

#include "eval_types.hpp"
#include "tsne.hpp"

namespace embedflow::eval {
namespace {

class Tsne final : public Node {
 public:
  void open(NodeContext& ctx) override {
    const Params& p = ctx.params();
    field_ = p.string("field");
    max_points_ = p.integer("max_points");
    options_.perplexity = p.number("perplexity");
    options_.early_exaggeration = p.number("early_exaggeration");
    options_.learning_rate = p.number("learning_rate");
    options_.iterations = p.integer("iterations");
    options_.iterations_without_progress = p.integer("iterations_without_progress");
    options_.pca_init = p.string("init") == "pca";
    options_.seed = ctx.seed();
    options_.threads = std::max(1, ctx.threads());
  }

  void process(std::size_t, const RecordPtr& rec, Emitter&) override {
    const Array& e = rec->get(field_);
    if ((e.dtype() != DType::f32 && e.dtype() != DType::f64) || e.rank() < 1 || e.rank() > 2)
      throw DataError(cat("field '", field_, "' must be f32/f64[B,D] or [D], got ", e.describe()));
    const std::int64_t n = e.rank() == 2 ? e.dim(0) : 1, d = e.rank() == 2 ? e.dim(1) : e.dim(0);
    if (d_ >= 0 && d != d_)
      throw DataError(cat("field '", field_, "' has ", d, " dims here but ", d_, " in earlier records"));
    d_ = d;
    for (std::int64_t k = 0; k < n * d; ++k) x_.push_back(e.as_double(k));
    for (const char* name : {"label", "id"}) {
      std::vector<std::int64_t>& column = std::string(name) == "label" ? labels_ : ids_;
      const Array* a = rec->find(name);
      if (!a) {
        if (!column.empty()) throw DataError(cat("field '", name, "' is missing here but came with earlier records"));
        continue;
      }
      if (a->numel() != n) throw DataError(cat("field '", name, "' has ", a->numel(), " entries for ", n, " embeddings"));
      if (column.size() != static_cast<std::size_t>(rows_)) throw DataError(cat("field '", name, "' is missing from earlier records"));
      for (std::int64_t i = 0; i < n; ++i) column.push_back(a->as_int(i));
    }
    rows_ += n;
  }

  void close(Emitter& out) override {
    if (rows_ == 0) throw DataError("no embeddings arrived before end of stream");
    const std::int64_t stride = max_points_ > 0 && rows_ > max_points_ ? (rows_ + max_points_ - 1) / max_points_ : 1;
    std::vector<double> x;
    std::vector<std::int64_t> labels, ids;
    for (std::int64_t i = 0; i < rows_; i += stride) {
      x.insert(x.end(), x_.begin() + i * d_, x_.begin() + (i + 1) * d_);
      if (!labels_.empty()) labels.push_back(labels_[i]);
      if (!ids_.empty()) ids.push_back(ids_[i]);
    }
    const std::int64_t n = static_cast<std::int64_t>(x.size()) / d_;
    if (stride > 1) log_info("eval.tsne", "embedding every ", stride, "th point: ", n, " of ", rows_, " (max_points)");
    evalcore::TsneResult r;
    try {
      r = evalcore::tsne(x, n, d_, options_);
    } catch (const std::invalid_argument& e) {
      throw DataError(cat(e.what(), " (parameter perplexity: ", options_.perplexity, ", points: ", n, ")"));
    }
    log_info("eval.tsne", n, " points, KL divergence ", r.kl_divergence, " after ", r.iterations, " iterations (learning rate ",
             r.learning_rate, ")");
    std::vector<float> y(r.embedding.begin(), r.embedding.end());
    Record o;
    o.set("embedding", Array::from_vector<float>({n, 2}, std::move(y)));
    if (!labels.empty()) o.set("label", Array::from_vector<std::int64_t>({n}, std::move(labels)));
    if (!ids.empty()) o.set("id", Array::from_vector<std::int64_t>({n}, std::move(ids)));
    out.emit(0, std::move(o));
  }

 private:
  std::string field_;
  std::int64_t max_points_ = 0, rows_ = 0, d_ = -1;
  evalcore::TsneOptions options_;
  std::vector<double> x_;
  std::vector<std::int64_t> labels_, ids_;
};

}  // namespace

NodeType tsne_type() {
  return NodeTypeBuilder("eval.tsne")
      .doc("2-D t-SNE map of a stream's embeddings (exact, as scikit-learn's TSNE(method='exact')), one record at end "
           "of stream for eval.scatter: embedding f32[N,2] with the inputs' label and id.")
      .example("tsne: {type: eval.tsne, params: {perplexity: 30}}")
      .param(Param::string("field").default_value("embedding").doc("input field holding the points f32/f64[B,D]"))
      .param(Param::number("perplexity").default_value(30.0).min(1.0).doc(
          "effective number of neighbours each point's affinities cover; must be below the number of points"))
      .param(Param::number("early_exaggeration").default_value(12.0).min(1.0).doc(
          "factor on the affinities for the first 250 iterations, so clusters form apart"))
      .param(Param::number("learning_rate").default_value(0.0).min(0.0).doc(
          "gradient step; 0: scikit-learn's 'auto', max(N / early_exaggeration / 4, 50)"))
      .param(Param::integer("iterations").default_value(1000).range(250, 100000).doc(
          "total iterations, the 250 exaggerated ones included (scikit-learn's n_iter)"))
      .param(Param::integer("iterations_without_progress").default_value(300).min(50).doc(
          "stop after this many iterations without a lower KL divergence (checked every 50)"))
      .param(Param::choice("init", {"pca", "random"}).default_value("pca").doc(
          "initial map: the first two principal components scaled to std 1e-4, or N(0, 1e-4^2) from the node's seed"))
      .param(Param::integer("max_points").default_value(2000).min(0).doc(
          "embed at most this many points (every k-th in arrival order); 0: all (O(N^2) memory)"))
      .input("in", "*", "records or batches with the points (field), and optionally label and id")
      .output("out", "embedding: f32[N,2]", "the map, with label and id when the inputs had them")
      .check([](SchemaContext& c) {
        const PortSchema& in = c.input("in");
        if (in.is_any()) {
          c.set_output("out", PortSchema::any());
          return;
        }
        const std::string field = c.params().string("field");
        if (!in.find(field)) c.error(cat("the input has no field '", field, "': ", in.str()), "field");
        PortSchema out = PortSchema::parse("embedding: f32[N,2]");
        for (const char* name : {"label", "id"})
          if (in.find(name)) out.add(FieldSchema{name, DType::i64, std::vector<Dim>{Dim{Dim::Kind::symbol, -1, "N"}}});
        c.set_output("out", out);
      })
      .create<Tsne>();
}

}  // namespace embedflow::eval
