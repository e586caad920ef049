// torch.index_hard_negatives: dataset-wide hard negatives for a triplet or contrastive loss,
// refreshed every N steps through a nearest-neighbour index (faiss), the way ANCE (Xiong et al.
// 2021) takes its negatives from an index of the corpus embedded by a recent model, and the way a
// pytorch-metric-learning user hands a miner's tuple to a loss.
//
// The mining set is every item the trainer has seen so far, kept by its `id`: its image as the
// model takes it (f32, as StepInputs gives it) and its label; a later sight of the same id replaces
// the image (the latest augmentation). Chosen over a side input of image+label records because it
// needs nothing from the trainer or the graph: the set is the training data itself, which after one
// epoch is the whole training set, the corpus ANCE indexes. It costs the images' memory (3 KB per
// 28x28 image) and goes into checkpoints with them.
//
// The rule, per training step s = 1, 2, ... (the steps this loss computed):
//   1. the batch's items enter the set (by id);
//   2. when (s - 1) % every == 0 the whole set is re-embedded by the current model (no autograd,
//      eval mode, embed_batch rows per pass) and the index is rebuilt over those embeddings,
//      L2-normalised (flat: faiss's exact IndexFlatL2; hnsw: IndexHNSWFlat, M hnsw_m, efSearch
//      ef_search). Between refreshes the index and the items it holds stay as they were: stale,
//      as ANCE's index between its refreshes;
//   3. each labelled anchor queries the index with its current embedding (normalised, detached)
//      and takes its k nearest indexed items whose label differs from its own (labelled, and not
//      in the batch: those are negatives of the batch already);
//   4. those items are embedded by the model with autograd (one forward pass) from their stored
//      images and appended to the batch as reference rows, each a negative of the anchors that
//      mined it only;
//   5. the wrapped loss (torch.batch_triplet_margin or torch.batch_contrastive, mining.hpp) runs
//      over every pair or triplet of: positives, the batch's other rows of the anchor's label;
//      negatives, the batch's rows of other labels and the anchor's mined items.
// Validation's loss metric (evaluating) mines from the index as it stands and changes nothing.
// Data parallel: each rank keeps its own mining set (the items it trained on) and mines for its
// own rows, so torch.train needs gather_embeddings: off (the gathered global batch is refused).
// Everything above is the loss's state (Loss::state: the set, the indexed embeddings, the step
// counters, the last step's mined ids): a resume rebuilds the index from the same embeddings, so a
// flat index continues exactly; an hnsw graph is rebuilt by faiss from the same rows.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "mining.hpp"
#include "neighbour_index.hpp"
#include "pml_formulas.hpp"
#include "torch_types.hpp"

namespace embedflow::torchfam {
namespace {

class IndexHardNegatives final : public Loss {
 public:
  explicit IndexHardNegatives(const ComponentContext& c)
      : loss_(c.component<LabelBatchLoss>("loss")), every_(c.params().integer("every")), k_(c.params().integer("k")),
        hnsw_(c.params().string("index") == "hnsw"), hnsw_m_(c.params().integer("hnsw_m")),
        ef_search_(c.params().integer("ef_search")), embed_batch_(c.params().integer("embed_batch")), owner_(c.owner()) {
    if (loss_->needs_batch_reference())
      throw ConfigError(cat(owner_, ": the wrapped loss indexes reference rows as batch rows (swap), which mined rows are not"));
    if (loss_->has_miner())
      throw ConfigError(cat(owner_, ": the wrapped loss has a miner of its own; torch.index_hard_negatives is its miner"));
  }

  torch::Tensor compute(StepInputs& in) override {
    const torch::Tensor images = in.field("image");
    const torch::Tensor x = in.embed_one("image");
    const std::int64_t n = x.size(0);
    // torch.train's cross-rank mining hands the loss every rank's embeddings, but the mining set
    // keeps items by their images, which only the rank's own rows have here.
    if (n != images.size(0))
      throw ConfigError(cat(owner_, ": the trainer gathered every rank's embeddings (", n, " rows for this rank's ",
                            images.size(0), " images), but the mining set keeps the rank's own items and images; set "
                            "torch.train's gather_embeddings: off, so each rank mines for its own rows"));
    const LabelMasks batch = label_masks(in, n);
    const torch::Tensor labels = batch_labels(in, n).to(torch::kCPU).contiguous();
    torch::Tensor ids = in.field("id").flatten();
    if (ids.is_floating_point() || ids.size(0) != n)
      throw DataError(cat(owner_, ": the batch's id must be an integer field with one entry per image (", ids.size(0), " ",
                          ids.scalar_type(), " for ", n, " images); the mining set keeps its items by id"));
    ids = ids.to(torch::kCPU).to(torch::kInt64).contiguous();
    if (!in.evaluating()) {
      remember(images.detach(), ids, labels);
      ++steps_;
      if ((steps_ - 1) % every_ == 0) refresh(in.model(), images.device());
    }
    const std::vector<std::int64_t> mined = mine(x, ids, labels);
    if (!in.evaluating()) last_mined_ = torch::tensor(mined, torch::kInt64).view({n, k_});

    // The mined items, each once, embedded with autograd from their stored images.
    std::vector<std::int64_t> rows;
    for (std::int64_t id : mined)
      if (id >= 0) rows.push_back(row_of_.at(id));
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    if (rows.empty()) return loss_->compute_tuple({x, x, batch}, nullptr);
    const torch::Tensor row_index = torch::tensor(rows, torch::kInt64);
    const torch::Tensor negatives = in.model().embed(images_.index_select(0, row_index).to(images.device())).to(x.dtype());
    const std::int64_t u = static_cast<std::int64_t>(rows.size());
    torch::Tensor own = torch::zeros({n, u}, torch::kBool);
    auto mark = own.accessor<bool, 2>();
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < k_; ++j)
        if (const std::int64_t id = mined[static_cast<std::size_t>(i * k_ + j)]; id >= 0)
          mark[i][std::lower_bound(rows.begin(), rows.end(), row_of_.at(id)) - rows.begin()] = true;
    own = own.to(x.device());
    const LabelMasks relation{torch::cat({batch.positive, torch::zeros_like(own)}, 1), torch::cat({batch.negative, own}, 1),
                              batch.labelled};
    return loss_->compute_tuple({x, torch::cat({x, negatives}, 0), relation}, nullptr);
  }

  NamedTensors state() const override {
    if (!snapshot_.defined()) return {};
    return {{"ids", ids_.narrow(0, 0, size_).clone()},
            {"labels", labels_.narrow(0, 0, size_).clone()},
            {"images", images_.narrow(0, 0, size_).clone()},
            {"indexed_ids", snapshot_ids_},
            {"indexed_labels", snapshot_labels_},
            {"indexed_embeddings", snapshot_},
            {"steps", torch::tensor({steps_, refreshed_at_}, torch::kInt64)},
            {"mined", last_mined_.defined() ? last_mined_ : torch::empty({0, k_}, torch::kInt64)}};
  }

  void load_state(const NamedTensors& state, const std::string& what) override {
    TensorMap m(state.begin(), state.end());
    if (m.empty()) return;
    for (const char* name : {"ids", "labels", "images", "indexed_ids", "indexed_labels", "indexed_embeddings", "steps", "mined"})
      if (!m.count(name)) throw DataError(cat(what, ": the mining set of ", owner_, " has no '", name, "'"));
    if (m.at("mined").dim() != 2 || m.at("mined").size(1) != k_)
      throw DataError(cat(what, ": its mined negatives are ", m.at("mined").sizes(), ", not k = ", k_, " per anchor, for ", owner_));
    size_ = m.at("ids").size(0);
    ids_ = m.at("ids").to(torch::kInt64).contiguous();
    labels_ = m.at("labels").to(torch::kInt64).contiguous();
    images_ = m.at("images").to(torch::kFloat32).contiguous();
    row_of_.clear();
    for (std::int64_t r = 0; r < size_; ++r) row_of_[ids_[r].item<std::int64_t>()] = r;
    snapshot_ids_ = m.at("indexed_ids").to(torch::kInt64).contiguous();
    snapshot_labels_ = m.at("indexed_labels").to(torch::kInt64).contiguous();
    snapshot_ = m.at("indexed_embeddings").to(torch::kFloat32).contiguous();
    steps_ = m.at("steps")[0].item<std::int64_t>();
    refreshed_at_ = m.at("steps")[1].item<std::int64_t>();
    last_mined_ = m.at("mined").to(torch::kInt64);
    build_index();
  }

 private:
  // Adds the batch's items to the set, or replaces their images and labels (capacity doubles).
  void remember(const torch::Tensor& images, const torch::Tensor& ids, const torch::Tensor& labels) {
    const torch::Tensor cpu = images.to(torch::kCPU).to(torch::kFloat32).contiguous();
    if (!images_.defined()) {
      std::vector<std::int64_t> shape = cpu.sizes().vec();
      shape[0] = std::max<std::int64_t>(1024, cpu.size(0));
      images_ = torch::zeros(shape, cpu.options());
      ids_ = torch::zeros({shape[0]}, torch::kInt64);
      labels_ = torch::zeros({shape[0]}, torch::kInt64);
    } else if (cpu.sizes().slice(1) != images_.sizes().slice(1)) {
      throw DataError(cat(owner_, ": images of ", cpu.sizes().slice(1), " for a mining set of ", images_.sizes().slice(1)));
    }
    const std::int64_t* id = ids.data_ptr<std::int64_t>();
    const std::int64_t* label = labels.data_ptr<std::int64_t>();
    for (std::int64_t i = 0; i < cpu.size(0); ++i) {
      auto [it, added] = row_of_.try_emplace(id[i], size_);
      if (added) {
        if (size_ == images_.size(0)) {
          images_ = torch::cat({images_, torch::zeros_like(images_)}, 0);
          ids_ = torch::cat({ids_, torch::zeros_like(ids_)});
          labels_ = torch::cat({labels_, torch::zeros_like(labels_)});
        }
        ++size_;
      }
      images_[it->second].copy_(cpu[i]);
      ids_.data_ptr<std::int64_t>()[it->second] = id[i];
      labels_.data_ptr<std::int64_t>()[it->second] = label[i];
    }
  }

  // Re-embeds the whole set with the current model and rebuilds the index over it.
  void refresh(Model& model, const torch::Device& device) {
    torch::NoGradGuard no_grad;
    model.set_training(false);
    std::vector<torch::Tensor> parts;
    for (std::int64_t start = 0; start < size_; start += embed_batch_)
      parts.push_back(model.embed(images_.narrow(0, start, std::min(embed_batch_, size_ - start)).to(device)).to(torch::kCPU));
    model.set_training(true);
    snapshot_ = unit_rows(torch::cat(parts, 0).to(torch::kFloat32)).contiguous();
    snapshot_ids_ = ids_.narrow(0, 0, size_).clone();
    snapshot_labels_ = labels_.narrow(0, 0, size_).clone();
    refreshed_at_ = steps_;
    build_index();
  }

  void build_index() {
    index_ = std::make_unique<NeighbourIndex>(static_cast<int>(snapshot_.size(1)), hnsw_ ? static_cast<int>(hnsw_m_) : 0,
                                              static_cast<int>(ef_search_));
    index_->add(snapshot_.size(0), snapshot_.data_ptr<float>());
  }

  // For each anchor, the ids of its k nearest indexed items of another label outside the batch
  // (-1 where fewer exist), row-major [n, k].
  std::vector<std::int64_t> mine(const torch::Tensor& x, const torch::Tensor& ids, const torch::Tensor& labels) const {
    const std::int64_t n = x.size(0);
    std::vector<std::int64_t> out(static_cast<std::size_t>(n * k_), -1);
    if (!index_ || index_->size() == 0) return out;
    const torch::Tensor q = unit_rows(x.detach().to(torch::kCPU).to(torch::kFloat32)).contiguous();
    if (q.size(1) != index_->dim())
      throw DataError(cat(owner_, ": embeddings of ", q.size(1), " dims for an index of ", index_->dim()));
    const std::int64_t total = index_->size();
    std::unordered_set<std::int64_t> in_batch(ids.data_ptr<std::int64_t>(), ids.data_ptr<std::int64_t>() + n);
    const std::int64_t* label = labels.data_ptr<std::int64_t>();
    const std::int64_t* indexed_id = snapshot_ids_.data_ptr<std::int64_t>();
    const std::int64_t* indexed_label = snapshot_labels_.data_ptr<std::int64_t>();
    // Enough candidates for k of another label in most cases; all of them when that falls short.
    std::int64_t want = std::min(total, 4 * k_ + n + 16);
    for (;;) {
      std::vector<std::int64_t> found(static_cast<std::size_t>(n * want));
      index_->search(n, q.data_ptr<float>(), want, found.data());
      bool short_of_k = false;
      for (std::int64_t i = 0; i < n; ++i) {
        if (label[i] < 0) continue;
        std::int64_t taken = 0;
        for (std::int64_t j = 0; j < want && taken < k_; ++j) {
          const std::int64_t r = found[static_cast<std::size_t>(i * want + j)];
          if (r < 0 || indexed_label[r] < 0 || indexed_label[r] == label[i] || in_batch.count(indexed_id[r])) continue;
          out[static_cast<std::size_t>(i * k_ + taken++)] = indexed_id[r];
        }
        short_of_k = short_of_k || taken < k_;
      }
      if (!short_of_k || want >= total) return out;
      want = total;
      std::fill(out.begin(), out.end(), -1);
    }
  }

  std::unique_ptr<LabelBatchLoss> loss_;
  std::int64_t every_, k_;
  bool hnsw_;
  std::int64_t hnsw_m_, ef_search_, embed_batch_;
  std::string owner_;
  // The mining set: rows [0, size_) of images_, ids_, labels_ (capacity beyond), row by id.
  torch::Tensor images_, ids_, labels_;
  std::int64_t size_ = 0;
  std::unordered_map<std::int64_t, std::int64_t> row_of_;
  // What the index holds: the set's ids, labels and normalised embeddings at the last refresh.
  torch::Tensor snapshot_, snapshot_ids_, snapshot_labels_;
  std::unique_ptr<NeighbourIndex> index_;
  std::int64_t steps_ = 0, refreshed_at_ = 0;
  torch::Tensor last_mined_;  // [n, k] ids mined at the last training step (-1: none)
};

}  // namespace

ComponentType index_hard_negatives_type() {
  return ComponentTypeBuilder("torch.index_hard_negatives", "loss")
      .doc("Dataset-wide hard negatives from a nearest-neighbour index (faiss), refreshed every `every` steps (ANCE's "
           "rule): the items seen so far are kept by id; every `every` steps the current model re-embeds them (no "
           "autograd) and the index is rebuilt; each step every anchor takes its k nearest indexed items of another "
           "label (not in the batch), embedded with autograd, as extra negatives of the wrapped loss, beside the "
           "batch's own pairs. The set and the index are checkpointed with the trainer (docs/torch.md).")
      .param(Param::component("loss", "loss").doc("the loss over the batch and its mined negatives: torch.batch_triplet_margin "
                                                   "or torch.batch_contrastive (no miner, no swap)"))
      .param(Param::integer("every").default_value(100).min(1).doc("steps between refreshes of the index (N)"))
      .param(Param::integer("k").default_value(4).min(1).doc("mined negatives per anchor"))
      .param(Param::choice("index", {"flat", "hnsw"}).default_value("flat").doc(
          "flat: exact search (faiss IndexFlatL2); hnsw: approximate (IndexHNSWFlat)"))
      .param(Param::integer("hnsw_m").default_value(32).min(2).doc("hnsw: neighbours per node (M)"))
      .param(Param::integer("ef_search").default_value(64).min(1).doc("hnsw: candidates searched per query (efSearch)"))
      .param(Param::integer("embed_batch").default_value(256).min(1).doc("rows per forward pass when re-embedding the set"))
      .consumes("batch", "image: any[N,...], id: any[N], label: any[N]")
      .consumes("outputs", "embedding: f32[N,D]")
      .check([](ContractContext& c) {
        ContractInputs inputs = c.inputs();
        inputs["reference"] = PortSchema::any();
        const ComponentContract* inner = c.part("loss", inputs);
        if (inner && !inner->type.empty() && !inner->consumes.count("reference"))
          c.error(cat("loss ", inner->type, " does not compare a batch with reference embeddings; wrap a label-batch "
                      "loss (torch.batch_contrastive, torch.batch_triplet_margin)"));
        const Value& loss = c.params().value("loss");
        if (loss.get("miner")) c.error("the wrapped loss has a miner of its own; torch.index_hard_negatives is its miner");
        if (const Value* swap = loss.get("swap"); swap && swap->is_boolean() && swap->as_boolean())
          c.error("the wrapped loss's swap reads distances between mined rows as batch rows; use swap: false");
      })
      .create<IndexHardNegatives>();
}

}  // namespace embedflow::torchfam
