// eval.neighbour_average — database-side augmentation (DBA; Arandjelović & Zisserman 2012, Gordo
// et al. 2017), a standard retrieval post-processing that uses no labels: every embedding of the
// set is replaced by the mean of itself and its k nearest neighbours (cosine), so items pull
// towards the dense regions of their own class. Optionally the set's mean is subtracted first
// (gallery centring: cosine then measures directions from the set's centre, not from the origin,
// which matters for non-negative features such as post-ReLU activations).
//
//   x_i <- x_i - mean_j x_j                       (center: true)
//   u_i  = x_i / ||x_i||
//   y_i  = v_i / ||v_i||,  v_i = u_i + sum_{j in kNN_k(i)} u_j   (cosine neighbours, i excluded)
//
// It is transductive: the output of an item depends on the whole set it arrives with, so apply
// it to the gallery being searched (with eval.retrieval's query = gallery leave-one-out
// protocol, the query set), and report the plain numbers beside it.
//
// Inputs:  in   embedding f32[B,D] or f32[D] (+ any other fields, passed through)
// Outputs: out  the same records, in the same batches and order, embedding replaced (f32)
//
// Caveats: holds the whole set until end of stream (N x D floats twice); the kNN search is the
// blocked SGEMM of eval.retrieval (O(N^2 D)).
//
//   seed: 1
//   nodes:
//     query: {type: io.hdf5_reader, params: {path: data/reid_128.h5, object: query, batch_size: 256}}
//     dba:   {type: eval.neighbour_average, params: {k: 5, center: true}}
//     eval:  {type: eval.retrieval, params: {name: "cosine + DBA k=5", distance: cosine, out: out/reid_dba}}
//   edges: [query.out -> dba.in, dba.out -> eval.query]
#include <cmath>

#include <embedflow/features.hpp>

#include "eval_types.hpp"
#include "arena_loop.hpp"
#include "retrieval.hpp"

namespace embedflow::eval {
namespace {

using namespace evalcore;

class NeighbourAverage final : public Node {
 public:
  void open(NodeContext& ctx) override {
    ctx_ = &ctx;
    features_.what = "in";
  }
  void process(std::size_t, const RecordPtr& batch, Emitter&) override {
    const std::int64_t before = features_.rows();
    features_.append(*batch, /*need_label=*/false);
    held_.push_back({batch, features_.rows() - before});
  }
  void close(Emitter& out) override {
    if (held_.empty()) return;
    const Params& p = ctx_->params();
    const std::int64_t n = features_.rows(), d = features_.dim;
    const int k = static_cast<int>(std::min<std::int64_t>(p.integer("k"), n - 1));
    const int threads = std::max(1, ctx_->threads());
    std::vector<float>& x = features_.x;
    if (p.boolean("center")) {
      std::vector<double> mean(static_cast<std::size_t>(d), 0.0);
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j < d; ++j) mean[static_cast<std::size_t>(j)] += x[static_cast<std::size_t>(i * d + j)];
      for (double& m : mean) m /= static_cast<double>(n);
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j < d; ++j) x[static_cast<std::size_t>(i * d + j)] -= static_cast<float>(mean[static_cast<std::size_t>(j)]);
    }
    normalize_rows(x, n, d);
    std::vector<float> y = x;  // k = 0 (or one item): the normalised (centred) embeddings
    if (k > 0) {
      std::vector<std::int64_t> index;
      std::vector<float> score;
      BlockScorer scorer(DistanceSpec{DistanceKind::cosine}, features_.view(), features_.view());
      knn_search(scorer, k, /*exclude_self=*/true, 1024, 4096, threads, index, score);
      arena_for(n, threads, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) {
          float* yi = y.data() + i * d;
          for (int r = 0; r < k; ++r) {
            const std::int64_t j = index[static_cast<std::size_t>(i * k + r)];
            if (j < 0) continue;
            const float* xj = x.data() + j * d;
            for (std::int64_t c = 0; c < d; ++c) yi[c] += xj[c];
          }
        }
      });
      normalize_rows(y, n, d);
    }
    log_info(ctx_->id(), "averaged ", n, " embeddings of ", d, " dims with their ", k, " nearest cosine neighbours",
             p.boolean("center") ? " after centring" : "");
    std::int64_t row = 0;
    for (auto& [rec, rows] : held_) {
      Record r = *rec;
      const Array& e = rec->get("embedding");
      std::vector<float> v(y.begin() + row * d, y.begin() + (row + rows) * d);
      r.set("embedding", Array::from_vector<float>(e.rank() == 2 ? Shape{rows, d} : Shape{d}, std::move(v)));
      row += rows;
      out.emit(0, std::move(r));
    }
    held_.clear();
  }

 private:
  static void normalize_rows(std::vector<float>& x, std::int64_t n, std::int64_t d) {
    for (std::int64_t i = 0; i < n; ++i) {
      float* xi = x.data() + i * d;
      double s = 0;
      for (std::int64_t c = 0; c < d; ++c) s += static_cast<double>(xi[c]) * xi[c];
      // A zero row (e.g. an item equal to the mean) stays zero rather than becoming NaN.
      const float inv = s > 0 ? static_cast<float>(1.0 / std::sqrt(s)) : 0.0f;
      for (std::int64_t c = 0; c < d; ++c) xi[c] *= inv;
    }
  }

  NodeContext* ctx_ = nullptr;
  FeatureSet features_;
  std::vector<std::pair<RecordPtr, std::int64_t>> held_;
};

}  // namespace

NodeType neighbour_average_type() {
  return NodeTypeBuilder("eval.neighbour_average")
      .doc("Database-side augmentation: each embedding becomes the L2-normalised mean of itself and its k nearest "
           "cosine neighbours in the set (optionally after subtracting the set's mean). Transductive, no labels: apply "
           "it to the gallery that is searched and report the plain numbers beside it.")
      .example("dba: {type: eval.neighbour_average, params: {k: 5, center: true}}")
      .param(Param::integer("k").default_value(5).min(0).doc("neighbours averaged with each item (0: only centre and normalise)"))
      .param(Param::boolean("center").default_value(true).doc("subtract the set's mean embedding before normalising"))
      .input("in", "embedding: f32[B,D]", "the whole set (every batch is held until end of stream); other fields pass through")
      .output("out", "embedding: f32[B,D]", "the same records and batches with the averaged, unit-length embeddings")
      .check([](SchemaContext& c) { c.set_output("out", c.input("in")); })
      .create<NeighbourAverage>();
}

}  // namespace embedflow::eval
