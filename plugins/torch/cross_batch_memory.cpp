// torch.cross_batch_memory: pytorch-metric-learning's CrossBatchMemory (Wang et al. 2020, XBM)
// around a label-batch loss (mining.hpp: LabelBatchLoss). It keeps a queue of the last
// memory_size embeddings (detached) with their labels and computes the wrapped loss between the
// batch and the queue, so each step sees far more negatives than one batch holds.
//
// The update rule is PML's, step for step: the batch is written into the queue *first* (at slots
// next, next+1, ... modulo memory_size, overwriting the oldest rows), then the loss runs with the
// batch as queries and the queue's filled rows as the reference: over every pair between them, or
// over the pairs or triplets the `miner` returns; pairs of a row with its own slot are dropped.
// Gradients reach the batch's embeddings only. A batch larger than the memory is an error.
//
// The queue is the loss's state (Loss::state): torch.train's checkpoints carry it and a resume
// continues with it exactly. Validation's loss metric computes against the queue without
// changing it. Data parallel, each rank queues its own slice and checkpoints hold rank 0's queue.
// Caveat (a PML difference): PML keeps the self pair of a one-row batch (its wrap test misses it);
// here a row never pairs with its own slot.
#include "mining.hpp"
#include "torch_types.hpp"

namespace embedflow::torchfam {
namespace {

class CrossBatchMemory final : public Loss {
 public:
  explicit CrossBatchMemory(const ComponentContext& c)
      : loss_(c.component<LabelBatchLoss>("loss")), miner_(c.params().has("miner") ? c.component<Miner>("miner") : nullptr),
        size_(c.params().integer("memory_size")), owner_(c.owner()) {
    if (loss_->needs_batch_reference())
      throw ConfigError(cat(owner_, ": the wrapped loss indexes reference rows as batch rows (swap), which a memory cannot give"));
  }

  torch::Tensor compute(StepInputs& in) override {
    const torch::Tensor x = in.embed_one("image");
    const std::int64_t n = x.size(0);
    const torch::Tensor labels = batch_labels(in, n);
    if (n > size_)
      throw DataError(cat(owner_, ": a batch of ", n, " rows does not fit memory_size ", size_));
    if (!embeddings_.defined()) {
      embeddings_ = torch::zeros({size_, x.size(1)}, x.options().requires_grad(false));
      labels_ = torch::zeros({size_}, labels.options());
    } else if (embeddings_.size(1) != x.size(1)) {
      throw DataError(cat(owner_, ": embeddings of ", x.size(1), " dims for a memory of ", embeddings_.size(1)));
    } else if (embeddings_.device() != x.device()) {  // a queue restored from a checkpoint is on the CPU
      embeddings_ = embeddings_.to(x.device());
      labels_ = labels_.to(x.device());
    }
    // Enqueued before the loss, as PML does: the batch is part of its own reference.
    const torch::Tensor slots = torch::arange(next_, next_ + n, labels.options()).remainder(size_);
    const torch::Tensor memory = embeddings_.index_copy(0, slots, x.detach().to(embeddings_.dtype()));
    const torch::Tensor memory_labels = labels_.index_copy(0, slots, labels);
    const std::int64_t next = (next_ + n) % size_;
    const bool filled = filled_ || next <= next_;
    const std::int64_t rows = filled ? size_ : next;
    const MiningInput pairs{x, memory.narrow(0, 0, rows), label_masks_against(labels, memory_labels.narrow(0, 0, rows))};
    const IndicesTuple t = without_self_pairs(miner_ ? miner_->mine(pairs) : all_pairs(pairs.relation), slots);
    const torch::Tensor loss = loss_->compute_tuple(pairs, &t);
    if (!in.evaluating()) {
      embeddings_ = memory;
      labels_ = memory_labels;
      next_ = next;
      filled_ = filled;
    }
    return loss;
  }

  NamedTensors state() const override {
    if (!embeddings_.defined()) return {};
    return {{"embeddings", embeddings_.to(torch::kCPU)},
            {"labels", labels_.to(torch::kCPU)},
            {"queue", torch::tensor({next_, static_cast<std::int64_t>(filled_)}, torch::kInt64)}};
  }

  void load_state(const NamedTensors& state, const std::string& what) override {
    TensorMap m(state.begin(), state.end());
    if (m.empty()) return;
    if (!m.count("embeddings") || !m.count("labels") || !m.count("queue") || m.at("embeddings").dim() != 2 ||
        m.at("embeddings").size(0) != size_ || m.at("queue").numel() != 2)
      throw DataError(cat(what, ": its cross-batch memory does not fit memory_size ", size_, " of ", owner_));
    embeddings_ = m.at("embeddings");
    labels_ = m.at("labels").to(torch::kInt64);
    next_ = m.at("queue")[0].item<std::int64_t>();
    filled_ = m.at("queue")[1].item<std::int64_t>() != 0;
  }

 private:
  std::unique_ptr<LabelBatchLoss> loss_;
  std::unique_ptr<Miner> miner_;
  std::int64_t size_;
  std::string owner_;
  torch::Tensor embeddings_, labels_;  // [memory_size, D], [memory_size]; undefined until the first batch
  std::int64_t next_ = 0;              // the slot the next row goes to
  bool filled_ = false;                // every slot written at least once
};

}  // namespace

ComponentType cross_batch_memory_type() {
  return ComponentTypeBuilder("torch.cross_batch_memory", "loss")
      .doc("PML's CrossBatchMemory: a queue of the last memory_size embeddings and labels; each step enqueues the "
           "batch (oldest rows out), then computes the wrapped label-batch loss between the batch and the queue "
           "(every pair, or what `miner` returns; a row's pair with its own slot left out). The queue is "
           "checkpointed with the trainer.")
      .param(Param::component("loss", "loss").doc(
          "the loss between the batch and the memory: torch.batch_contrastive or torch.batch_triplet_margin"))
      .param(Param::integer("memory_size").default_value(1024).min(1).doc("rows the queue holds (PML's default 1024)"))
      .param(Param::component("miner", "miner").optional().doc(
          "mines between the batch and the memory (the wrapped loss takes no miner of its own); unset: every pair"))
      .consumes("batch", "image: any[N,...], label: any[N]")
      .consumes("outputs", "embedding: f32[N,D]")
      .check([](ContractContext& c) {
        ContractInputs inputs = c.inputs();
        inputs["reference"] = PortSchema::any();
        const ComponentContract* inner = c.part("loss", inputs);
        if (inner && !inner->type.empty() && !inner->consumes.count("reference"))
          c.error(cat("loss ", inner->type, " does not compare a batch with reference embeddings; wrap a label-batch "
                      "loss (torch.batch_contrastive, torch.batch_triplet_margin)"));
        const Value& loss = c.params().value("loss");
        if (loss.get("miner"))
          c.error("the wrapped loss has a miner of its own; give it to torch.cross_batch_memory's `miner`, which mines "
                  "between the batch and the memory");
        if (const Value* swap = loss.get("swap"); swap && swap->is_boolean() && swap->as_boolean())
          c.error("the wrapped loss's swap reads distances between memory rows, which PML indexes as batch rows; "
                  "use swap: false");
        c.part("miner");
      })
      .create<CrossBatchMemory>();
}

}  // namespace embedflow::torchfam
