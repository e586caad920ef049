// torch.train's checkpoints (docs/torch.md, "Checkpoints and resume"): one LibTorch archive per
// file step-NNNNNNNN.pt with the component specs, the trainer's progress, the model (the weight
// average when averaging, the live weights then as live_model), the optimizer state and LibTorch's
// CPU generator state. torch.train writes and resumes them; torch.embed and a model's `weights`
// read their model entry (model_state.cpp).
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "loss.hpp"
#include "metrics_log.hpp"
#include "model.hpp"

namespace embedflow::torchfam {

inline constexpr const char* kCheckpointFormat = "embedflow-torch-checkpoint/1";

// "step-00000100.pt"
std::string checkpoint_name(std::int64_t step);
// The checkpoints in `dir` by step, oldest first (none when dir is not a directory).
std::vector<std::pair<std::int64_t, std::filesystem::path>> list_checkpoints(const std::filesystem::path& dir);

// For `resume: auto`: the newest checkpoint in `dir` that opens as a torch.train checkpoint. A
// newer one that does not (truncated by a full disk, damaged) is skipped with a warning naming
// it, logged as `node`. nullopt when none opens.
// The newest step-N.pt in `dir` by step, readable or not (empty when none): a model's `weights:`
// folder (a damaged file then fails to load with its name).
std::filesystem::path newest_checkpoint_file(const std::filesystem::path& dir);
std::optional<std::filesystem::path> newest_readable_checkpoint(const std::filesystem::path& dir, const std::string& node);

// The trainer's counters and metrics a checkpoint carries, so a resumed run continues exactly.
struct TrainProgress {
  std::int64_t step = 0;           // updates done
  std::int64_t epoch = 0;          // epoch of the last update
  std::int64_t position = 0;       // input batches consumed, replayed passes included
  std::vector<MetricRow> metrics;  // every metrics row so far
  // The metrics window still open, so a resumed run's next row averages the same steps.
  double window_loss = 0;
  std::int64_t window_samples = 0, window_steps = 0;
  double last_lr = 0;
  // The latest epoch's loss so far, so a resumed run's snapshots report the same `loss`.
  double epoch_loss_sum = 0;
  std::int64_t epoch_loss_steps = 0, loss_epoch = -1;
};

struct CheckpointContent {
  std::string spec, loss_spec, optimizer_spec, schedule_spec;  // validated specs as flow YAML
  TrainProgress progress;
  NamedTensors model;                     // what snapshots export: with averaging, the average
  std::optional<NamedTensors> live_model;  // with averaging: the weights training continues from
  std::vector<std::int64_t> input_size;   // C, H, W of the model's images (empty: unknown); export reads it
  NamedTensors loss;                      // the loss's learnable tensors (Loss::parameters); none: no entry
  // Entries other parts of the trainer keep (model selection's "validation"), written last.
  std::function<void(torch::serialize::OutputArchive&)> extra;
};

// Writes dir/step-NNNNNNNN.pt (to a temporary name, then renamed: a killed run never leaves a
// truncated file under a checkpoint's name) and removes all but the newest `keep` checkpoints
// (0: keeps all). Returns the file written. With a `name` (best.pt), writes dir/name instead and
// removes nothing.
std::filesystem::path write_checkpoint(const std::filesystem::path& dir, const CheckpointContent& content,
                                       torch::optim::Optimizer& optimizer, std::int64_t keep,
                                       const std::string& name = "");

// The input size (C, H, W) a checkpoint records (`input_size`); empty for checkpoints written
// before torch.train recorded it.
std::vector<std::int64_t> checkpoint_input_size(torch::serialize::InputArchive& archive);

// A checkpoint opened to resume from: its header (spec, progress) when opened, the tensors once the
// trainer has built its model and optimizer.
class CheckpointReader {
 public:
  // ConfigError when the file cannot be read or is not a torch.train checkpoint.
  explicit CheckpointReader(const std::filesystem::path& file);
  const std::string& what() const { return what_; }
  const std::string& spec() const { return spec_; }
  const TrainProgress& progress() const { return progress_; }
  // True when the checkpoint was written with weight averaging (it holds live_model).
  bool has_live_model();
  // The `model` entry: with averaging, the average.
  void read_model(Model& model);
  void read_live_model(Model& model);
  void read_optimizer(torch::optim::Optimizer& optimizer);
  // The loss's learnable tensors (proxies, class weights) from the `loss` entry, by name and shape.
  // DataError naming the checkpoint and the loss `loss_name` when they do not match what it has.
  void read_loss(Loss& loss, const std::string& loss_name);
  // LibTorch's default CPU generator (dropout, the VAE's noise).
  void restore_rng();
  // The whole archive, for the entries CheckpointContent::extra wrote.
  torch::serialize::InputArchive& archive() { return archive_; }

 private:
  std::string what_, spec_;
  TrainProgress progress_;
  torch::serialize::InputArchive archive_, live_;
  bool live_read_ = false, has_live_ = false;
};

}  // namespace embedflow::torchfam
