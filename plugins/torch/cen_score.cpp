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
//                  distance f32[B]: d = ||a ⊙ (x_i - x_j)|| for a CEN, ||x_i - x_j|| otherwise;
//          submissions — per annotations record: worker, grid, attributes f32[N,K] (a), and
//                  worker_attributes / context_attributes (a^w, a^g) for the variants that have
//                  them, and spread f32[N,K]: per dimension, the standard deviation of the
//                  grid members' embeddings (id-table image encoders only);
//          embeddings — id, embedding f32[N,K] of the `images` records, or (no images input,
//                  id table) of every id 0..images-1 at the end;
//          workers — at the end: worker i64[W], attributes f32[W,K] = a^w of every worker id.
// Caveats: records arriving before the snapshot are held until it does; later snapshots replace
// the model for the records after them. Serial.
//
//   crowd.cen_score: {model: <- train.model, pairs: <- test.out, annotations: <- test.annotations}
#include <torch/torch.h>

#include "bridge.hpp"
#include "catalog.hpp"
#include "cen.hpp"
#include "loss.hpp"
#include "torch_family.hpp"

namespace embedflow::torchfam {
namespace {

enum Port : std::size_t { kPairs = 0, kAnnotations = 1, kImages = 2, kModel = 3 };
enum OutPort : std::size_t { kOutPairs = 0, kOutSubmissions = 1, kOutEmbeddings = 2, kOutWorkers = 3 };

class CenScore final : public Node {
 public:
  void open(NodeContext& ctx) override {
    ctx_ = &ctx;
    threads_ = ctx.params().integer("threads");
    image_field_ = ctx.params().string("image_field");
  }

  void on_side(std::size_t, const RecordPtr& snapshot, Emitter& out) override {
    set_torch_threads(threads_, ctx_->threads(), ctx_->id());
    const std::string spec = snapshot->get("spec").string_at(0);
    const std::int64_t step = snapshot->get("step").as_int(0);
    what_ = cat("model snapshot of step ", step);
    model_ = build_cen_or_model(spec_from_text(spec), ctx_->seed(), cat("node '", ctx_->id(), "' model from ", what_));
    cen_ = dynamic_cast<CenModel*>(model_.get());
    snapshot_ = snapshot;
    loaded_ = false;
    if (cen_ && cen_->has_table()) load(torch::zeros({1}));
    for (auto& [port, r] : waiting_) handle(port, *r, out);
    waiting_.clear();
  }

  void process(std::size_t port, const RecordPtr& r, Emitter& out) override {
    if (!model_) {
      waiting_.emplace_back(port, r);
      return;
    }
    handle(port, *r, out);
  }

  void close(Emitter& out) override {
    if (!waiting_.empty())
      throw DataError(cat(waiting_.size(), " records arrived but no model did: the side port `model` ended without a snapshot"));
    if (!model_) return;
    set_torch_threads(threads_, ctx_->threads(), ctx_->id());
    torch::NoGradGuard no_grad;
    if (ctx_->output_connected(kOutEmbeddings) && !ctx_->input_connected(kImages)) {
      if (!cen_ || !cen_->has_table())
        throw ConfigError("the embeddings output needs an `images` input unless the model is a crowd.cen with an id table");
      torch::Tensor ids = torch::arange(images_in_table(), torch::kInt64);
      Record r;
      r.set("id", to_array(ids));
      r.set("embedding", to_array(model_->embed(ids.to(torch::kFloat32))));
      out.emit(kOutEmbeddings, std::move(r));
    }
    if (ctx_->output_connected(kOutWorkers) && cen_ && cen_->uses_worker()) {
      torch::Tensor w = torch::arange(cen_->workers(), torch::kInt64);
      Record r;
      r.set("worker", to_array(w));
      r.set("attributes", to_array(cen_->worker_activation(w)));
      out.emit(kOutWorkers, std::move(r));
    }
  }

 private:
  std::int64_t images_in_table() const { return ctx_->params().integer("table_images") > 0 ? ctx_->params().integer("table_images") : table_rows_; }

  void load(const torch::Tensor& sample) {
    if (loaded_) return;
    torch::NoGradGuard no_grad;
    if (!model_->prepared()) model_->prepare(sample.narrow(0, 0, std::min<std::int64_t>(2, sample.size(0))));
    torch::serialize::InputArchive a;
    const Array& w = snapshot_->get("weights");
    try {
      a.load_from(static_cast<const char*>(w.raw()), static_cast<std::size_t>(w.nbytes()));
    } catch (const c10::Error& e) {
      throw DataError(cat("cannot read ", what_, ": ", e.msg().substr(0, e.msg().find('\n'))));
    }
    read_model_state(*model_, a, what_);
    model_->set_training(false);
    table_rows_ = 0;
    for (const auto& [name, t] : model_->state())
      if (name == "image.weight") table_rows_ = t.size(0);
    loaded_ = true;
  }

  // Model input of one role: the image field, or (id tables) the id field.
  torch::Tensor input(const Record& r, const std::string& image, const std::string& id) {
    if (const Array* a = r.find(image)) return image_input(to_tensor(*a));
    if (const Array* a = r.find(id); a && cen_ && cen_->has_table()) return to_tensor(*a).to(torch::kFloat32);
    throw DataError(cat("record has no '", image, "'", cen_ && cen_->has_table() ? cat(" or '", id, "'") : "", ": ", r.describe()));
  }

  torch::Tensor embed(const torch::Tensor& x) {
    load(x);
    return model_->embed(x);
  }

  CenModel::Attributes attributes(const Record& r) {
    torch::Tensor w, m;
    if (cen_->uses_worker()) w = to_tensor(r.get("worker"));
    if (cen_->uses_context()) {
      const Array* a = r.find("members");
      if (!a) throw DataError(cat("variant ", cen_->variant(), " needs members i64[B,S] (crowd.grid_reader with_members: true): ", r.describe()));
      m = to_tensor(*a);
    }
    return cen_->attributes(w, m);
  }

  void handle(std::size_t port, const Record& r, Emitter& out) {
    set_torch_threads(threads_, ctx_->threads(), ctx_->id());
    torch::NoGradGuard no_grad;
    try {
      if (port == kPairs) score_pairs(r, out);
      else if (port == kAnnotations) score_submissions(r, out);
      else embed_images(r, out);
    } catch (const c10::Error& e) {
      throw DataError(cat("LibTorch failed on ", r.describe(), ": ", e.what_without_backtrace()));
    }
  }

  void score_pairs(const Record& r, Emitter& out) {
    torch::Tensor xa = input(r, "a_image", "a_id"), xb = input(r, "b_image", "b_id");
    const std::int64_t n = xa.size(0);
    torch::Tensor x = embed(torch::cat({xa, xb}, 0));
    torch::Tensor xi = x.narrow(0, 0, n), xj = x.narrow(0, n, n);
    torch::Tensor d = cen_ ? CenModel::weighted_distance(attributes(r).a, xi, xj) : torch::sqrt((xi - xj).pow(2).sum(1) + 1e-12);
    Record o;
    for (const char* f : {"a_id", "b_id", "worker", "grid", "pair_label"})
      if (const Array* a = r.find(f)) o.set(f, *a);
    o.set("distance", to_array(d.to(torch::kFloat32)));
    out.emit(kOutPairs, std::move(o));
  }

  void score_submissions(const Record& r, Emitter& out) {
    if (!cen_) throw DataError(cat("annotations need a crowd.cen model (attribute activations), but the model is ", model_->owner()));
    Record o;
    o.set("worker", r.get("worker"));
    o.set("grid", r.get("grid"));
    CenModel::Attributes a = attributes(r);
    o.set("attributes", to_array(a.a));
    if (a.worker.defined()) o.set("worker_attributes", to_array(a.worker));
    if (a.context.defined()) o.set("context_attributes", to_array(a.context));
    if (cen_->has_table()) {
      load(torch::zeros({1}));
      torch::Tensor m = to_tensor(r.get("members")).to(torch::kInt64);
      torch::Tensor x = model_->embed(m.flatten().to(torch::kFloat32)).view({m.size(0), m.size(1), -1});
      o.set("spread", to_array(x.std(1, /*unbiased=*/false)));
    }
    out.emit(kOutSubmissions, std::move(o));
  }

  void embed_images(const Record& r, Emitter& out) {
    torch::Tensor x = input(r, image_field_, "id");
    if (x.dim() == 0 || (cen_ && cen_->has_table() && x.dim() == 0)) x = x.unsqueeze(0);
    Record o;
    if (const Array* id = r.find("id")) o.set("id", *id);
    if (const Array* l = r.find("label")) o.set("label", *l);
    o.set("embedding", to_array(embed(x)));
    out.emit(kOutEmbeddings, std::move(o));
  }

  NodeContext* ctx_ = nullptr;
  std::int64_t threads_ = 0, table_rows_ = 0;
  std::string image_field_, what_;
  std::unique_ptr<Model> model_;
  CenModel* cen_ = nullptr;
  RecordPtr snapshot_;
  bool loaded_ = false;
  std::vector<std::pair<std::size_t, RecordPtr>> waiting_;
};

}  // namespace

NodeType cen_score_type() {
  return NodeTypeBuilder("crowd.cen_score")
      .doc("Applies a trained Context Embedding Network (or a baseline model) to crowd data: pair distances "
           "d = ||a * (x_i - x_j)|| (||x_i - x_j|| for a plain model), per-submission attribute activations a, a^w, "
           "a^g and embedding spreads, image embeddings and every worker's a^w, for crowd.pair_accuracy, "
           "crowd.attribute_retrieval and crowd.dimension_plot.")
      .param(Param::integer("threads").default_value(0).min(0).not_fingerprinted().doc(
          "LibTorch intra-op threads; 0: the graph's --threads"))
      .param(Param::string("image_field").default_value("image").doc("field of the `images` records holding the model input"))
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

}  // namespace embedflow::torchfam
