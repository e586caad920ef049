// torch.train's optimisation step (optimisation_step.hpp).

#include "optimisation_step.hpp"

#include <ATen/autocast_mode.h>

#include <algorithm>

namespace embedflow::torchfam {

namespace {

// Autocast for one forward pass and loss, as `with torch.autocast(device)`: CUDA in float16,
// the CPU in bfloat16 (the CPU's autocast type); restored and its cast cache cleared on exit.
class AutocastScope {
 public:
  AutocastScope(bool on, const torch::Device& device) : on_(on), cuda_(device.is_cuda()) {
    if (!on_) return;
    if (cuda_) {
      was_ = at::autocast::is_enabled();
      at::autocast::set_autocast_gpu_dtype(at::kHalf);
      at::autocast::set_enabled(true);
    } else {
      was_ = at::autocast::is_cpu_enabled();
      at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
      at::autocast::set_cpu_enabled(true);
    }
    at::autocast::increment_nesting();
  }
  ~AutocastScope() {
    if (!on_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    if (cuda_) at::autocast::set_enabled(was_);
    else at::autocast::set_cpu_enabled(was_);
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool on_, cuda_, was_ = false;
};

}  // namespace

OptimisationStep::OptimisationStep(NodeContext& ctx, Model& model, Loss& loss, std::string loss_name)
    : ctx_(ctx), model_(model), loss_(loss), loss_name_(std::move(loss_name)) {
  const Params& p = ctx.params();
  optimizer_factory_ = ctx.component<OptimizerFactory>("optimizer");
  schedule_ = ctx.component<Schedule>("schedule");
  labelled_fraction_ = p.number("labelled_fraction");
  clip_norm_ = p.number("clip_grad_norm");
  clip_value_ = p.number("clip_grad_value");
  bucket_mb_ = p.number("bucket_mb");
  gather_ = p.string("gather_embeddings");
  amp_ = p.boolean("amp");
  GradScalerOptions scaling;
  scaling.init_scale = p.number("amp_init_scale");
  scaling.growth_interval = p.integer("amp_growth_interval");
  scaler_ = GradScaler(scaling);
  device_ = model_.device();
  DistributedOptions dist = resolve_distributed(p.integer("world_size"), p.integer("rank"), p.string("rendezvous"),
                                                p.number("rendezvous_timeout"), ctx.id());
  dist.gpu = device_.is_cuda() && nccl_available();  // every rank trains on a GPU: NCCL
  if (dist.world_size > 1) group_ = std::make_unique<DataParallelGroup>(dist);
  primary_ = dist.rank == 0;
}

void OptimisationStep::build(const torch::Tensor& sample) {
  model_.prepare(sample.narrow(0, 0, std::min<std::int64_t>(2, sample.size(0))));
  model_.to(device_);
  params_ = model_.trainable_parameters();
  if (params_.empty()) throw ConfigError("the model has no trainable parameters (is everything frozen?)");
  // The loss's own tensors (proxies, class weights) follow the model's: the optimizer's state
  // lists them last, so a checkpoint of a model-only loss reads as before.
  loss_.to(device_);
  for (auto& [name, t] : loss_.parameters()) params_.push_back(t);
  optimizer_ = optimizer_factory_->make(params_);
}

std::int64_t OptimisationStep::trainable_parameters() const {
  std::int64_t trainable = 0;
  for (const auto& t : params_) trainable += t.numel();
  return trainable;
}

void OptimisationStep::join_ranks() {
  if (!group_) return;
  // Every rank starts from rank 0's weights; afterwards the averaged gradients keep the
  // parameters equal, and the state the optimizer does not own (batch norm statistics,
  // frozen parts) is re-sent from rank 0 before every step.
  std::vector<torch::Tensor> all;
  for (const auto& named : model_.state()) {
    all.push_back(named.second);
    bool trained = false;
    for (const auto& t : params_) trained = trained || t.unsafeGetTensorImpl() == named.second.unsafeGetTensorImpl();
    if (!trained) untrained_state_.push_back(named.second);
  }
  for (auto& [name, t] : loss_.parameters()) all.push_back(t);
  group_->broadcast_from_rank0(all);
  group_->overlap_gradients(params_, static_cast<std::int64_t>(bucket_mb_ * (1 << 20)));
  log_info(ctx_.id(), "data parallel: gradients all-reduced ",
           group_->buckets() > 0 ? cat("in ", group_->buckets(), " bucket(s) while the backward pass runs")
                                 : std::string("in one piece after the backward pass"));
}

double OptimisationStep::learning_rate(std::int64_t step, std::int64_t max_steps) const {
  return optimizer_factory_->lr() * schedule_->factor(step, max_steps);
}

// Semi-supervised mode: a copy of the batch whose `label` is -1 (unknown: in no pair of the
// label-batch losses) for the samples outside the labelled subset. Whether a sample is labelled
// depends only on the graph seed, the node and its id, so it stays labelled in every epoch.
Record OptimisationStep::mask_labels(const Record& batch, std::int64_t index) const {
  Record r = batch;
  const Array* label = batch.find("label");
  if (!label) return r;  // nothing to hide (pair or triplet batches)
  const Array* id = batch.find("id");
  if (!id || id->is_string() || id->numel() != label->numel())
    throw DataError(cat("labelled_fraction needs an integer id per label (input batch ", index, ": ", batch.describe(), ")"));
  std::vector<std::int64_t> masked(static_cast<std::size_t>(label->numel()));
  for (std::int64_t i = 0; i < label->numel(); ++i) {
    const std::uint64_t h = derive_seed(derive_seed(ctx_.seed(), "labelled"), static_cast<std::uint64_t>(id->as_int(i)));
    const bool labelled = double(h >> 11) * 0x1.0p-53 < labelled_fraction_;
    masked[static_cast<std::size_t>(i)] = labelled ? label->as_int(i) : -1;
  }
  r.set("label", Array::from_vector<std::int64_t>(label->shape(), std::move(masked)));
  return r;
}

bool OptimisationStep::gather_global_batch(StepInputs& in, std::int64_t index) {
  std::int64_t offset = 0;
  auto gather_field = [&](const std::string& name) { in.provide(name, group_->all_gather(in.field(name), offset)); };
  auto gather_embedding = [&](const std::string& field, const torch::Tensor& e) {
    in.provide_output(field, "embedding", group_->all_gather(e, offset));
  };
  if (in.has("image") && in.has("label") && !in.has("pair_labels")) {
    // pair_labels [n,n] relates this rank's rows only: such a batch is not gathered.
    gather_embedding("image", in.embed_one("image"));
    gather_field("label");
    return true;
  }
  if (!in.has("image") && in.has("a_image") && in.has("b_image") && in.has("pair_label")) {
    std::vector<torch::Tensor> e = in.embed({"a_image", "b_image"});  // one forward pass for both
    gather_embedding("a_image", e[0]);
    gather_embedding("b_image", e[1]);
    gather_field("pair_label");
    return true;
  }
  if (gather_ == "on")
    throw DataError(cat("gather_embeddings: on needs a label batch (image, label) or a pair batch (a_image, b_image, "
                        "pair_label), but input batch ", index, " is ", in.record().describe()));
  return false;
}

double OptimisationStep::update(const Record& batch, std::int64_t index, double lr,
                                const std::function<void(double)>& check_loss, std::int64_t& samples) {
  for (auto& group : optimizer_->param_groups()) group.options().set_lr(lr);
  Record masked, shard;
  if (labelled_fraction_ < 1.0) masked = mask_labels(batch, index);
  const Record& whole = labelled_fraction_ < 1.0 ? masked : batch;
  std::int64_t full = 0, local = 0;
  const bool presharded = whole.find("unsharded_rows") != nullptr;
  if (presharded) check_shard(whole, index, group_.get(), full, local);
  if (group_) {
    if (!presharded) shard = rank_slice(whole, index, *group_, full, local);
    group_->broadcast_from_rank0(untrained_state_);
  }
  StepInputs in(model_, group_ && !presharded ? shard : whole, device_, loss_name_);
  // Cross-rank mining (pytorch-metric-learning's DistributedLossWrapper): the loss of the global
  // batch, the same on every rank; each rank's backward reaches only its own embeddings, so the
  // loss is scaled by the world size and the ranks' mean gradient is the global batch's.
  bool gathered = false;
  torch::Tensor loss;
  {
    AutocastScope autocast(amp_, device_);
    gathered = group_ && gather_ != "off" && gather_global_batch(in, index);
    loss = loss_.compute(in).to(torch::kFloat32);
  }
  double value = loss.item<double>();
  // amp: backward runs on the loss times the scale, so small float16 gradients do not flush to 0.
  const double loss_scale = amp_ ? scaler_.scale() : 1.0;
  // Data parallel: the whole batch's mean is the slices' means weighted by their share of it.
  const double share = group_ ? static_cast<double>(local) / static_cast<double>(full) : 1.0;
  optimizer_->zero_grad();
  if (gathered) {
    (loss * (static_cast<double>(group_->size()) * loss_scale)).backward();
    group_->average_gradients(params_);
  } else if (group_) {
    // The loss is summed over the ranks while the backward pass runs, and the gradients' buckets
    // are reduced as backward produces them (overlap_gradients); the step waits for both.
    auto whole_loss = group_->start_sum(value * share);
    // Scaled so that the mean over ranks of the gradients is the whole batch's gradient.
    (loss * (share * static_cast<double>(group_->size()) * loss_scale)).backward();
    group_->average_gradients(params_);
    value = whole_loss();
  }
  check_loss(value);
  if (!group_) (amp_ ? loss * loss_scale : loss).backward();
  if (amp_) {
    // The gradients are the same on every rank after the average, so every rank skips alike.
    const bool found_inf = unscale_gradients(params_, loss_scale);
    scaler_.update(found_inf);
    if (found_inf) {
      ++skipped_steps_;
      log_warning(ctx_.id(), "amp: input batch ", index, " gave inf/NaN gradients at loss scale ", loss_scale,
                  "; step skipped, scale now ", scaler_.scale(), " (", skipped_steps_, " skipped so far)");
      samples = group_ ? full : in.batch_size();
      return value;
    }
  }
  if (clip_norm_ > 0) torch::nn::utils::clip_grad_norm_(params_, clip_norm_);
  if (clip_value_ > 0) torch::nn::utils::clip_grad_value_(params_, clip_value_);
  optimizer_->step();
  samples = group_ ? full : in.batch_size();
  return value;
}

}  // namespace embedflow::torchfam
