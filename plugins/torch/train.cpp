// torch.train — trains a model component with a loss component on a stream of batches.
//
// Inputs:  in — batches carrying the fields the loss consumes (pair, triplet or image+label
//          fields; docs/torch.md). Images are f32 [B,C,H,W], or u8 [B,H,W,C] scaled by 1/255.
//          validation (optional) — labelled batches for model selection (validation.hpp): with it,
//          both streams are held and training runs at their end; every validate_every steps the
//          selected metric is recorded on the output `validation`, the final snapshot (and
//          best.pt) carries the best evaluation's weights, and `patience` stops training early.
// Outputs: metrics — one record per `log_every` steps: {step, epoch: i64[], loss, lr,
//          samples_per_s: f64[]} (also written to <log_dir>/metrics.csv, metrics.jsonl and the
//          loss curve loss.png);
//          model — a snapshot {weights: u8[N], spec: str[1], step, epoch: i64[1], loss: f64[1],
//          source: str[1]} every `snapshot_every` steps and at the end, for torch.embed's side
//          port. `loss` is the mean training loss over the snapshot's epoch so far and `source`
//          this node's id: what core.keep_best compares and names when it keeps the best of
//          several restarts.
// Behaviour: one optimizer update per batch. epochs > 1 replays the batches of the first pass
//   from memory (in a seeded random order per pass unless shuffle_replay is false): the stream
//   itself is read once. A NaN or infinite loss stops the run with a DataError naming the step
//   and the input batch. Checkpoints (every `checkpoint_every` steps and at the end) hold the
//   model, the optimizer, the step, the position in the input stream, LibTorch's RNG state and
//   the metrics so far; `resume` continues from one exactly: the upstream stream is replayed
//   (sources are deterministic by seed) and the batches already trained on are skipped.
// Weight averaging (ema_decay > 0): an exponential moving average of the model's floating-point
//   state (parameters and batch-norm statistics, as timm's ModelEmaV2) is updated after every
//   step with decay min(ema_decay, (1 + t) / (10 + t)) at step t (TensorFlow's
//   ExponentialMovingAverage with num_updates, so early steps are not dominated by the random
//   initialisation). Training goes on with the live weights; snapshots and the checkpoints'
//   `model` carry the average (so torch.embed and every other reader use it unchanged) and the
//   checkpoints keep the live weights as `live_model` for resuming.
// Data parallel (world_size > 1, distributed.hpp): every rank runs the same graph and so sees the
//   same batches; rank r trains on rows [B r / W, B (r+1) / W) of each, the loss of each slice is
//   weighted by its share of the batch and the gradients are averaged over the ranks before the
//   optimizer step, so W ranks take the same steps as one process on the whole batch (up to float
//   summation order) for losses that average per-sample terms. The gradients are all-reduced in
//   buckets of `bucket_mb` while the backward pass still runs (DistributedDataParallel's reducer:
//   hooks on the gradient accumulators start each bucket's asynchronous all-reduce once its
//   gradients are in), and the step waits for the last bucket before the optimizer update. Losses that mine or pair within a
//   batch (batch-hard, all-pairs) see only the rank's slice, and batch norm normalises with the
//   slice's statistics (its running statistics are rank 0's, broadcast every step), as in
//   PyTorch's DistributedDataParallel. Batches that core.shard split upstream (they carry
//   `unsharded_rows`, the whole batch's row count) are the rank's rows already: they are trained
//   on as they come, and the ranks' rows must add up to the whole batch. The logged loss is the
//   whole batch's. Only rank 0 writes
//   log files and checkpoints; every rank emits snapshots and metrics, so give the other ranks'
//   downstream writers their own paths (e.g. --set out=...) or switch them off.
// Prefetch (prefetch > 0, the default 1): the steps run on a training thread of the node's own,
//   and process() returns as soon as the batch is queued, so the engine's thread makes the next
//   batch (reading, augmenting) while the step runs; process() blocks once `prefetch` batches are
//   ahead of the step in progress. Batches are trained on in arrival order with the same RNG
//   draws, so the losses are those of prefetch 0. The records a step emits (metrics, snapshots)
//   go out when the next batch arrives or at the end. On a machine of few cores, give the graph
//   one engine thread (`embedflow run --threads 1`) and LibTorch the cores (`threads`): the
//   engine thread works while the step's threads compute, and no second oneTBB worker competes
//   with them (docs/torch.md, "Threads and prefetch").
// Export (export: PATH): at the end, the model is written as a TorchScript module whose forward
//   maps f32 [N,C,H,W] images in [0,1] to the embeddings torch.embed computes, with the weights the
//   final snapshot carries (the best evaluation's with validation, the weight average with
//   ema_decay); export_mean/export_std put an input normalisation inside it (export.hpp).
// Parts: one update (optimisation_step.hpp); the counters, weight average, model selection and
//   checkpoints (train_state.hpp); the prefetch thread (step_queue.hpp).
// Caveats: the model's device decides where tensors go; checkpoints restore the CPU RNG only.
//
//   seed: 1
//   nodes:
//     data:  {type: io.hdf5_reader, params: {path: fashion.h5, fields: [image, label], batch_size: 128, shuffle: true}}
//     train: {type: torch.train, params: {model: {type: torch.small_cnn, embedding_dim: 32},
//             loss: {type: torch.batch_hard_triplet, margin: 0.2}, optimizer: {type: torch.adam, lr: 0.001},
//             epochs: 2, log_dir: out/train, checkpoint_dir: out/train/ckpt, checkpoint_every: 100, threads: 2}}
//   edges: [data.out -> train.in]
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <random>

#include "embedflow/progress.hpp"
#include "embedflow/results.hpp"

#include "bridge.hpp"
#include "catalog.hpp"
#include "cpu_allocator.hpp"
#include "export.hpp"
#include "loss.hpp"
#include "metrics_log.hpp"
#include "model.hpp"
#include "optimisation_step.hpp"
#include "schedule.hpp"
#include "step_queue.hpp"
#include "torch_types.hpp"
#include "train_state.hpp"
#include "validation_spec.hpp"

namespace embedflow::torchfam {
namespace fs = std::filesystem;
namespace {

// A model spec in a few words for the log: the type without "torch.", a few telling settings
// (width, embedding size, pretrained weights, frozen, a composite's mode) and its parts in
// brackets: "concat frozen_backbone(resnet18 w16 pretrained, resnet18 w8 64-d)". The whole spec,
// defaults included, is logged at debug level; the run's graph.resolved.yaml holds it as written.
std::string short_model_spec(const Value& spec) {
  if (spec.is_string()) return spec.as_string().rfind("torch.", 0) == 0 ? spec.as_string().substr(6) : spec.as_string();
  if (!spec.is_map()) return spec.str();
  const Value* type = spec.get("type");
  std::string out = type && type->is_string() ? short_model_spec(*type) : std::string("model");
  if (const Value* w = spec.get("width"); w && w->is_integer()) out += cat(" w", w->as_integer());
  if (const Value* d = spec.get("embedding_dim"); d && d->is_integer() && d->as_integer() > 0) out += cat(" ", d->as_integer(), "-d");
  if (const Value* w = spec.get("weights"); w && ((w->is_string() && !w->as_string().empty()) || (w->is_boolean() && w->as_boolean())))
    out += " pretrained";
  if (const Value* f = spec.get("freeze"); f && f->is_boolean() && f->as_boolean()) out += " frozen";
  if (const Value* m = spec.get("mode"); m && m->is_string()) out += " " + m->as_string();
  std::vector<std::string> parts;
  for (const auto& [key, v] : spec.as_map()) {
    if (v.is_map() && v.get("type")) parts.push_back(short_model_spec(v));
    else if (v.is_list())
      for (const auto& item : v.as_list())
        if (item.is_map() && item.get("type")) parts.push_back(short_model_spec(item));
  }
  if (!parts.empty()) {
    out += "(";
    for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
    out += ")";
  }
  return out;
}

// " (ids 17..4242)" for messages, from the first id-like field of the batch.
std::string id_range(const Record& r) {
  for (const char* f : {"id", "a_id", "anchor_id"})
    if (const Array* a = r.find(f); a && !a->is_string() && a->numel() > 0)
      return cat(", ", f, " ", a->as_int(0), "..", a->as_int(a->numel() - 1));
  return "";
}

// A metrics row as the `metrics` output's record.
Record metrics_record(const MetricRow& row) {
  Record r;
  r.set("step", Array::scalar<std::int64_t>(row.step));
  r.set("epoch", Array::scalar<std::int64_t>(row.epoch));
  r.set("loss", Array::scalar<double>(row.loss));
  r.set("lr", Array::scalar<double>(row.lr));
  r.set("samples_per_s", Array::scalar<double>(row.samples_per_s));
  return r;
}

class Train final : public Node {
 public:
  void open(NodeContext& ctx) override {
    ctx_ = &ctx;
    present_curves(ctx);
    const Params& p = ctx.params();
    threads_ = p.integer("threads");
    set_torch_threads(threads_, ctx.threads(), ctx.id());
    // Before the model exists, so its steps' buffers come from the cache whichever thread they run on.
    use_caching_cpu_allocator(std::size_t{1} << 30);
    model_ = ctx.component<Model>("model");
    loss_ = ctx.component<Loss>("loss");
    loss_name_ = p.value("loss").get("type")->as_string();
    step_ = std::make_unique<OptimisationStep>(ctx, *model_, *loss_, loss_name_);
    spec_text_ = spec_to_text(p.value("model"));
    model_spec_ = p.value("model");
    epochs_ = p.integer("epochs");
    shuffle_replay_ = p.boolean("shuffle_replay");
    max_steps_ = p.integer("max_steps");
    log_every_ = p.integer("log_every");
    checkpoint_every_ = p.integer("checkpoint_every");
    snapshot_every_ = p.integer("snapshot_every");
    if (p.integer("prefetch") > 0)
      queue_ = std::make_unique<StepQueue>(p.integer("prefetch"),
                                           [this](const RecordPtr& batch, Emitter& out) { feed(batch, out); });
    export_path_ = p.string("export");
    export_.mean = p.numbers("export_mean");
    export_.std = p.numbers("export_std");
    state_ = std::make_unique<TrainState>(ctx, *model_, *loss_, spec_text_, step_->primary());
    validator_ = state_->validator();
    if (state_->resuming())
      done_ = (max_steps_ > 0 && state_->step() >= max_steps_) || (validator_ && validator_->exhausted());
    if (!p.string("log_dir").empty() && step_->primary()) log_ = std::make_unique<MetricsLog>(p.string("log_dir"), state_->history());
    state_->start_window();
  }

  // The training thread goes first: its steps use every other member.
  ~Train() override { queue_.reset(); }

  void process(std::size_t port, const RecordPtr& batch, Emitter& out) override {
    if (port == 1) return validator_->add(batch);  // validation batches are held for the evaluations
    // With a validation input, training waits in close() for both streams to end, so every
    // evaluation sees the whole validation set whichever stream comes first.
    if (validator_) return held_.push_back(batch);
    if (queue_) return queue_->push(batch, out);
    feed(batch, out);
  }

  void close(Emitter& out) override {
    if (queue_) queue_->finish(out);
    // A run resumed at its end (max_steps reached, patience exhausted) still feeds one batch: it
    // builds the model and restores the checkpoint, whose weights the final snapshot carries.
    for (std::size_t k = 0; k < held_.size() && (!done_ || !model_->prepared()) && !ctx_->stop_requested(); ++k)
      feed(held_[k], out);
    held_.clear();
    replay(out);
    if (!model_->prepared()) {
      log_warning(ctx_->id(), "the input stream was empty: nothing trained, no checkpoint or snapshot written");
      return;
    }
    if (state_->window_open()) flush_metrics(out);
    if (validator_ && validator_->last_step() != state_->step()) evaluate(out);
    if (state_->checkpointing() && !state_->checkpoint_current()) save_checkpoint();
    if (ctx_->output_connected(1) && (validator_ || !state_->snapshot_current())) out.emit(1, state_->snapshot(true));
    if (!export_path_.empty() && step_->primary()) export_model();
    if (log_) log_->plot(state_->history());
    const std::vector<MetricRow>& history = state_->history();
    log_info(ctx_->id(), "trained ", state_->step(), " steps",
             state_->resumed_from() > 0 ? cat(" (resumed at step ", state_->resumed_from(), ")") : "",
             history.empty() ? "" : cat("; last loss ", history.back().loss),
             step_->scaler() ? cat("; amp loss scale ", step_->scaler()->scale(), " (", step_->skipped_steps(), " steps skipped in this run)") : "");
  }

 private:
  // An input batch: trained on unless a resumed run did before its checkpoint, and kept for the
  // replayed passes.
  void feed(const RecordPtr& batch, Emitter& out) {
    const std::int64_t index = state_->next_position();
    try {
      // Even a run resumed at max_steps builds the model: its final snapshot needs it.
      if (!model_->prepared()) setup(*batch);
      if (done_) return ctx_->done_consuming();  // resumed at max_steps
      if (epochs_ > 1) replay_.push_back(batch);
      if (state_->trained_before(index)) return;
      train_step(*batch, 0, index, out);
    } catch (const c10::Error& e) {
      throw DataError(cat("LibTorch failed at step ", state_->step() + 1, " (input batch ", index, id_range(*batch), "): ",
                          e.what_without_backtrace()));
    }
  }

  // Passes 2..epochs over the batches of the first, from memory, each in a seeded random order
  // unless shuffle_replay is false.
  void replay(Emitter& out) {
    for (std::int64_t pass = 1; pass < epochs_ && !done_; ++pass) {
      std::vector<std::size_t> order(replay_.size());
      std::iota(order.begin(), order.end(), 0);
      if (shuffle_replay_) {
        std::mt19937_64 rng(derive_seed(ctx_->seed(), static_cast<std::uint64_t>(pass)));
        std::shuffle(order.begin(), order.end(), rng);
      }
      for (std::size_t k = 0; k < order.size() && !done_; ++k) {
        if (ctx_->stop_requested()) break;
        const std::int64_t index = state_->next_position();
        if (state_->trained_before(index)) continue;
        try {
          train_step(*replay_[order[k]], pass, index, out);
        } catch (const c10::Error& e) {
          throw DataError(cat("LibTorch failed at step ", state_->step() + 1, " (input batch ", index, ", replayed in pass ",
                              pass, id_range(*replay_[order[k]]), "): ", e.what_without_backtrace()));
        }
      }
    }
    replay_.clear();
  }

  // At the first batch: build input-dependent layers, move to the device, make the optimizer
  // and restore a checkpoint when resuming.
  void setup(const Record& first) {
    std::string field;
    for (const auto& f : kImageFields)
      if (first.find(f)) {
        field = f;
        break;
      }
    if (field.empty())
      throw DataError(cat("the first batch has no image field (", loss_name_, " needs one of them; batch: ",
                          first.describe(), ")"));
    torch::Tensor sample = image_input(to_tensor(first.get(field)));
    if (sample.dim() == 4) input_size_ = {sample.size(1), sample.size(2), sample.size(3)};
    // Normalisation values that do not fit the images fail now rather than after training.
    if (!export_path_.empty() && input_size_.size() == 3)
      check_export_normalization(export_.mean, export_.std, input_size_[0], cat("node '", ctx_->id(), "'"));
    step_->build(sample);
    log_info(ctx_->id(), "model: ", step_->trainable_parameters(), " trainable parameters on ", step_->device().str(),
             model_->channels_last() ? ", channels-last" : "", " (", short_model_spec(model_spec_), ")");
    log_debug(ctx_->id(), "model spec: ", spec_text_);
    publish_text(*ctx_, "model", spec_text_);
    if (state_->resuming()) state_->restore(step_->optimizer(), step_->scaler());
    step_->join_ranks();
    // After the ranks joined, so every rank averages from rank 0's initial weights.
    state_->start_average();
    model_->set_training(true);
  }

  void train_step(const Record& batch, std::int64_t pass, std::int64_t index, Emitter& out) {
    set_torch_threads(threads_, ctx_->threads(), ctx_->id());  // OpenMP thread counts are per calling thread
    state_->set_epoch(pass);
    if (const Array* e = batch.find("epoch"); e && !e->is_string() && e->numel() > 0) state_->set_epoch(e->as_int(0));
    const double lr = step_->learning_rate(state_->step(), max_steps_);
    std::int64_t samples = 0;
    const double loss = step_->update(
        batch, index, lr, [&](double value) { check_loss(value, batch, pass, index); }, samples);
    state_->count_step(loss, samples, lr);
    const std::int64_t step = state_->step();
    if (step % log_every_ == 0) flush_metrics(out);
    else report_step({});
    if (validator_ && validator_->due(step)) evaluate(out);  // before the checkpoint, which keeps its result
    if (state_->checkpointing() && checkpoint_every_ > 0 && step % checkpoint_every_ == 0) save_checkpoint();
    if (snapshot_every_ > 0 && step % snapshot_every_ == 0 && ctx_->output_connected(1)) out.emit(1, state_->snapshot(false));
    if (max_steps_ > 0 && step >= max_steps_) {
      done_ = true;
      ctx_->done_consuming();  // the readers and augmenters feeding only this trainer stop
    }
  }

  // A NaN or infinite loss stops the run before the update, naming the step and the batch.
  void check_loss(double value, const Record& batch, std::int64_t pass, std::int64_t index) const {
    if (std::isfinite(value)) return;
    const std::int64_t last_checkpoint = state_->last_checkpoint();
    throw DataError(cat("loss is ", std::isnan(value) ? std::string("NaN") : cat(value), " at step ", state_->step() + 1,
                        " (epoch ", state_->epoch(), ", input batch ", index, pass > 0 ? cat(", replayed in pass ", pass) : "",
                        id_range(batch), ")", last_checkpoint > 0 ? cat("; last checkpoint: step ", last_checkpoint) : ""));
  }

  void flush_metrics(Emitter& out) {
    const MetricRow row = state_->close_window();
    if (log_) log_->append(row);
    report_step({{"loss", row.loss}, {"lr", row.lr}, {"samples_per_s", row.samples_per_s},
                 {"epoch", static_cast<double>(row.epoch)}});
    if (ctx_->output_connected(0)) out.emit(0, metrics_record(row));
    state_->start_window();  // time spent writing metrics is not charged to the next window
  }

  // The progress line shows the step; reports with metrics also go to the run's metrics.jsonl.
  void report_step(std::vector<std::pair<std::string, double>> metrics) {
    ProgressReport p;
    p.done = static_cast<std::uint64_t>(state_->step());
    p.total = max_steps_ > 0 ? static_cast<std::uint64_t>(max_steps_) : 0;
    p.unit = "steps";
    p.metrics = std::move(metrics);
    report_progress(*ctx_, p);
  }

  // The TorchScript module of the weights the final snapshot carries, through the archive
  // torch.embed would read them from.
  void export_model() {
    if (input_size_.size() != 3)
      throw DataError(cat("export: the training images are not [N,C,H,W] batches; nothing to trace"));
    const Record snapshot = state_->final_weights();
    const Array& w = snapshot.get("weights");
    const std::string what = cat("node '", ctx_->id(), "' model of step ", snapshot.get("step").as_int(0));
    torch::serialize::InputArchive archive;
    load_archive(archive, w.raw(), static_cast<std::size_t>(w.nbytes()), what);
    export_.input_size = input_size_;
    export_.step = snapshot.get("step").as_int(0);
    export_.source = cat("torch.train node '", ctx_->id(), "'");
    set_torch_threads(threads_, ctx_->threads(), ctx_->id());
    const std::int64_t dim =
        export_torchscript(spec_text_, archive, what, export_, ctx_->registry(), ctx_->seed(), export_path_);
    log_info(ctx_->id(), "exported the model of step ", export_.step, " as TorchScript to ", export_path_.string(),
             " (embedding_dim ", dim, ")");
  }

  // The report draws the loss and the learning rate from the progress this node reports, one
  // chart each (every trainer of a graph on the same chart).
  static void present_curves(const NodeContext& ctx) {
    publish_chart(ctx, progress_chart("training loss", "step", "loss (mean over the logging window)", "loss"));
    publish_chart(ctx, progress_chart("learning rate", "step", "learning rate", "lr"));
  }

  // An evaluation on the validation set: a new best is kept as best.pt; patience may stop training.
  void evaluate(Emitter& out) {
    set_torch_threads(threads_, ctx_->threads(), ctx_->id());
    if (validator_->evaluate(*model_, *loss_, loss_name_, state_->exported_state(), state_->step(), state_->epoch(),
                             state_->epoch_loss(), out, 2) &&
        state_->checkpointing())
      save_checkpoint("best.pt");
    if (validator_->exhausted() && !done_) log_info(ctx_->id(), validator_->stop_reason());
    done_ = done_ || validator_->exhausted();
  }

  void save_checkpoint(const std::string& name = "") { state_->save(step_->optimizer(), step_->scaler(), input_size_, name); }

  NodeContext* ctx_ = nullptr;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Loss> loss_;
  std::unique_ptr<OptimisationStep> step_;
  std::unique_ptr<TrainState> state_;
  Validator* validator_ = nullptr;      // state_'s; null without a validation input
  std::unique_ptr<StepQueue> queue_;    // null without prefetch: steps run on the engine's thread
  std::string spec_text_, loss_name_;
  Value model_spec_;
  std::int64_t threads_ = 0, epochs_ = 1, max_steps_ = 0, log_every_ = 1, checkpoint_every_ = 0, snapshot_every_ = 0;
  bool shuffle_replay_ = true;
  fs::path export_path_;
  ExportOptions export_;
  std::vector<std::int64_t> input_size_;  // C, H, W of the first batch's images
  std::unique_ptr<MetricsLog> log_;
  std::vector<RecordPtr> replay_;
  std::vector<RecordPtr> held_;           // training batches waiting for the validation stream
  bool done_ = false;
};

// The ranks (world_size, rank, the rendezvous), how they share the loss and the gradients, and
// mixed precision: the parameters docs/distributed.md and docs/torch.md's GPU section describe.
void add_data_parallel_and_precision(NodeTypeBuilder& b) {
  b.param(Param::integer("world_size").default_value(1).min(0).not_fingerprinted().doc(
          "data-parallel ranks over c10d's Gloo process group (each runs this graph and trains on its slice of every "
          "batch); 0: the launcher's, WORLD_SIZE (torchrun) else SLURM_NTASKS (srun), 1 if neither; a value > 1 that "
          "disagrees with them is an error (docs/distributed.md)"))
      .param(Param::integer("rank").default_value(-1).min(-1).not_fingerprinted().doc(
          "this process's rank in [0, world_size); -1: RANK (torchrun) else SLURM_PROCID (srun), 0 if neither"))
      .param(Param::string("rendezvous").default_value("").not_fingerprinted().doc(
          "where the ranks meet: tcp://HOST:PORT, file://PATH (a path every rank sees, not existing yet), or empty: "
          "MASTER_ADDR (else the first host of Slurm's node list, else 127.0.0.1) and MASTER_PORT (29500), torchrun's "
          "agent store when it serves one, as torch.distributed's env:// init"))
      .param(Param::number("rendezvous_timeout").default_value(300.0).min(1.0).not_fingerprinted().doc(
          "seconds to wait for the other ranks (joining and every collective: a silent peer fails the run after it)"))
      .param(Param::boolean("amp").default_value(false).doc(
          "mixed precision: the forward pass and loss under autocast (float16 on CUDA, bfloat16 on the CPU) and "
          "the loss scaled as torch.cuda.amp.GradScaler does (scale 2^16, halved after a step with inf/NaN gradients, "
          "which is skipped, doubled after amp_growth_interval clean steps); checkpoints keep the scale"))
      .param(Param::number("amp_init_scale").default_value(65536.0).min(1e-30).doc(
          "amp: the loss scale of the first step (GradScaler's init_scale)"))
      .param(Param::integer("amp_growth_interval").default_value(2000).min(1).doc(
          "amp: clean steps in a row after which the loss scale doubles (GradScaler's growth_interval)"))
      .param(Param::choice("gather_embeddings", {"auto", "on", "off"}).default_value("auto").doc(
          "data parallel: gather every rank's embeddings and labels (label batches, pair batches) so the loss and its "
          "miner see the global batch, as pytorch-metric-learning's DistributedLossWrapper; auto: on when world_size > 1 "
          "and the batch is of those kinds; off: each rank's loss sees its slice"))
      .param(Param::number("bucket_mb").default_value(25.0).min(0.0).not_fingerprinted().doc(
          "data parallel: gradients are all-reduced in buckets of about this many MiB (the first at most 1 MiB), "
          "each started as soon as the backward pass has produced its gradients, as DistributedDataParallel's "
          "bucket_cap_mb; 0: one all-reduce of every gradient after the backward pass"));
}

}  // namespace

NodeType train_type() {
  auto component = [](const char* type) { return Value::map({{"type", Value::string(type)}}); };
  NodeTypeBuilder b("torch.train");
  b.doc("Trains a model component with a loss component on a stream of batches: optimizer and lr schedule "
           "components, epochs (replayed from memory), gradient clipping, checkpoints with exact resume, a metrics "
           "stream and files, and model snapshots for torch.embed.")
      .param(Param::component("model", "model").doc("the model, e.g. {type: torch.small_cnn, embedding_dim: 64}"))
      .param(Param::component("loss", "loss").doc("the loss, e.g. {type: torch.contrastive, margin: 1.0}"))
      .param(Param::component("optimizer", "optimizer").default_value(component("torch.adam")).doc(
          "torch.sgd, torch.adam or torch.adamw with their lr and weight decay"))
      .param(Param::component("schedule", "schedule").default_value(component("torch.constant")).doc(
          "lr schedule: torch.constant, torch.step, torch.cosine, torch.warmup"))
      .param(Param::integer("epochs").default_value(1).min(1).doc(
          "passes over the input; passes after the first replay the batches held in memory"))
      .param(Param::boolean("shuffle_replay").default_value(true).doc("replayed passes visit the batches in a seeded random order"))
      .param(Param::number("labelled_fraction").default_value(1.0).range(0.0, 1.0).doc(
          "semi-supervised mode: only this fraction of the samples keep their `label` (chosen by a hash of the graph "
          "seed, the node and the sample's id, so the same samples in every epoch); the others get -1 (unknown), "
          "which label-batch losses leave out of every pair. Needs an id field. 1: all labels"))
      .param(Param::integer("max_steps").default_value(0).min(0).doc("stop after this many updates (later batches are ignored); 0: no limit"))
      .param(Param::number("clip_grad_norm").default_value(0.0).min(0.0).doc("clip the global gradient L2 norm to this; 0: off"))
      .param(Param::number("clip_grad_value").default_value(0.0).min(0.0).doc("clip each gradient element to +-this; 0: off"))
      .param(Param::integer("threads").default_value(0).min(0).not_fingerprinted().doc(
          "LibTorch intra-op threads (torch::set_num_threads); 0: the graph's --threads"))
      .param(Param::integer("log_every").default_value(10).min(1).not_fingerprinted().doc(
          "steps per metrics record (its loss is the mean over them)"))
      .param(Param::path("log_dir").default_value("").not_fingerprinted().doc(
          "directory for metrics.csv, metrics.jsonl and loss.png; empty: no files"))
      .param(Param::path("checkpoint_dir").default_value("").not_fingerprinted().doc(
          "directory for checkpoints step-NNNNNNNN.pt (one at the end too); empty: none"))
      .param(Param::integer("checkpoint_every").default_value(0).min(0).not_fingerprinted().doc(
          "steps between checkpoints; 0: only at the end"))
      .param(Param::integer("keep_checkpoints").default_value(3).min(0).not_fingerprinted().doc(
          "newest checkpoints kept; 0: all"))
      .param(Param::string("resume").default_value("").doc(
          "continue from a checkpoint: a file path, or auto (the newest in checkpoint_dir, if any); empty: start fresh"))
      .param(Param::path("export").default_value("").not_fingerprinted().doc(
          "TorchScript file written at the end (e.g. out/model.ts.pt): forward(images f32[N,C,H,W] in [0,1]) gives "
          "the embeddings torch.embed computes from the final snapshot's weights (the best evaluation's with "
          "validation, the average with ema_decay); input size, channel order, mean/std and embedding_dim are in "
          "its extra file embedflow.json and its attributes; empty: none"))
      .param(Param::numbers("export_mean").default_value(std::vector<double>{}).not_fingerprinted().doc(
          "export: per-channel mean the module subtracts before the model (with export_std), when the training "
          "images were normalised upstream; empty: none"))
      .param(Param::numbers("export_std").default_value(std::vector<double>{}).not_fingerprinted().doc(
          "export: per-channel std the module divides by (with export_mean)"))
      .param(Param::integer("prefetch").default_value(1).min(0).not_fingerprinted().doc(
          "batches that may arrive while a step runs: the steps run on a training thread of their own, so the "
          "upstream nodes make the next batches meanwhile (same order, same losses); its records are emitted when "
          "the next batch arrives or at the end. 0: steps run on the engine's thread, one batch at a time"));
  add_data_parallel_and_precision(b);
  b.param(Param::integer("snapshot_every").default_value(0).min(0).doc(
          "steps between model snapshots on the `model` port; 0: only at the end"))
      .param(Param::number("ema_decay").default_value(0.0).range(0.0, 1.0).doc(
          "weight averaging: snapshots and checkpoints carry an exponential moving average of the weights with this "
          "decay (at step t, min(ema_decay, (1+t)/(10+t))), e.g. 0.999; training continues on the live weights; "
          "0: off"))
      .input("in", "*", "batches with the fields the loss consumes")
      .output("metrics", "step: i64[], epoch: i64[], loss: f64[], lr: f64[], samples_per_s: f64[]",
              "one record per log_every steps")
      .output("model", "weights: u8[N], spec: str[1], step: i64[1], epoch: i64[1], loss: f64[1], source: str[1]",
              "model snapshots (a LibTorch archive and the model spec) for torch.embed's side port, with the mean "
              "training loss of their epoch so far and this node's id (core.keep_best keeps the best of restarts)")
      .check([](SchemaContext& c) {
        const Params& p = c.params();
        const PortSchema& in = c.input("in");
        // The model reads the batch's images; the loss reads the batch and the model's outputs.
        // Their contracts report what does not fit at the parameter; snapshots carry what the
        // model produces on to torch.embed and whatever reads its embeddings.
        ComponentContract model = c.component("model", {{"in", model_input_schema(in)}});
        c.component("loss", {{"batch", in}, {"outputs", model.produces}});
        PortSchema snapshots = c.output("model");
        snapshots.set_carried("model", model.produces);
        c.set_output("model", snapshots);
        if (!in.is_any()) {
          for (const auto& f : kImageFields)
            if (const FieldSchema* fs = in.find(f); fs && fs->dtype && *fs->dtype != DType::f32 && *fs->dtype != DType::u8 &&
                                                    *fs->dtype != DType::f64)
              c.error(cat("image field '", f, "' must be f32 [B,C,H,W] or u8 [B,H,W,C], got ", fs->str()));
        }
        if (p.number("ema_decay") >= 1.0)
          c.error(cat("ema_decay must be below 1 (got ", p.number("ema_decay"), "); 0 switches averaging off"), "ema_decay");
        if (p.numbers("export_mean").empty() != p.numbers("export_std").empty())
          c.error("export_mean and export_std go together (give both or neither)", "export_mean");
        if (p.string("resume") == "auto" && p.string("checkpoint_dir").empty())
          c.error("resume: auto looks for checkpoints in checkpoint_dir, which is not set", "resume");
        if (schedule_needs_total(p.value("schedule")) && p.integer("max_steps") == 0)
          c.error("a torch.cosine schedule without `steps` anneals over max_steps, which is 0 (no limit)", "schedule");
      });
  // The validation ports and their check come after `in` (port 0) and the model outputs: the port
  // indices the node uses.
  return with_validation(b)
      .example("train: {type: torch.train, params: {model: {type: torch.small_cnn, embedding_dim: 32}, "
               "loss: {type: torch.batch_hard_triplet}, optimizer: {type: torch.adam, lr: 0.001}, epochs: 2, "
               "log_dir: out/train, checkpoint_dir: out/train/ckpt, checkpoint_every: 100, threads: 2}}")
      .create<Train>();
}

}  // namespace embedflow::torchfam
