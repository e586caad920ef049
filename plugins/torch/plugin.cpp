// The torch plugin family: LibTorch models, losses, optimizers and schedules as components, and
// the torch.train and torch.embed nodes (docs/torch.md). This file compiles without LibTorch.
//
// register_types is the family's one list of types. It is part of the family's library rather
// than of the plugin module so that the test hooks (evaluate_loss) and the tests can fill a
// registry with it; plugin_entry.cpp hands it to the engine.
#include "torch_types.hpp"

namespace embedflow::torchfam {

void register_types(Registry& r) {
  r.add(train_type());
  r.add(embed_type());
  r.add(export_type());
  // models
  r.add(small_cnn_type());
  r.add(resnet18_type());
  r.add(resnet50_type());
  r.add(mlp_type());
  r.add(identity_type());
  r.add(conv_ae_type());
  r.add(conv_vae_type());
  r.add(torchscript_type());
  r.add(concat_type());
  r.add(blend_type());
  // losses
  r.add(contrastive_type());
  r.add(dual_margin_contrastive_type());
  r.add(triplet_margin_type());
  r.add(batch_hard_triplet_type());
  r.add(semi_hard_triplet_type());
  r.add(all_pairs_contrastive_type());
  r.add(reconstruction_type());
  r.add(kl_divergence_type());
  r.add(l2_embedding_type());
  r.add(sum_type());
  r.add(batch_contrastive_type());
  r.add(batch_triplet_margin_type());
  r.add(cross_batch_memory_type());
  r.add(index_hard_negatives_type());
  // miners
  r.add(batch_easy_hard_miner_type());
  r.add(batch_hard_miner_type());
  r.add(multi_similarity_miner_type());
  r.add(pair_margin_miner_type());
  r.add(triplet_margin_miner_type());
  r.add(arcface_type());
  r.add(cosface_type());
  r.add(proxy_anchor_type());
  r.add(proxy_nca_type());
  r.add(multi_similarity_type());
  r.add(circle_type());
  r.add(ntxent_type());
  r.add(supcon_type());
  r.add(lifted_structure_type());
  r.add(generalized_lifted_structure_type());
  r.add(margin_loss_type());
  r.add(n_pairs_type());
  // optimizers and lr schedules
  r.add(sgd_type());
  r.add(adam_type());
  r.add(adamw_type());
  r.add(constant_type());
  r.add(step_type());
  r.add(cosine_type());
  r.add(warmup_type());
}

}  // namespace embedflow::torchfam
