// torch.train's checkpoint files (checkpoint.hpp): names, listing, writing and reading back.
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cstdio>
#include <regex>

#include "checkpoint.hpp"
#include "embedflow/log.hpp"

namespace embedflow::torchfam {
namespace fs = std::filesystem;

// checkpoint_name and list_checkpoints live in model_state.cpp (the common library), where a
// model's `weights:` folder is resolved too.

std::optional<fs::path> newest_readable_checkpoint(const fs::path& dir, const std::string& node) {
  auto all = list_checkpoints(dir);
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    try {
      CheckpointReader probe(it->second);
      return it->second;
    } catch (const Error& e) {
      log_warning(node, "resume: auto skips the damaged checkpoint ", it->second.string(), " (", e.what(),
                  "); trying the one before");
    }
  }
  return std::nullopt;
}

namespace {

torch::Tensor metrics_tensor(const std::vector<MetricRow>& rows) {
  torch::Tensor t = torch::zeros({static_cast<std::int64_t>(rows.size()), 5}, torch::kFloat64);
  auto a = t.accessor<double, 2>();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    auto k = static_cast<std::int64_t>(i);
    a[k][0] = static_cast<double>(rows[i].step);
    a[k][1] = static_cast<double>(rows[i].epoch);
    a[k][2] = rows[i].loss;
    a[k][3] = rows[i].lr;
    a[k][4] = rows[i].samples_per_s;
  }
  return t;
}

std::vector<MetricRow> metrics_rows(const torch::Tensor& t) {
  std::vector<MetricRow> rows;
  auto a = t.accessor<double, 2>();
  for (std::int64_t i = 0; i < t.size(0); ++i)
    rows.push_back({static_cast<std::int64_t>(a[i][0]), static_cast<std::int64_t>(a[i][1]), a[i][2], a[i][3], a[i][4]});
  return rows;
}

}  // namespace

fs::path write_checkpoint(const fs::path& dir, const CheckpointContent& c, torch::optim::Optimizer& optimizer_state,
                          std::int64_t keep, const std::string& name) {
  const TrainProgress& p = c.progress;
  torch::serialize::OutputArchive a, model, optimizer;
  a.write("format", c10::IValue(std::string(kCheckpointFormat)));
  a.write("spec", c10::IValue(c.spec));
  a.write("loss_spec", c10::IValue(c.loss_spec));
  a.write("optimizer_spec", c10::IValue(c.optimizer_spec));
  // The schedule is a function of the step alone: its spec is all the state it has.
  a.write("schedule_spec", c10::IValue(c.schedule_spec));
  a.write("step", c10::IValue(p.step));
  a.write("epoch", c10::IValue(p.epoch));
  a.write("position", c10::IValue(p.position));
  if (c.live_model) {
    torch::serialize::OutputArchive live;
    write_state(*c.live_model, live);
    a.write("live_model", live);
  }
  write_state(c.model, model);
  a.write("model", model);
  if (!c.loss.empty()) {
    torch::serialize::OutputArchive loss;
    write_state(c.loss, loss);
    a.write("loss", loss);
  }
  optimizer_state.save(optimizer);
  a.write("optimizer", optimizer);
  {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    a.write("rng_torch", gen.get_state(), /*is_buffer=*/true);
  }
  a.write("metrics", metrics_tensor(p.metrics), /*is_buffer=*/true);
  a.write("window", torch::tensor({p.window_loss, static_cast<double>(p.window_samples),
                                   static_cast<double>(p.window_steps), p.last_lr}, torch::kFloat64),
          /*is_buffer=*/true);
  a.write("epoch_loss", torch::tensor({p.epoch_loss_sum, static_cast<double>(p.epoch_loss_steps),
                                       static_cast<double>(p.loss_epoch)}, torch::kFloat64),
          /*is_buffer=*/true);
  if (!c.input_size.empty())
    a.write("input_size", torch::tensor(c.input_size, torch::kInt64), /*is_buffer=*/true);
  if (c.extra) c.extra(a);
  fs::create_directories(dir);
  fs::path file = dir / (name.empty() ? checkpoint_name(p.step) : name), tmp = file;
  tmp += ".tmp";
  a.save_to(tmp.string());
  fs::rename(tmp, file);  // a killed run never leaves a truncated checkpoint under the final name
  if (keep > 0 && name.empty()) {
    auto all = list_checkpoints(dir);
    for (std::size_t i = 0; i + static_cast<std::size_t>(keep) < all.size(); ++i) fs::remove(all[i].second);
  }
  return file;
}

// Step, position and metrics are read at once, so the trainer's log files restart from them.
CheckpointReader::CheckpointReader(const fs::path& file) : what_(file.string()) {
  load_archive(archive_, file, cat("checkpoint '", what_, "'"));
  if (read_string(archive_, "format", what_) != kCheckpointFormat)
    throw ConfigError(cat("resume: '", what_, "' is not a torch.train checkpoint"));
  spec_ = read_string(archive_, "spec", what_);
  progress_.step = read_int(archive_, "step", what_);
  progress_.epoch = read_int(archive_, "epoch", what_);
  progress_.position = read_int(archive_, "position", what_);
  torch::Tensor m;
  archive_.read("metrics", m, true);
  progress_.metrics = metrics_rows(m);
  torch::Tensor w;
  archive_.read("window", w, true);
  auto wa = w.accessor<double, 1>();
  progress_.window_loss = wa[0];
  progress_.window_samples = static_cast<std::int64_t>(wa[1]);
  progress_.window_steps = static_cast<std::int64_t>(wa[2]);
  progress_.last_lr = wa[3];
  torch::Tensor el;
  if (archive_.try_read("epoch_loss", el, true)) {  // absent from checkpoints older than the field
    auto ea = el.accessor<double, 1>();
    progress_.epoch_loss_sum = ea[0];
    progress_.epoch_loss_steps = static_cast<std::int64_t>(ea[1]);
    progress_.loss_epoch = static_cast<std::int64_t>(ea[2]);
  }
  // The weights' digests are checked now rather than when the trainer reads them, so that
  // `resume: auto` passes over a checkpoint whose tensors were changed after saving.
  torch::serialize::InputArchive model;
  if (archive_.try_read("model", model)) read_state(model, what_);
  if (has_live_model()) read_state(live_, what_ + " (live_model)");
}

std::vector<std::int64_t> checkpoint_input_size(torch::serialize::InputArchive& archive) {
  torch::Tensor t;
  if (!archive.try_read("input_size", t, true) || t.dim() != 1 || t.scalar_type() != torch::kInt64) return {};
  return std::vector<std::int64_t>(t.data_ptr<std::int64_t>(), t.data_ptr<std::int64_t>() + t.numel());
}

bool CheckpointReader::has_live_model() {
  if (!live_read_) {
    has_live_ = archive_.try_read("live_model", live_);
    live_read_ = true;
  }
  return has_live_;
}

void CheckpointReader::read_model(Model& model) { read_model_state(model, archive_, what_); }

void CheckpointReader::read_live_model(Model& model) {
  if (!has_live_model()) throw DataError(cat(what_, ": no 'live_model' entry (written without ema_decay)"));
  read_model_state(model, live_, what_ + " (live_model)");
}

void CheckpointReader::read_optimizer(torch::optim::Optimizer& optimizer) {
  torch::serialize::InputArchive state;
  archive_.read("optimizer", state);
  optimizer.load(state);
}

void CheckpointReader::read_loss(Loss& loss, const std::string& loss_name) {
  NamedTensors wanted = loss.parameters();
  torch::serialize::InputArchive entry;
  const bool stored = archive_.try_read("loss", entry);
  if (wanted.empty()) {
    if (stored) throw DataError(cat(what_, ": holds learnable loss tensors, but ", loss_name, " has none (a different loss?)"));
    return;
  }
  if (!stored)
    throw DataError(cat(what_, ": holds no learnable loss tensors, but ", loss_name, " has ", wanted.front().first,
                        " (written with a different loss?)"));
  const NamedTensors saved = read_state(entry, what_ + " (loss)");
  if (saved.size() != wanted.size())
    throw DataError(cat(what_, ": holds ", saved.size(), " loss tensors but ", loss_name, " has ", wanted.size()));
  torch::NoGradGuard no_grad;
  for (auto& [name, t] : wanted) {
    auto it = std::find_if(saved.begin(), saved.end(), [&](const auto& s) { return s.first == name; });
    if (it == saved.end()) throw DataError(cat(what_, ": has no loss tensor '", name, "' that ", loss_name, " needs"));
    if (it->second.sizes() != t.sizes())
      throw DataError(cat(what_, ": loss tensor '", name, "' is ", it->second.sizes(), " but ", loss_name, " has it ",
                          t.sizes(), " (a different num_classes or embedding_size?)"));
    t.copy_(it->second);
  }
}

void CheckpointReader::restore_rng() {
  torch::Tensor rng;
  archive_.read("rng_torch", rng, true);
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(rng);
}

}  // namespace embedflow::torchfam
