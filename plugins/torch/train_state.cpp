// torch.train's counters, weight average, model selection and checkpoints (train_state.hpp).

#include "train_state.hpp"

#include <cmath>
#include <limits>

#include "catalog.hpp"

namespace embedflow::torchfam {
namespace fs = std::filesystem;

TrainState::TrainState(NodeContext& ctx, Model& model, Loss& loss, std::string spec_text, bool primary)
    : ctx_(ctx), model_(model), loss_(loss), spec_text_(std::move(spec_text)), primary_(primary) {
  const Params& p = ctx.params();
  keep_ = p.integer("keep_checkpoints");
  ema_decay_ = p.number("ema_decay");  // below 1: checked with the schema
  if (!p.string("checkpoint_dir").empty()) checkpoint_dir_ = p.string("checkpoint_dir");
  resolve_resume();
  if (ctx.input_connected(1)) validator_ = std::make_unique<Validator>(ctx, primary_);
  if (!resume_path_.empty()) read_checkpoint_header();
}

void TrainState::resolve_resume() {
  const std::string& resume = ctx_.params().string("resume");
  if (resume == "auto") {
    auto found = newest_readable_checkpoint(checkpoint_dir_, ctx_.id());
    if (!found) log_info(ctx_.id(), "resume: auto found no checkpoint in ", checkpoint_dir_.string(), "; starting fresh");
    else resume_path_ = *found;
  } else if (!resume.empty()) {
    resume_path_ = resume;
    if (!fs::exists(resume_path_)) throw ConfigError(cat("resume: checkpoint '", resume, "' does not exist"));
  }
}

// Step, position and metrics are read when the node opens, so the log files restart from them.
void TrainState::read_checkpoint_header() {
  checkpoint_ = std::make_unique<CheckpointReader>(resume_path_);
  const std::string& what = checkpoint_->what();
  if (checkpoint_->spec() != spec_text_)
    log_warning(ctx_.id(), "resume: the checkpoint's model spec differs from this graph's:\n  checkpoint: ",
                checkpoint_->spec(), "\n  graph:      ", spec_text_);
  progress_ = checkpoint_->progress();
  // The checkpoint's position is how many input batches the run had consumed: this run counts
  // them again from 0 and skips those.
  resume_position_ = progress_.position;
  progress_.position = 0;
  resumed_from_ = progress_.step;
  last_checkpoint_ = progress_.step;
  if (validator_) validator_->restore(checkpoint_->archive(), what);
  log_info(ctx_.id(), "resuming from ", what, " at step ", progress_.step, " (skipping the first ", resume_position_,
           " input batches)");
}

void TrainState::count_step(double loss, std::int64_t samples, double lr) {
  ++progress_.step;
  if (average_) average_->update(progress_.step);
  if (progress_.epoch != progress_.loss_epoch) {
    progress_.loss_epoch = progress_.epoch;
    progress_.epoch_loss_sum = 0;
    progress_.epoch_loss_steps = 0;
  }
  progress_.epoch_loss_sum += loss;
  ++progress_.epoch_loss_steps;
  progress_.window_loss += loss;
  progress_.window_samples += samples;
  ++progress_.window_steps;
  progress_.last_lr = lr;
}

MetricRow TrainState::close_window() {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - window_start_).count();
  MetricRow row{progress_.step, progress_.epoch, progress_.window_loss / static_cast<double>(progress_.window_steps),
                progress_.last_lr, seconds > 0 ? static_cast<double>(progress_.window_samples) / seconds : 0.0};
  progress_.metrics.push_back(row);
  progress_.window_loss = 0;
  progress_.window_samples = 0;
  progress_.window_steps = 0;
  return row;
}

void TrainState::start_window() { window_start_ = std::chrono::steady_clock::now(); }

double TrainState::epoch_loss() const {
  return progress_.epoch_loss_steps > 0 ? progress_.epoch_loss_sum / static_cast<double>(progress_.epoch_loss_steps)
                                        : std::numeric_limits<double>::quiet_NaN();
}

void TrainState::restore(torch::optim::Optimizer& optimizer, GradScaler* scaler) {
  const std::string what = resume_path_.string();
  // A checkpoint written with averaging holds the average as `model` and the weights training
  // goes on from as `live_model`.
  const bool averaged = checkpoint_->has_live_model();
  checkpoint_->read_model(model_);
  if (ema_decay_ > 0) {
    average_ = std::make_unique<WeightAverage>(model_, ema_decay_);
    if (!averaged) log_info(ctx_.id(), "resume: ", what, " was written without ema_decay; the average starts from its weights");
  } else if (averaged) {
    log_warning(ctx_.id(), "resume: ", what, " was written with ema_decay; this run (ema_decay 0) continues without an average");
  }
  if (averaged) checkpoint_->read_live_model(model_);
  checkpoint_->read_loss(loss_, ctx_.params().value("loss").get("type")->as_string());
  checkpoint_->read_optimizer(optimizer);
  torch::serialize::InputArchive loss_state;
  if (checkpoint_->archive().try_read("loss_state", loss_state)) loss_.load_state(read_state(loss_state, what), what);
  restore_scaler(scaler, what);
  checkpoint_->restore_rng();
  checkpoint_.reset();
}

// amp's scale and clean-step count, as GradScaler's state_dict holds them ("scale",
// "_growth_tracker"). A checkpoint without them (written without amp) starts the scale afresh.
void TrainState::restore_scaler(GradScaler* scaler, const std::string& what) {
  torch::serialize::InputArchive archive;
  const bool present = checkpoint_->archive().try_read("grad_scaler", archive);
  if (!scaler) {
    if (present) log_info(ctx_.id(), "resume: ", what, " was written with amp; this run (amp off) trains in full precision");
    return;
  }
  if (!present) {
    log_info(ctx_.id(), "resume: ", what, " was written without amp; the loss scale starts at ", scaler->scale());
    return;
  }
  torch::Tensor scale, tracker;
  if (!archive.try_read("scale", scale) || !archive.try_read("growth_tracker", tracker) || scale.numel() != 1 ||
      tracker.numel() != 1 || scale.scalar_type() != torch::kFloat64 || tracker.scalar_type() != torch::kInt64)
    throw DataError(cat("resume: ", what, ": its grad_scaler entry is not a float64 scale and an int64 growth_tracker"));
  const double s = scale.item<double>();
  const std::int64_t t = tracker.item<std::int64_t>();
  if (!std::isfinite(s) || s <= 0 || t < 0)
    throw DataError(cat("resume: ", what, ": its loss scale ", s, " or growth tracker ", t, " is out of range"));
  scaler->restore(s, t);
}

void TrainState::start_average() {
  if (ema_decay_ > 0 && !average_) average_ = std::make_unique<WeightAverage>(model_, ema_decay_);
}

NamedTensors TrainState::exported_state() { return average_ ? average_->exported(model_) : model_.state(); }

Record TrainState::final_weights() {
  return validator_ && validator_->has_best() ? validator_->best_snapshot(spec_text_)
                                              : make_snapshot(exported_state(), spec_text_, progress_.step, progress_.epoch);
}

Record TrainState::snapshot(bool final) {
  Record r = final ? final_weights() : make_snapshot(exported_state(), spec_text_, progress_.step, progress_.epoch);
  if (!r.find("loss")) r.set("loss", Array::from_vector<double>({1}, {epoch_loss()}));
  if (validator_) validator_->annotate(r);
  r.set("source", Array::strings({ctx_.id()}));
  last_snapshot_ = progress_.step;
  return r;
}

void TrainState::save(torch::optim::Optimizer& optimizer, const GradScaler* scaler,
                      const std::vector<std::int64_t>& input_size, const std::string& name) {
  if (!primary_) {  // the ranks hold equal models: rank 0 writes the checkpoint
    if (name.empty()) last_checkpoint_ = progress_.step;
    return;
  }
  auto t0 = std::chrono::steady_clock::now();
  CheckpointContent c;
  c.spec = spec_text_;
  c.loss_spec = spec_to_text(ctx_.params().value("loss"));
  c.optimizer_spec = spec_to_text(ctx_.params().value("optimizer"));
  c.schedule_spec = spec_to_text(ctx_.params().value("schedule"));
  c.progress = progress_;
  c.model = exported_state();
  c.input_size = input_size;
  c.loss = loss_.parameters();
  if (average_) c.live_model = model_.state();
  c.extra = [this, scaler](torch::serialize::OutputArchive& a) {
    if (validator_) validator_->save(a);
    // The loss's state between steps (a cross-batch memory's queue), so a resume continues it.
    if (NamedTensors state = loss_.state(); !state.empty()) {
      torch::serialize::OutputArchive loss_state;
      write_state(state, loss_state);
      a.write("loss_state", loss_state);
    }
    if (scaler) {
      torch::serialize::OutputArchive scaling;
      scaling.write("scale", torch::tensor(scaler->scale(), torch::kFloat64));
      scaling.write("growth_tracker", torch::tensor(scaler->growth_tracker(), torch::kInt64));
      a.write("grad_scaler", scaling);
    }
  };
  const fs::path file = write_checkpoint(checkpoint_dir_, c, optimizer, keep_, name);
  if (name.empty()) last_checkpoint_ = progress_.step;
  log_debug(ctx_.id(), "checkpoint ", file.string(), " in ",
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), " s");
}

}  // namespace embedflow::torchfam
