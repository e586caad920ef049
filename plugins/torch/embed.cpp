// torch.embed — embeds image batches with a trained model.
//
// Inputs:  in — image batches (`field`, default image: f32 [B,C,H,W] or u8 [B,H,W,C]) with
//          optional id and label; model (side port, optional) — snapshots from torch.train.
// Outputs: out — {id: i64[B], label: i64[B] (the `keep` fields present in the input),
//          embedding: f32[B,D]}; with mode every_snapshot also step: i64[B].
// Where the model comes from, in order: the latest snapshot on the side port; else
//   `checkpoint` (a torch.train checkpoint file, or its directory: the newest one); else the
//   `model` parameter alone (e.g. a TorchScript backbone with its own weights). The
//   architecture is rebuilt from the spec the snapshot or checkpoint carries unless `model` is
//   given (needed for models from another family). Context Embedding Network snapshots
//   (crowd.cen, crowd.id_table, crowd.unique) rebuild too: their image encoder embeds the batch,
//   pixels for an encoder, image ids (`field: id`) for an id table.
// Modes: latest — each batch is embedded with the newest model available when it arrives
//   (batches that arrive before the first snapshot wait in memory); final — the input is held
//   and embedded at end of stream with the last snapshot (the trained model even when the
//   trainer emits snapshots along the way); every_snapshot — the input
//   is held and, at end of stream, embedded once per snapshot received (learning curves: an
//   evaluator downstream groups by `step`).
// Autoencoders: `outputs` adds named outputs of the model's forward_all to each record (e.g. a
//   conv_vae's reconstruction f32[B,C,H,W], mu, logvar); `mosaic` writes the first `mosaic_count`
//   images over their reconstructions as a PNG (with every_snapshot: the last snapshot's).
// Export: compose with io.hdf5_writer, which stores id, label and embedding as datasets:
//
//   seed: 1
//   nodes:
//     test:  {type: io.hdf5_reader, params: {path: fashion_test.h5, fields: [id, label, image], batch_size: 256}}
//     embed: {type: torch.embed, params: {checkpoint: out/train/ckpt, threads: 2}}
//     save:  {type: io.hdf5_writer, params: {path: out/embeddings.h5, group: embeddings}}
//   edges: [test.out -> embed.in, embed.out -> save.in]
#include <filesystem>

#include "embedflow/results.hpp"

#include "bridge.hpp"
#include "catalog.hpp"
#include "checkpoint.hpp"
#include "loss.hpp"
#include "model.hpp"
#include "mosaic.hpp"
#include "torch_types.hpp"

namespace embedflow::torchfam {
namespace fs = std::filesystem;
namespace {

// Where weights come from: a checkpoint file or a snapshot record.
struct WeightsSource {
  std::string spec, what;
  std::int64_t step = 0;
  fs::path file;         // checkpoint
  RecordPtr snapshot;    // or snapshot

  std::unique_ptr<torch::serialize::InputArchive> open() const {
    auto a = std::make_unique<torch::serialize::InputArchive>();
    if (snapshot) {
      const Array& w = snapshot->get("weights");
      load_archive(*a, w.raw(), static_cast<std::size_t>(w.nbytes()), what);
    } else {
      load_archive(*a, file, what);
    }
    return a;
  }
};

class Embed final : public Node {
 public:
  void open(NodeContext& ctx) override {
    ctx_ = &ctx;
    const Params& p = ctx.params();
    threads_ = p.integer("threads");
    set_torch_threads(threads_, ctx.threads(), ctx.id());
    field_ = p.string("field");
    keep_ = p.strings("keep");
    every_snapshot_ = p.string("mode") == "every_snapshot";
    final_only_ = p.string("mode") == "final";
    has_model_param_ = p.has("model");
    outputs_ = p.strings("outputs");
    mosaic_ = p.string("mosaic");
    mosaic_count_ = p.integer("mosaic_count");
    mosaic_scale_ = p.integer("mosaic_scale");
    if (!p.string("checkpoint").empty()) {
      fs::path path = p.string("checkpoint");
      if (fs::is_directory(path)) {
        auto all = list_checkpoints(path);
        if (all.empty()) throw ConfigError(cat("checkpoint: no step-*.pt file in ", path.string()));
        path = all.back().second;
      }
      if (!fs::exists(path)) throw ConfigError(cat("checkpoint '", path.string(), "' does not exist"));
      WeightsSource s;
      s.file = path;
      s.what = cat("checkpoint ", path.string());
      auto a = s.open();
      s.spec = read_string(*a, "spec", s.what);
      s.step = read_int(*a, "step", s.what);
      use(std::move(s));
    } else if (has_model_param_) {
      model_ = ctx.component<Model>("model");  // weights from its own `weights` parameter, if any
    }
  }

  void on_side(std::size_t, const RecordPtr& snapshot, Emitter& out) override {
    WeightsSource s;
    s.snapshot = snapshot;
    s.spec = snapshot->get("spec").string_at(0);
    s.step = snapshot->get("step").as_int(0);
    s.what = cat("model snapshot of step ", s.step);
    if (every_snapshot_ || final_only_) {
      if (final_only_) snapshots_.clear();  // only the last snapshot is used
      snapshots_.push_back(std::move(s));
      return;
    }
    use(std::move(s));
    for (auto& r : waiting_) embed_batch(*r, out, false);
    waiting_.clear();
  }

  void process(std::size_t, const RecordPtr& batch, Emitter& out) override {
    if (every_snapshot_ || final_only_) {
      held_.push_back(batch);
      return;
    }
    // With the side port connected and no checkpoint, the trained weights are still to come.
    if (!source_ && (ctx_->input_connected(1) || !model_)) {
      waiting_.push_back(batch);
      return;
    }
    embed_batch(*batch, out, false);
  }

  void close(Emitter& out) override {
    if (every_snapshot_ || final_only_) {
      if (snapshots_.empty() && !held_.empty())
        throw DataError(cat("mode ", every_snapshot_ ? "every_snapshot" : "final",
                            ": the side port `model` ended without a snapshot"));
      for (const auto& s : snapshots_) {
        use(s);
        mosaic_inputs_.clear();  // each snapshot draws its own mosaic; the last one stays
        mosaic_recon_.clear();
        mosaic_written_ = false;
        for (auto& r : held_) embed_batch(*r, out, every_snapshot_);
        write_mosaic();
      }
      return;
    }
    write_mosaic();
    if (!waiting_.empty())
      throw DataError(cat(waiting_.size(), " batches arrived but no model did: the side port `model` ended without a "
                                           "snapshot and no `checkpoint` was given"));
  }

 private:
  // Makes `s` the weights for the next batches (rebuilding the model when its spec changes).
  void use(WeightsSource s) {
    if (!model_ || (!has_model_param_ && s.spec != built_spec_)) {
      if (has_model_param_) {
        model_ = ctx_->component<Model>("model");
      } else {
        // Through the graph's registry: a snapshot may hold any family's model (crowd.cen, say).
        model_ = build_model(spec_from_text(s.spec), ctx_->seed(), cat("node '", ctx_->id(), "' model from ", s.what),
                             ctx_->registry());
        built_spec_ = s.spec;
      }
    }
    source_ = std::make_unique<WeightsSource>(std::move(s));
    loaded_ = false;
  }

  void embed_batch(const Record& batch, Emitter& out, bool tag_step) {
    try {
      embed_batch_or_throw(batch, out, tag_step);
    } catch (const c10::Error& e) {
      const Array* id = batch.find("id");
      throw DataError(cat("LibTorch failed embedding a batch of ", batch.describe(),
                          id && id->numel() > 0 && !id->is_string() ? cat(" (id ", id->as_int(0), "..", id->as_int(id->numel() - 1), ")") : "",
                          ": ", e.what_without_backtrace()));
    }
  }

  void embed_batch_or_throw(const Record& batch, Emitter& out, bool tag_step) {
    set_torch_threads(threads_, ctx_->threads(), ctx_->id());
    const Array* images = batch.find(field_);
    if (!images) throw DataError(cat("batch has no image field '", field_, "': ", batch.describe()));
    torch::NoGradGuard no_grad;
    torch::Tensor x = image_input(to_tensor(*images));
    if (!model_->prepared()) {
      model_->prepare(x.narrow(0, 0, std::min<std::int64_t>(2, x.size(0))));
      model_->to(model_->device());
    }
    if (source_ && !loaded_) {
      auto archive = source_->open();
      read_model_state(*model_, *archive, source_->what);
      loaded_ = true;
    }
    model_->set_training(false);
    const bool want_mosaic = !mosaic_.empty() && !mosaic_written_;
    torch::Tensor e;
    TensorMap outs;
    if (outputs_.empty() && !want_mosaic) {
      e = model_->embed(x.to(model_->device())).to(torch::kFloat32);
    } else {
      outs = model_->forward_all({{"image", x.to(model_->device())}});
      e = outs.at("embedding").to(torch::kFloat32);
    }
    Record r;
    for (const auto& k : keep_)
      if (const Array* a = batch.find(k)) r.set(k, *a);
    r.set("embedding", to_array(e));
    for (const auto& name : outputs_)
      r.set(name, to_array(model_output(outs, name).to(torch::kCPU, torch::kFloat32).contiguous()));
    if (want_mosaic) {
      std::int64_t take = std::min<std::int64_t>(x.size(0), mosaic_count_ - mosaic_rows());
      mosaic_inputs_.push_back(x.narrow(0, 0, take).to(torch::kCPU, torch::kFloat32).contiguous());
      mosaic_recon_.push_back(model_output(outs, "reconstruction").narrow(0, 0, take).to(torch::kCPU, torch::kFloat32).contiguous());
      if (mosaic_rows() >= mosaic_count_) write_mosaic();
    }
    if (tag_step)
      r.set("step", Array::from_vector<std::int64_t>({e.size(0)}, std::vector<std::int64_t>(static_cast<std::size_t>(e.size(0)),
                                                                                            source_ ? source_->step : 0)));
    out.emit(std::move(r));
  }

  torch::Tensor model_output(const TensorMap& outs, const std::string& name) const {
    auto it = outs.find(name);
    if (it != outs.end()) return it->second;
    std::string have;
    for (const auto& [n, t] : outs) have += cat(have.empty() ? "" : ", ", n);
    throw DataError(cat("the model gives no output '", name, "' (it gives: ", have,
                        "; reconstruction comes from torch.conv_ae or torch.conv_vae)"));
  }
  std::int64_t mosaic_rows() const {
    std::int64_t n = 0;
    for (const auto& t : mosaic_inputs_) n += t.size(0);
    return n;
  }
  // Draws the images collected so far (fewer than mosaic_count when the stream was shorter).
  void write_mosaic() {
    if (mosaic_.empty() || mosaic_written_ || mosaic_inputs_.empty()) return;
    torch::Tensor x = torch::cat(mosaic_inputs_, 0), r = torch::cat(mosaic_recon_, 0);
    if (!x.sizes().equals(r.sizes()))
      throw DataError(cat("mosaic: the reconstructions have shape ", r.sizes(), " but the images ", x.sizes()));
    write_reconstruction_mosaic(mosaic_, x.data_ptr<float>(), r.data_ptr<float>(), x.size(0), x.size(1), x.size(2),
                                x.size(3), 8, mosaic_scale_);
    log_info(ctx_->id(), "wrote ", x.size(0), " images and their reconstructions to ", mosaic_);
    publish_figure(*ctx_, {"reconstructions", mosaic_, cat(x.size(0), " images (left) and their reconstructions (right)")});
    mosaic_written_ = true;
  }

  NodeContext* ctx_ = nullptr;
  std::vector<std::string> outputs_;
  std::string mosaic_;
  std::int64_t mosaic_count_ = 0, mosaic_scale_ = 1;
  bool mosaic_written_ = false;
  std::vector<torch::Tensor> mosaic_inputs_, mosaic_recon_;
  std::int64_t threads_ = 0;
  std::string field_, built_spec_;
  std::vector<std::string> keep_;
  bool every_snapshot_ = false, final_only_ = false, has_model_param_ = false, loaded_ = false;
  std::unique_ptr<Model> model_;
  std::unique_ptr<WeightsSource> source_;
  std::vector<WeightsSource> snapshots_;
  std::vector<RecordPtr> held_, waiting_;  // every_snapshot input; batches waiting for a first model
};

}  // namespace

NodeType embed_type() {
  return NodeTypeBuilder("torch.embed")
      .doc("Embeds image batches with a model from a torch.train snapshot (side port), a checkpoint file or a model "
           "spec; passes id and label through. Compose with io.hdf5_writer to export embeddings, ids and labels.")
      .param(Param::path("checkpoint").default_value("").doc(
          "a torch.train checkpoint file, or a checkpoint directory (its newest step-*.pt); empty: none"))
      .param(Param::component("model", "model").optional().doc(
          "the architecture (and, with its `weights`, the weights) instead of the spec carried by the snapshot or "
          "checkpoint"))
      .param(Param::string("field").default_value("image").doc("the image field to embed"))
      .param(Param::strings("keep").default_value(std::vector<std::string>{"id", "label"}).doc(
          "input fields copied to the output when present"))
      .param(Param::choice("mode", {"latest", "final", "every_snapshot"}).default_value("latest").doc(
          "latest: embed each batch with the newest model; final: hold the input and embed it with the last snapshot "
          "(the trained model, when the trainer also emits snapshots during training); every_snapshot: hold the "
          "input and embed it once per "
          "snapshot at end of stream, adding step: i64[B]"))
      .param(Param::strings("outputs").default_value(std::vector<std::string>{}).doc(
          "named model outputs added to each record beside embedding, e.g. [reconstruction, logvar] for torch.conv_vae"))
      .param(Param::path("mosaic").default_value("").doc(
          "PNG path: the first mosaic_count images (rows of 8) above rows of their reconstructions, values clamped to "
          "[0,1]; needs an autoencoder model; empty: none"))
      .param(Param::integer("mosaic_count").default_value(32).min(1).doc("images drawn in the mosaic"))
      .param(Param::integer("mosaic_scale").default_value(2).min(1).doc("each mosaic pixel repeated this many times"))
      .param(Param::integer("threads").default_value(0).min(0).not_fingerprinted().doc(
          "LibTorch intra-op threads; 0: the graph's --threads"))
      .input("in", "*", "image batches, with id and label when present")
      .side_input("model", "weights: u8[N], spec: str[1], step: i64[1], epoch: i64[1]",
                  "model snapshots from torch.train", /*optional=*/true)
      .output("out", "*", "the kept fields and embedding: f32[B,D]")
      .check([](SchemaContext& c) {
        const Params& p = c.params();
        if (!c.connected("model") && p.string("checkpoint").empty() && !p.has("model"))
          c.error("needs a model: connect a torch.train `model` output to the side port `model`, or set `checkpoint` or `model`");
        if (p.string("mode") != "latest" && !c.connected("model"))
          c.error(cat("mode ", p.string("mode"), " needs snapshots on the side port `model`"), "mode");
        const PortSchema& in = c.input("in");
        PortSchema out;
        PortSchema images = PortSchema::any();
        Dim b{Dim::Kind::symbol, -1, "B"};
        if (!in.is_any()) {
          const FieldSchema* img = in.find(p.string("field"));
          if (!img) {
            c.error(cat("the input has no image field '", p.string("field"), "' (input: ", in.str(), ")"), "field");
          } else {
            if (img->shape && !img->shape->empty()) b = img->shape->front();
            FieldSchema as_image = *img;
            as_image.name = "image";
            images = PortSchema();
            images.add(std::move(as_image));
          }
          for (const auto& k : p.strings("keep"))
            if (const FieldSchema* f = in.find(k)) out.add(*f);
        }
        // What the model produces: its own contract when given here, else what the snapshots
        // arriving on the side port carry (torch.train declares its model's).
        PortSchema produces = PortSchema::any();
        if (p.has("model")) {
          produces = c.component("model", {{"in", model_input_schema(images)}}).produces;
        } else if (c.connected("model")) {
          if (const PortSchema* carried = c.input("model").carried("model")) produces = *carried;
        }
        auto with_batch_dim = [&](FieldSchema f) {
          if (f.shape && !f.shape->empty()) f.shape->front() = b;
          return f;
        };
        Dim D = produced_dim(produces);
        if (D.kind != Dim::Kind::fixed) D = Dim{Dim::Kind::symbol, -1, "D"};
        out.add(FieldSchema{"embedding", DType::f32, std::vector<Dim>{b, D}});
        if (p.string("mode") == "every_snapshot") out.add(FieldSchema{"step", DType::i64, std::vector<Dim>{b}});
        for (const auto& name : p.strings("outputs")) {
          const FieldSchema* given = produces.is_any() ? nullptr : produces.find(name);
          if (!produces.is_any() && !given) {
            std::string have;
            for (const auto& f : produces.fields()) have += (have.empty() ? "" : ", ") + f.name;
            c.error(cat("outputs names '", name, "', which the model does not produce (it gives ", have, ")"), "outputs");
          }
          out.add(given ? with_batch_dim(*given) : FieldSchema{name, DType::f32, std::nullopt});
        }
        c.set_output("out", out);
      })
      .example("embed: {type: torch.embed, params: {checkpoint: out/train/ckpt, threads: 2}}")
      .create<Embed>();
}

}  // namespace embedflow::torchfam
