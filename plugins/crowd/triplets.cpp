// crowd.triplets — triplets from crowd clusterings, for the standard triplet-network baseline on
// the same labels as the CEN: in one submission, anchor and positive share a cluster and the
// negative is in another cluster of the same submission ("A is more like B than C" for that
// worker on that grid).
//
// Inputs:  annotations — crowd.grid_reader's annotations record(s): members, clusters i64[N,S]
//                        (cluster -1: unassigned, never used).
// Outputs: out — triplet batches. names: ids (default) gives anchor_image, positive_image,
//          negative_image: f32[B] holding the image ids (for crowd.id_table) plus anchor_id,
//          positive_id, negative_id i64[B]; names: sampler gives anchor, positive, negative i64[B]
//          (image.triplet_join's input, for pixel models). Each record carries epoch i64[B].
//          With `truth` (gen_crowd's output directory) each triplet also carries condition
//          i64[B], the attribute its submission was clustered by (truth.csv), and submissions
//          that used none (noisy workers, lapses) give no triplets: the Conditional Similarity
//          Network baseline's labelled triplets (crowd.csn_loss).
// Sampling: per submission and epoch, `per_submission` triplets: a uniform anchor among the
// images whose cluster has another member and that have an image outside their cluster, then a
// uniform positive and negative. Submissions with a single cluster give none (logged). All
// triplets of an epoch are emitted in a seeded random order (node seed and epoch).
//
//   nodes:
//     read: {type: crowd.grid_reader, params: {path: tests/crowd/data/tiny.csv, grid_size: 4}}
//     trip: {type: crowd.triplets, params: {per_submission: 2, batch_size: 4}}
//     show: {type: core.sink, params: {mode: print}}
//   edges: [read.annotations -> trip.annotations, trip.out -> show.in]
#include <algorithm>
#include <array>
#include <optional>

#include "core/truth.hpp"
#include "crowd_types.hpp"

namespace embedflow::crowd {
namespace {

class Triplets final : public Node {
 public:
  void open(NodeContext& ctx) override {
    ctx_ = &ctx;
    if (!ctx.params().string("truth").empty()) truth_ = read_submission_attributes(ctx.params().string("truth"));
  }
  void process(std::size_t, const RecordPtr& r, Emitter&) override { anns_.push_back(r); }
  void close(Emitter& out) override {
    const Params& p = ctx_->params();
    const std::int64_t per = p.integer("per_submission"), batch = p.integer("batch_size"), epochs = p.integer("epochs");
    const bool ids = p.string("names") == "ids";
    const bool conditioned = truth_.has_value();
    std::int64_t skipped = 0, unlabelled = 0;
    for (std::int64_t epoch = 0; epoch < epochs; ++epoch) {
      Rng rng(derive_seed(ctx_->seed(), static_cast<std::uint64_t>(epoch)));
      std::vector<std::array<std::int64_t, 4>> t;  // anchor, positive, negative, condition
      for (const RecordPtr& r : anns_) {
        const Array& m = r->get("members");
        const Array& c = r->get("clusters");
        if (m.rank() != 2 || c.shape() != m.shape()) throw DataError(cat("members and clusters must be [N,S]: ", r->describe()));
        const std::int64_t n = m.shape()[0], s = m.shape()[1];
        for (std::int64_t i = 0; i < n; ++i) {
          const std::int64_t condition = conditioned ? truth_->at(r->get("worker").as_int(i), r->get("grid").as_int(i)) : -1;
          if (conditioned && condition < 0) {
            unlabelled += epoch == 0;
            continue;
          }
          std::vector<std::int64_t> anchors;
          for (std::int64_t a = 0; a < s; ++a) {
            const std::int64_t ca = c.as_int(i * s + a);
            if (ca < 0) continue;
            bool pos = false, neg = false;
            for (std::int64_t b = 0; b < s; ++b) {
              const std::int64_t cb = c.as_int(i * s + b);
              if (b == a || cb < 0) continue;
              (cb == ca ? pos : neg) = true;
            }
            if (pos && neg) anchors.push_back(a);
          }
          if (anchors.empty()) {
            skipped += epoch == 0;
            continue;
          }
          for (std::int64_t k = 0; k < per; ++k) {
            const std::int64_t a = anchors[rng() % anchors.size()], ca = c.as_int(i * s + a);
            std::vector<std::int64_t> ps, ns;
            for (std::int64_t b = 0; b < s; ++b) {
              const std::int64_t cb = c.as_int(i * s + b);
              if (b == a || cb < 0) continue;
              (cb == ca ? ps : ns).push_back(b);
            }
            const std::int64_t positive = m.as_int(i * s + ps[rng() % ps.size()]);
            t.push_back({m.as_int(i * s + a), positive, m.as_int(i * s + ns[rng() % ns.size()]), condition});
          }
        }
      }
      for (std::size_t i = t.size(); i > 1; --i) std::swap(t[i - 1], t[rng() % i]);
      for (std::size_t at = 0; at < t.size(); at += static_cast<std::size_t>(batch)) {
        const std::size_t n = std::min(t.size() - at, static_cast<std::size_t>(batch));
        const auto b = static_cast<std::int64_t>(n);
        Record r;
        const char* roles[3] = {"anchor", "positive", "negative"};
        for (int role = 0; role < 3; ++role) {
          std::vector<std::int64_t> v(n);
          std::vector<float> f(n);
          for (std::size_t k = 0; k < n; ++k) v[k] = t[at + k][static_cast<std::size_t>(role)], f[k] = static_cast<float>(v[k]);
          if (ids) {
            r.set(cat(roles[role], "_image"), Array::from_vector<float>({b}, std::move(f)));
            r.set(cat(roles[role], "_id"), Array::from_vector<std::int64_t>({b}, std::move(v)));
          } else {
            r.set(roles[role], Array::from_vector<std::int64_t>({b}, std::move(v)));
          }
        }
        if (conditioned) {
          std::vector<std::int64_t> v(n);
          for (std::size_t k = 0; k < n; ++k) v[k] = t[at + k][3];
          r.set("condition", Array::from_vector<std::int64_t>({b}, std::move(v)));
        }
        r.set("epoch", Array::from_vector<std::int64_t>({b}, std::vector<std::int64_t>(n, epoch)));
        out.emit(0, std::move(r));
      }
      if (epoch == 0)
        log_info(ctx_->id(), t.size(), " triplets per epoch; ", skipped, " submissions with one cluster give none",
                 conditioned ? cat(", ", unlabelled, " that used no attribute (truth.csv) are left out") : std::string());
    }
  }

 private:
  NodeContext* ctx_ = nullptr;
  std::vector<RecordPtr> anns_;
  std::optional<SubmissionAttributes> truth_;
};

}  // namespace

NodeType triplets_type() {
  return NodeTypeBuilder("crowd.triplets")
      .doc("Triplets from crowd clusterings (anchor and positive in one cluster of a submission, negative in another "
           "cluster of it) for a triplet-network baseline: ids in *_image f32 fields (crowd.id_table) or "
           "anchor/positive/negative i64 for image.triplet_join.")
      .example("nodes:\n"
               "  read: {type: crowd.grid_reader, params: {path: tests/crowd/data/tiny.csv, grid_size: 4}}\n"
               "  trip: {type: crowd.triplets, params: {per_submission: 2, batch_size: 4}}\n"
               "  show: {type: core.sink, params: {mode: print}}\n"
               "edges: [read.annotations -> trip.annotations, trip.out -> show.in]\n")
      .param(Param::integer("per_submission").default_value(92).min(1).doc("triplets per submission and epoch (92 = 276/3)"))
      .param(Param::integer("batch_size").default_value(256).min(1).doc("triplets per batch"))
      .param(Param::integer("epochs").default_value(1).min(1).doc("passes; each draws fresh triplets"))
      .param(Param::choice("names", {"ids", "sampler"}).default_value("ids").doc(
          "ids: anchor_image, positive_image, negative_image f32 ids (+ *_id i64); sampler: anchor, positive, negative i64"))
      .param(Param::path("truth").default_value("").doc(
          "gen_crowd's output directory: add each triplet's condition (its submission's attribute in truth.csv) and leave "
          "out submissions that used none; empty: no conditions"))
      .input("annotations", "members: i64[N,S], clusters: i64[N,S]", "crowd.grid_reader's annotations (worker, grid too with `truth`)")
      .output("out", "epoch: i64[B]", "triplet batches")
      .check([](SchemaContext& c) {
        PortSchema out;
        const Dim B{Dim::Kind::symbol, -1, "B"};
        for (const char* role : {"anchor", "positive", "negative"}) {
          if (c.params().string("names") == "ids") {
            out.add(FieldSchema{cat(role, "_image"), DType::f32, std::vector<Dim>{B}});
            out.add(FieldSchema{cat(role, "_id"), DType::i64, std::vector<Dim>{B}});
          } else {
            out.add(FieldSchema{role, DType::i64, std::vector<Dim>{B}});
          }
        }
        if (!c.params().string("truth").empty()) out.add(FieldSchema{"condition", DType::i64, std::vector<Dim>{B}});
        out.add(FieldSchema{"epoch", DType::i64, std::vector<Dim>{B}});
        c.set_output("out", out);
      })
      .create<Triplets>();
}

}  // namespace embedflow::crowd
