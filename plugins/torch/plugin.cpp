// The torch plugin family: LibTorch models, losses, optimizers and schedules as components, and
// the torch.train and torch.embed nodes (docs/torch.md). This file compiles without LibTorch.
#include <torch/version.h>

#include "torch_family.hpp"

namespace {
void register_types(embedflow::Registry& r) {
  using namespace embedflow::torchfam;
  r.add(train_type());
  r.add(embed_type());
  for (auto& c : model_components()) r.add(std::move(c));
  for (auto& c : loss_components()) r.add(std::move(c));
  for (auto& c : optimizer_components()) r.add(std::move(c));
  for (auto& c : schedule_components()) r.add(std::move(c));
  // Context Embedding Networks: LibTorch code, named after the crowd family they serve.
  for (auto& c : cen_components()) r.add(std::move(c));
  r.add(cen_score_type());
  r.add(cen_synthesize_type());
}
}  // namespace

EMBEDFLOW_PLUGIN("torch", "0.1.0", "LibTorch " TORCH_VERSION, register_types)
