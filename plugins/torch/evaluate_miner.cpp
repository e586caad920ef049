// mine_indices (torch_types.hpp), the test and documentation hook that runs a miner of this
// family on given embeddings, with the identity as the model.
#include "bridge.hpp"
#include "mining.hpp"
#include "torch_types.hpp"

namespace embedflow::torchfam {

Record mine_indices(const Value& spec, const Record& batch) {
  Registry types;
  register_types(types);
  std::unique_ptr<Miner> miner = component_cast<Miner>(types.instantiate(spec, 1, "mine_indices"), cat(spec.str(), " as a miner"));
  std::unique_ptr<Model> identity = build_model(Value::map({{"type", Value::string("torch.identity")}}), 1, "mine_indices", types);
  StepInputs in(*identity, batch, torch::kCPU, "mine_indices");
  torch::Tensor x = in.field("image").to(torch::kFloat32);
  const IndicesTuple t = miner->mine({x, x, label_masks(in, x.size(0))});
  Record r;
  auto put = [&](const char* name, const torch::Tensor& idx) { r.set(name, to_array(idx.to(torch::kInt64).contiguous())); };
  if (t.triplets) {
    put("a", t.a1);
    put("p", t.p);
    put("n", t.n);
  } else {
    put("a1", t.a1);
    put("p", t.p);
    put("a2", t.a2);
    put("n", t.n);
  }
  return r;
}

}  // namespace embedflow::torchfam
