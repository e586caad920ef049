// torch.train's periodic evaluation on a validation set and model selection (docs/torch.md,
// "Validation and model selection"). The trainer holds the validation batches; every
// validate_every steps (and at the end) the Validator embeds them with the weights snapshots
// would export, in eval mode without autograd, scores the selected metric, keeps a copy of the
// best evaluation's weights and counts the evaluations since the last improvement (patience). The
// best weights, value and counter travel in checkpoints, so a resumed run selects as if it had
// never stopped.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "loss.hpp"
#include "model.hpp"

namespace embedflow::torchfam {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Leave-one-out retrieval within one labelled set under L2 distance, as eval.retrieval without a
// gallery: each item queries all the others, ranked by a stable sort of double-precision
// distances (ties by index); items labelled -1 are neither queries nor ranked; queries with no
// other item of their label are left out of the means. P@1: the nearest item shares the label;
// R-precision: the share of the query's R same-label items among its top R; MAP@R: the mean over
// those R positions of precision at each one holding a same-label item, divided by R
// (pytorch-metric-learning's mean_average_precision_at_r).
struct RetrievalScores {
  double map_at_r = kNaN, precision_at_1 = kNaN, r_precision = kNaN;
  std::int64_t queries = 0;
};
RetrievalScores leave_one_out_retrieval(const torch::Tensor& embeddings, const std::vector<std::int64_t>& labels);

// One evaluation, as the `validation` output and validation.csv give it.
struct ValidationRow {
  std::int64_t step = 0, epoch = 0;
  double value = kNaN;
  bool improved = false;
  double best = kNaN;
  std::int64_t best_step = 0, since_best = 0;
  double map_at_r = kNaN, precision_at_1 = kNaN, r_precision = kNaN, loss = kNaN;
};

class Validator {
 public:
  // Reads validate_every, select_metric, select_mode, patience, min_delta and log_dir; only
  // `write_files` (rank 0) writes <log_dir>/validation.csv.
  Validator(NodeContext& ctx, bool write_files);
  // A validation batch: held until the end of the run.
  void add(const RecordPtr& batch);
  bool due(std::int64_t step) const { return every_ > 0 && step % every_ == 0; }
  // Step of the latest evaluation; -1 before the first.
  std::int64_t last_step() const { return rows_.empty() ? -1 : rows_.back().step; }
  // Evaluates `state` (what snapshots export: the live weights, or their average) loaded into
  // `model`, which is left with its own weights and in training mode. Emits the row on output
  // `port` (when connected) and appends it to validation.csv. True when it is the new best.
  bool evaluate(Model& model, Loss& loss, const std::string& loss_name, const NamedTensors& state,
                std::int64_t step, std::int64_t epoch, double epoch_loss, Emitter& out, std::size_t port);
  // True once `patience` evaluations in a row did not improve.
  bool exhausted() const { return patience_ > 0 && since_best_ >= patience_; }
  // Why training stops early, for the log.
  std::string stop_reason() const;
  bool has_best() const { return !best_state_.empty(); }
  // The best evaluation's weights as a model snapshot: {weights, spec, step, epoch, loss (the
  // training loss of its epoch then), validation, validation_metric}.
  Record best_snapshot(const std::string& spec_text) const;
  // Gives any other snapshot the same fields: the value of the evaluation at its step, or NaN.
  void annotate(Record& snapshot) const;
  const std::string& metric() const { return metric_; }
  // Checkpoints: the rows so far, the best weights and value and the patience counter.
  void save(torch::serialize::OutputArchive& checkpoint) const;
  void restore(torch::serialize::InputArchive& checkpoint, const std::string& what);

 private:
  ValidationRow score(Model& model, Loss& loss, const std::string& loss_name);
  void write_row(const ValidationRow& row);
  void present() const;

  NodeContext& ctx_;
  std::int64_t every_ = 0, patience_ = 0;
  std::string metric_;
  bool maximize_ = true;
  double min_delta_ = 0;
  std::filesystem::path csv_path_;
  std::ofstream csv_;
  std::vector<RecordPtr> batches_;
  std::string image_field_;
  std::vector<ValidationRow> rows_;
  NamedTensors best_state_;
  double best_ = kNaN, best_loss_ = kNaN;
  std::int64_t best_step_ = 0, best_epoch_ = 0, since_best_ = 0;
};

}  // namespace embedflow::torchfam
