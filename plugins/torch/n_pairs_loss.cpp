// torch.n_pairs: the N-pair loss of Sohn 2016 on a label batch (image, label), as
// pytorch-metric-learning's NPairsLoss: one (anchor, positive) pair per label that has two rows
// in the batch (its first two rows, by label order as PML's np.unique picks them), the similarity
// matrix of anchors and positives (dot products of the normalised embeddings: PML's
// DotProductSimilarity normalises by default), and the softmax cross entropy of each anchor
// against its own positive; mean over the pairs. Rows with label < 0 are left out.
#include <map>

#include "pml_formulas.hpp"
#include "torch_types.hpp"

namespace embedflow::torchfam {
namespace {

constexpr const char* kNeeds = "images with class labels (image, label), one anchor and positive per class";

class NPairs final : public Loss {
 public:
  explicit NPairs(const ComponentContext&) {}
  torch::Tensor compute(StepInputs& in) override {
    if (is_pair_batch(in)) throw DataError(needs_class_labels_reason("torch.n_pairs", kNeeds));
    torch::Tensor x = in.embed_one("image");
    torch::Tensor y = in.field("label").flatten();
    if (y.size(0) != x.size(0)) throw DataError(cat("torch.n_pairs: label has ", y.size(0), " entries for ", x.size(0), " images"));
    if (y.is_floating_point()) throw DataError("torch.n_pairs: label must be an integer field (i64 or i32)");
    y = y.to(torch::kCPU).to(torch::kInt64).contiguous();
    // The first two rows of each label, labels in ascending order.
    std::map<std::int64_t, std::vector<std::int64_t>> rows;
    const std::int64_t* v = y.data_ptr<std::int64_t>();
    for (std::int64_t i = 0; i < y.size(0); ++i)
      if (v[i] >= 0 && rows[v[i]].size() < 2) rows[v[i]].push_back(i);
    std::vector<std::int64_t> anchors, positives;
    for (const auto& [label, r] : rows)
      if (r.size() == 2) {
        anchors.push_back(r[0]);
        positives.push_back(r[1]);
      }
    if (anchors.empty()) return zero_like_graph(x);
    auto index = [&](const std::vector<std::int64_t>& idx) {
      return torch::tensor(idx, torch::TensorOptions().dtype(torch::kInt64)).to(x.device());
    };
    torch::Tensor s = cosine_matrix(x.index_select(0, index(anchors)), x.index_select(0, index(positives)));
    torch::Tensor targets = torch::arange(static_cast<std::int64_t>(anchors.size()), s.options().dtype(torch::kInt64));
    return torch::nn::functional::cross_entropy(s, targets);
  }
};

}  // namespace

ComponentType n_pairs_type() {
  ComponentTypeBuilder b("torch.n_pairs", "loss");
  rejects_pair_batches(b, "torch.n_pairs", kNeeds);
  return b.doc("N-pair loss on a label batch (image, label), as pytorch-metric-learning's NPairsLoss: one (anchor, positive) "
           "pair per label with two rows in the batch (its first two), and the mean over the pairs of the softmax cross "
           "entropy of each anchor's similarities to all positives (normalised dot products, no temperature) against "
           "its own. Sohn 2016.")
      .consumes("batch", "image: any[N,...], label: any[N]")
      .consumes("outputs", "embedding: f32[N,D]")
      .create<NPairs>();
}

}  // namespace embedflow::torchfam
