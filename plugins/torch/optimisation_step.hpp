// torch.train's optimisation step: the model built at the first batch and its optimizer, and for
// each batch one update: the learning rate of the schedule, the semi-supervised label mask, the
// rank's slice of the batch when data parallel (distributed.hpp), the loss and its backward pass
// (the gradients averaged over the ranks), gradient clipping and the optimizer's step.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "distributed.hpp"
#include "grad_scaler.hpp"
#include "loss.hpp"
#include "model.hpp"
#include "optimizers.hpp"
#include "schedule.hpp"

namespace embedflow::torchfam {

class OptimisationStep {
 public:
  // Makes the optimizer and schedule components and reads labelled_fraction, the clipping and
  // bucket_mb; with world_size > 1, joins the data-parallel group (blocks until every rank has).
  OptimisationStep(NodeContext& ctx, Model& model, Loss& loss, std::string loss_name);

  bool primary() const { return primary_; }  // rank 0 (or not data parallel): writes files
  const torch::Device& device() const { return device_; }
  // At the first batch: builds the model's input-dependent layers from `sample` (a few of its
  // images), moves it and the loss's learnable tensors to its device and makes the optimizer over
  // both. ConfigError when nothing in the model trains.
  void build(const torch::Tensor& sample);
  std::int64_t trainable_parameters() const;
  torch::optim::Optimizer& optimizer() { return *optimizer_; }
  // amp's loss scaler (checkpointed with the optimizer); null without amp.
  GradScaler* scaler() { return amp_ ? &scaler_ : nullptr; }
  std::int64_t skipped_steps() const { return skipped_steps_; }
  // Data parallel (after a resume's restore): every rank starts from rank 0's weights, and the
  // gradients are reduced in buckets while the backward pass runs.
  void join_ranks();
  // The learning rate of the update after `step` updates (of max_steps; 0: no limit).
  double learning_rate(std::int64_t step, std::int64_t max_steps) const;
  // One update on input batch `index` at learning rate `lr`. `check_loss` sees the whole batch's
  // loss before the weights change (it throws to stop the run). Returns that loss and sets
  // `samples` to the batch's rows.
  double update(const Record& batch, std::int64_t index, double lr, const std::function<void(double)>& check_loss,
                std::int64_t& samples);

 private:
  Record mask_labels(const Record& batch, std::int64_t index) const;
  // Cross-rank mining: replaces the step's embeddings and labels (of a label batch or a pair
  // batch) by every rank's, this rank's part keeping its graph, so the loss and its miner see the
  // global batch. False (and nothing changed) for a batch of another kind.
  bool gather_global_batch(StepInputs& in, std::int64_t index);

  NodeContext& ctx_;
  Model& model_;
  Loss& loss_;
  std::string loss_name_;
  std::unique_ptr<OptimizerFactory> optimizer_factory_;
  std::unique_ptr<Schedule> schedule_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::vector<torch::Tensor> params_;
  std::unique_ptr<DataParallelGroup> group_;    // null unless world_size > 1
  bool primary_ = true;
  std::vector<torch::Tensor> untrained_state_;  // re-sent from rank 0 before each step
  bool amp_ = false;                            // autocast (CUDA f16, CPU bf16) and loss scaling
  GradScaler scaler_;
  std::int64_t skipped_steps_ = 0;              // amp: steps skipped for inf/NaN gradients
  std::string gather_;                          // gather_embeddings: auto, on or off
  double bucket_mb_ = 0;                        // data parallel: gradient bucket size; 0: no overlap
  torch::Device device_{torch::kCPU};
  double labelled_fraction_ = 1.0;
  double clip_norm_ = 0, clip_value_ = 0;
};

}  // namespace embedflow::torchfam
