// crowd.cen_score — applies a trained CEN (or a baseline image model) to crowd data, giving what
// the torch-free evaluation nodes of the crowd family consume (docs/crowd.md).
//
// Inputs:  pairs — pair batches (crowd.grid_reader, names: ids, with_members: true for context
//                  variants; or pair_join's pixel batches): a_image, b_image (ids or pixels),
//                  pair_label, worker, members, a_id, b_id, grid when present;
//          annotations — crowd.grid_reader's annotations record(s): worker, grid [N], members [N,S];
//          images — image records or batches (id, and `image_field` for pixel encoders);
//          model — side port: the torch.train snapshot (crowd.cen, crowd.id_table or any model of
//                  the torch family).
// Outputs: pairs — per input batch: a_id, b_id, worker, grid (when present), pair_label and
//                  distance f32[B]: d = ||a ⊙ (x_i - x_j)|| for a CEN, ||m_c ⊙ (x_i - x_j)|| for a
//                  CSN (crowd.csn; c: the pair's submission's attribute in `truth`'s truth.csv, the
//                  mean mask for a submission that used none), ||x_i - x_j|| otherwise;
//          submissions — per annotations record: worker, grid, attributes f32[N,K] (a), and
//                  worker_attributes / context_attributes (a^w, a^g) for the variants that have
//                  them, and spread f32[N,K]: per dimension, the standard deviation of the
//                  grid members' embeddings (id-table image encoders only);
//          embeddings — id, embedding f32[N,K] of the `images` records, or (no images input,
//                  id table) of every id 0..images-1 at the end;
//          workers — at the end: worker i64[W], attributes f32[W,K] = a^w of every worker id.
// Ensembles (`ensemble: M`, M > 1): the side port takes M snapshots (e.g. one per restart, each
//   trainer's `model` port into this one) and applies all of them. `pairs` then carries the mean of
//   the members' distances; `submissions`, `embeddings` and `workers` carry one record per member,
//   tagged `member: i64[N]` (0..M-1 on every row), because attribute dimensions are not comparable across
//   members (each learns its own order); crowd.attribute_retrieval combines them after mapping each
//   member's dimensions to attributes. Members are numbered in the order of their trainers' ids
//   (the snapshots' `source`), not in the order the trainers happen to finish.
// Caveats: records arriving before the snapshot (all M of them) are held until it does; with M = 1
// later snapshots replace the model for the records after them, with M > 1 a further snapshot is
// an error. Serial.
//
//   crowd.cen_score: {model: <- train.model, pairs: <- test.out, annotations: <- test.annotations}
#include <torch/torch.h>

#include <algorithm>
#include <optional>
#include <tuple>

#include <embedflow/rng.hpp>

#include "bridge.hpp"
#include "catalog.hpp"
#include "cen.hpp"
#include "core/truth.hpp"
#include "csn.hpp"
#include "loss.hpp"
#include "crowd_types.hpp"

namespace embedflow::crowd {
using namespace torchfam;
namespace {

enum Port : std::size_t { kPairs = 0, kAnnotations = 1, kImages = 2, kModel = 3 };
enum OutPort : std::size_t { kOutPairs = 0, kOutSubmissions = 1, kOutEmbeddings = 2, kOutWorkers = 3 };

// One trained model of the ensemble (a single one unless `ensemble` > 1).
struct Member {
  RecordPtr snapshot;
  std::unique_ptr<Model> model;
  CenModel* cen = nullptr;
  CsnModel* csn = nullptr;
  std::string what;
  std::int64_t table_rows = 0;
  bool loaded = false;
};

class CenScore final : public Node {
 public:
  void open(NodeContext& ctx) override {
    ctx_ = &ctx;
    threads_ = ctx.params().integer("threads");
    image_field_ = ctx.params().string("image_field");
    ensemble_ = static_cast<std::size_t>(ctx.params().integer("ensemble"));
    if (!ctx.params().string("truth").empty()) truth_ = read_submission_attributes(ctx.params().string("truth"));
  }

  void on_side(std::size_t, const RecordPtr& snapshot, Emitter& out) override {
    set_torch_threads(threads_, ctx_->threads(), ctx_->id());
    if (ensemble_ == 1) {
      members_.clear();
      pending_.clear();
    } else if (members_.size() == ensemble_) {
      throw DataError(cat("ensemble: ", ensemble_, " received snapshot ", ensemble_ + 1, " (step ", snapshot->get("step").as_int(0),
                          "); connect exactly ", ensemble_, " trained models"));
    }
    pending_.push_back(snapshot);
    if (pending_.size() < ensemble_) return;
    // A stable member order: by trainer id (the snapshot's `source`), then by the bytes of the
    // weights, not by which trainer happened to finish first.
    std::vector<std::tuple<std::string, std::uint64_t, RecordPtr>> order;
    for (const RecordPtr& s : pending_) {
      const Array* source = s->find("source");
      const Array& w = s->get("weights");
      order.emplace_back(source ? source->string_at(0) : std::string(),
                         stable_hash(std::string_view(static_cast<const char*>(w.raw()), static_cast<std::size_t>(w.nbytes()))), s);
    }
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
      return std::tie(std::get<0>(a), std::get<1>(a)) < std::tie(std::get<0>(b), std::get<1>(b));
    });
    pending_.clear();
    for (auto& entry : order) members_.push_back(build(std::get<2>(entry)));
    if (ensemble_ > 1) {
      std::string names;
      for (std::size_t i = 0; i < members_.size(); ++i) names += cat(i ? ", " : "", i, ": ", std::get<0>(order[i]).empty() ? members_[i].what : std::get<0>(order[i]));
      log_info(ctx_->id(), "ensemble of ", members_.size(), " models (", names, ")");
    }
    for (const Member& m : members_)
      if ((m.cen != nullptr) != (members_[0].cen != nullptr))
        throw DataError(cat("ensemble members must all be crowd.cen models or all not: ", members_[0].what, " and ", m.what));
    for (auto& [port, r] : waiting_) handle(port, *r, out);
    waiting_.clear();
  }

  void process(std::size_t port, const RecordPtr& r, Emitter& out) override {
    if (members_.empty()) {
      waiting_.emplace_back(port, r);
      return;
    }
    handle(port, *r, out);
  }

  void close(Emitter& out) override {
    if (!pending_.empty())
      throw DataError(cat("ensemble: ", ensemble_, " but the side port `model` ended after ", pending_.size(), " snapshot(s)"));
    if (!waiting_.empty())
      throw DataError(cat(waiting_.size(), " records arrived but no model did: the side port `model` ended without a snapshot"));
    if (members_.empty()) return;
    set_torch_threads(threads_, ctx_->threads(), ctx_->id());
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < members_.size(); ++i) {
      Member& m = members_[i];
      if (ctx_->output_connected(kOutEmbeddings) && !ctx_->input_connected(kImages)) {
        if (!m.cen || !m.cen->has_table())
          throw ConfigError("the embeddings output needs an `images` input unless the model is a crowd.cen with an id table");
        torch::Tensor ids = torch::arange(images_in_table(m), torch::kInt64);
        Record r;
        r.set("id", to_array(ids));
        r.set("embedding", to_array(m.model->embed(ids.to(torch::kFloat32))));
        emit_member(kOutEmbeddings, std::move(r), i, out);
      }
      if (ctx_->output_connected(kOutWorkers) && m.cen && m.cen->uses_worker()) {
        torch::Tensor w = torch::arange(m.cen->workers(), torch::kInt64);
        Record r;
        r.set("worker", to_array(w));
        r.set("attributes", to_array(m.cen->worker_activation(w)));
        emit_member(kOutWorkers, std::move(r), i, out);
      }
    }
  }

 private:
  Member build(const RecordPtr& snapshot) {
    Member m;
    m.snapshot = snapshot;
    m.what = cat("model snapshot of step ", snapshot->get("step").as_int(0));
    m.model = build_model(spec_from_text(snapshot->get("spec").string_at(0)), ctx_->seed(),
                          cat("node '", ctx_->id(), "' model from ", m.what), ctx_->registry());
    m.cen = dynamic_cast<CenModel*>(m.model.get());
    m.csn = dynamic_cast<CsnModel*>(m.model.get());
    if (m.csn && !truth_)
      throw ConfigError(cat("a crowd.csn model (", m.what, ") needs `truth`, gen_crowd's output directory: its distance depends on "
                            "each pair's condition, the attribute in truth.csv"));
    if (m.cen && m.cen->has_table()) load(m, torch::zeros({1}));
    return m;
  }

  // Per-model outputs of an ensemble say which member each row comes from (a column of the
  // record's rows, so the record stays a batch: io.hdf5_writer stores it row by row).
  void emit_member(std::size_t port, Record r, std::size_t member, Emitter& out) const {
    if (ensemble_ > 1) {
      // Rows: workers and submissions by worker, embeddings by embedding (always [N,K], also
      // for a one-image record whose id is a scalar).
      const std::int64_t rows = r.get(port == kOutEmbeddings ? "embedding" : "worker").shape().at(0);
      r.set("member", Array::from_vector<std::int64_t>({rows}, std::vector<std::int64_t>(static_cast<std::size_t>(rows), static_cast<std::int64_t>(member))));
    }
    out.emit(port, std::move(r));
  }

  std::int64_t images_in_table(const Member& m) const {
    return ctx_->params().integer("table_images") > 0 ? ctx_->params().integer("table_images") : m.table_rows;
  }

  static void load(Member& m, const torch::Tensor& sample) {
    if (m.loaded) return;
    torch::NoGradGuard no_grad;
    if (!m.model->prepared()) m.model->prepare(sample.narrow(0, 0, std::min<std::int64_t>(2, sample.size(0))));
    torch::serialize::InputArchive a;
    const Array& w = m.snapshot->get("weights");
    load_archive(a, w.raw(), static_cast<std::size_t>(w.nbytes()), m.what);
    read_model_state(*m.model, a, m.what);
    m.model->set_training(false);
    m.table_rows = 0;
    for (const auto& [name, t] : m.model->state())
      if (name == "image.weight") m.table_rows = t.size(0);
    m.loaded = true;
  }

  // Model input of one role: the image field, or (id tables) the id field.
  static torch::Tensor input(const Member& m, const Record& r, const std::string& image, const std::string& id) {
    if (const Array* a = r.find(image)) return image_input(to_tensor(*a));
    if (const Array* a = r.find(id); a && ((m.cen && m.cen->has_table()) || m.csn)) return to_tensor(*a).to(torch::kFloat32);
    throw DataError(cat("record has no '", image, "'", m.cen && m.cen->has_table() ? cat(" or '", id, "'") : "", ": ", r.describe()));
  }

  static torch::Tensor embed(Member& m, const torch::Tensor& x) {
    load(m, x);
    return m.model->embed(x);
  }

  static CenModel::Attributes attributes(const Member& m, const Record& r) {
    torch::Tensor w, g;
    if (m.cen->uses_worker()) w = to_tensor(r.get("worker"));
    if (m.cen->uses_context()) {
      const Array* a = r.find("members");
      if (!a) throw DataError(cat("variant ", m.cen->variant(), " needs members i64[B,S] (crowd.grid_reader with_members: true): ", r.describe()));
      g = to_tensor(*a);
    }
    return m.cen->attributes(w, g);
  }

  void handle(std::size_t port, const Record& r, Emitter& out) {
    set_torch_threads(threads_, ctx_->threads(), ctx_->id());
    torch::NoGradGuard no_grad;
    try {
      if (port == kPairs) {
        score_pairs(r, out);
      } else {
        for (std::size_t i = 0; i < members_.size(); ++i) {
          if (port == kAnnotations) emit_member(kOutSubmissions, score_submissions(members_[i], r), i, out);
          else emit_member(kOutEmbeddings, embed_images(members_[i], r), i, out);
        }
      }
    } catch (const c10::Error& e) {
      throw DataError(cat("LibTorch failed on ", r.describe(), ": ", e.what_without_backtrace()));
    }
  }

  // An ensemble's distance is the mean of its members' distances.
  void score_pairs(const Record& r, Emitter& out) {
    torch::Tensor sum;
    for (Member& m : members_) {
      torch::Tensor xa = input(m, r, "a_image", "a_id"), xb = input(m, r, "b_image", "b_id");
      const std::int64_t n = xa.size(0);
      torch::Tensor x = embed(m, torch::cat({xa, xb}, 0));
      torch::Tensor xi = x.narrow(0, 0, n), xj = x.narrow(0, n, n);
      torch::Tensor d = m.cen   ? CenModel::weighted_distance(attributes(m, r).a, xi, xj)
                        : m.csn ? CenModel::weighted_distance(m.csn->masks(conditions(r)), xi, xj)
                                : torch::sqrt((xi - xj).pow(2).sum(1) + 1e-12);
      sum = sum.defined() ? sum + d : d;
    }
    Record o;
    for (const char* f : {"a_id", "b_id", "worker", "grid", "pair_label"})
      if (const Array* a = r.find(f)) o.set(f, *a);
    o.set("distance", to_array((sum / static_cast<double>(members_.size())).to(torch::kFloat32)));
    out.emit(kOutPairs, std::move(o));
  }

  // Each pair's condition: its submission's attribute (worker, grid) in truth.csv.
  torch::Tensor conditions(const Record& r) const {
    const Array* w = r.find("worker");
    const Array* g = r.find("grid");
    if (!w || !g) throw DataError(cat("a crowd.csn model needs each pair's worker and grid (its condition): ", r.describe()));
    std::vector<std::int64_t> c(static_cast<std::size_t>(w->numel()));
    for (std::int64_t i = 0; i < w->numel(); ++i) c[static_cast<std::size_t>(i)] = truth_->at(w->as_int(i), g->as_int(i));
    return torch::tensor(c, torch::kInt64);
  }

  static Record score_submissions(Member& m, const Record& r) {
    if (!m.cen) throw DataError(cat("annotations need a crowd.cen model (attribute activations), but the model is ", m.model->owner()));
    Record o;
    o.set("worker", r.get("worker"));
    o.set("grid", r.get("grid"));
    CenModel::Attributes a = attributes(m, r);
    o.set("attributes", to_array(a.a));
    if (a.worker.defined()) o.set("worker_attributes", to_array(a.worker));
    if (a.context.defined()) o.set("context_attributes", to_array(a.context));
    if (m.cen->has_table()) {
      load(m, torch::zeros({1}));
      torch::Tensor g = to_tensor(r.get("members")).to(torch::kInt64);
      torch::Tensor x = m.model->embed(g.flatten().to(torch::kFloat32)).view({g.size(0), g.size(1), -1});
      o.set("spread", to_array(x.std(1, /*unbiased=*/false)));
    }
    return o;
  }

  Record embed_images(Member& m, const Record& r) const {
    torch::Tensor x = input(m, r, image_field_, "id");
    if (x.dim() == 0) x = x.unsqueeze(0);
    Record o;
    if (const Array* id = r.find("id")) o.set("id", *id);
    if (const Array* l = r.find("label")) o.set("label", *l);
    o.set("embedding", to_array(embed(m, x)));
    return o;
  }

  NodeContext* ctx_ = nullptr;
  std::int64_t threads_ = 0;
  std::size_t ensemble_ = 1;
  std::string image_field_;
  std::vector<Member> members_;
  std::vector<RecordPtr> pending_;  // snapshots of an ensemble not yet complete
  std::vector<std::pair<std::size_t, RecordPtr>> waiting_;
  std::optional<SubmissionAttributes> truth_;
};

}  // namespace

NodeType cen_score_type() {
  return NodeTypeBuilder("crowd.cen_score")
      .doc("Applies a trained Context Embedding Network (or a baseline model) to crowd data: pair distances "
           "d = ||a * (x_i - x_j)|| (||x_i - x_j|| for a plain model), per-submission attribute activations a, a^w, "
           "a^g and embedding spreads, image embeddings and every worker's a^w, for crowd.pair_accuracy, "
           "crowd.attribute_retrieval and crowd.dimension_plot.")
      .example("score: {type: crowd.cen_score, params: {threads: 1}}")
      .param(Param::integer("threads").default_value(0).min(0).not_fingerprinted().doc(
          "LibTorch intra-op threads; 0: the graph's --threads"))
      .param(Param::string("image_field").default_value("image").doc("field of the `images` records holding the model input"))
      .param(Param::integer("ensemble").default_value(1).min(1).doc(
          "trained models applied together (their snapshots arrive on `model`): mean distance; per-member "
          "submissions, embeddings and workers tagged `member`"))
      .param(Param::path("truth").default_value("").doc(
          "gen_crowd's output directory, for crowd.csn models: each pair's condition is its submission's attribute in "
          "truth.csv"))
      .param(Param::integer("table_images").default_value(0).min(0).doc(
          "ids embedded at the end when there is no images input (id tables): 0..table_images-1; 0: the whole table"))
      .optional_input("pairs", "*", "pair batches: a_image, b_image (ids or pixels) or a_id, b_id; pair_label; worker, members for CEN variants")
      .optional_input("annotations", "worker: i64[N], grid: i64[N], members: i64[N,S]", "crowd.grid_reader's annotations")
      .optional_input("images", "*", "records with id and the model input (image_field), for the embeddings output")
      .side_input("model", "weights: u8[N], spec: str[1], step: i64[1], epoch: i64[1]", "torch.train's model snapshot")
      .output("pairs", "distance: f32[B], pair_label: f32[B]", "scored pairs")
      .output("submissions", "worker: i64[N], grid: i64[N], attributes: f32[N,K]", "attribute activations per submission")
      .output("embeddings", "id: i64[N], embedding: f32[N,K]", "image embeddings")
      .output("workers", "worker: i64[W], attributes: f32[W,K]", "a^w of every worker id (worker and mixture variants)")
      .create<CenScore>();
}

}  // namespace embedflow::crowd
