// torch.train's state besides the weights and the optimizer's moments (docs/torch.md,
// "Checkpoints and resume"): the counters and metrics a checkpoint carries (TrainProgress), the
// weight average (ema_decay), model selection on the validation input (the Validator, whose best
// weights the final snapshot carries), and the checkpoints themselves: written every
// checkpoint_every steps, at the end and at each new best evaluation (best.pt), and resumed from
// exactly. Snapshots and checkpoints export the same weights: the average with ema_decay, else
// the live ones.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint.hpp"
#include "grad_scaler.hpp"
#include "loss.hpp"
#include "validation.hpp"
#include "weight_average.hpp"

namespace embedflow::torchfam {

class TrainState {
 public:
  // Reads checkpoint_dir, keep_checkpoints, resume (auto: the newest readable checkpoint in
  // checkpoint_dir) and ema_decay; with a validation input, makes the Validator; when resuming,
  // reads the checkpoint's counters and metrics (its tensors wait for restore()). Only the
  // `primary` rank writes files.
  TrainState(NodeContext& ctx, Model& model, Loss& loss, std::string spec_text, bool primary);

  Validator* validator() const { return validator_.get(); }  // null without a validation input
  bool resuming() const { return !resume_path_.empty(); }
  bool checkpointing() const { return !checkpoint_dir_.empty(); }

  std::int64_t step() const { return progress_.step; }
  std::int64_t epoch() const { return progress_.epoch; }
  void set_epoch(std::int64_t epoch) { progress_.epoch = epoch; }
  // The index of the next input batch (replayed passes count on), and whether a resumed run
  // trained on that batch before its checkpoint.
  std::int64_t next_position() { return progress_.position++; }
  bool trained_before(std::int64_t index) const { return index < resume_position_; }
  std::int64_t resume_position() const { return resume_position_; }
  std::int64_t resumed_from() const { return resumed_from_; }
  std::int64_t last_checkpoint() const { return last_checkpoint_; }
  bool checkpoint_current() const { return last_checkpoint_ == progress_.step; }
  bool snapshot_current() const { return last_snapshot_ == progress_.step; }
  const std::vector<MetricRow>& history() const { return progress_.metrics; }

  // After an update: counts it, folds the new weights into the average, and adds its loss to its
  // epoch's and to the metrics window's.
  void count_step(double loss, std::int64_t samples, double lr);
  bool window_open() const { return progress_.window_steps > 0; }
  // The metrics window as a row (kept in the history); the next window starts empty.
  MetricRow close_window();
  // Starts the next window's clock: when the node opens, and after a row is written (the time
  // spent writing it is not charged to the next window).
  void start_window();
  // The mean training loss of the latest epoch so far; NaN before its first step.
  double epoch_loss() const;

  // When resuming, once the model is built and the optimizer made: their tensors, the loss's
  // learnable tensors and state (a cross-batch memory), amp's loss scale (`scaler`, null without
  // amp), LibTorch's RNG state from the checkpoint, and the average from the checkpoint's `model`.
  void restore(torch::optim::Optimizer& optimizer, GradScaler* scaler);
  // With ema_decay, starts the average from the current weights (unless restore() did).
  void start_average();
  // What snapshots and checkpoints export as the model: the live state, or with averaging the
  // average in place of every floating-point tensor.
  NamedTensors exported_state();

  // A model snapshot of the exported state; the final one (with validation) carries the best
  // evaluation's weights. With the training loss of its epoch so far, the validation fields and
  // this node's id as `source`.
  Record snapshot(bool final);
  // The weights the final snapshot carries, as a snapshot: what `export` traces.
  Record final_weights();
  // Writes a checkpoint (step-N.pt, or `name` such as best.pt) of this state, the model, the
  // optimizer and amp's loss scaler (null: none); the other ranks, whose models are equal, only count it.
  void save(torch::optim::Optimizer& optimizer, const GradScaler* scaler, const std::vector<std::int64_t>& input_size,
            const std::string& name = "");

 private:
  void resolve_resume();
  void read_checkpoint_header();
  void restore_scaler(GradScaler* scaler, const std::string& what);

  NodeContext& ctx_;
  Model& model_;
  Loss& loss_;
  std::string spec_text_;
  bool primary_ = true;
  std::filesystem::path checkpoint_dir_, resume_path_;
  std::int64_t keep_ = 0;
  double ema_decay_ = 0;
  std::unique_ptr<Validator> validator_;
  std::unique_ptr<CheckpointReader> checkpoint_;  // from the header until restore()
  std::unique_ptr<WeightAverage> average_;        // null: averaging off
  TrainProgress progress_;
  std::int64_t resume_position_ = 0, resumed_from_ = 0;
  std::int64_t last_checkpoint_ = -1, last_snapshot_ = -1;
  std::chrono::steady_clock::time_point window_start_;
};

}  // namespace embedflow::torchfam
