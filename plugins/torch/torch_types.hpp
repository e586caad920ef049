// The torch family's node and component types, declared without LibTorch so plugin.cpp and the
// tests compile without it (a LibTorch translation unit costs ~50 s here). Each type is declared
// by a function in the file of its class; plugin.cpp registers each one explicitly.
#pragma once

#include <embedflow/embedflow.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace embedflow::torchfam {

// Models (kind "model")
ComponentType small_cnn_type();     // torch.small_cnn    small_cnn.cpp
ComponentType resnet18_type();      // torch.resnet18     resnet.cpp
ComponentType resnet50_type();      // torch.resnet50     resnet.cpp
ComponentType mlp_type();           // torch.mlp          mlp.cpp
ComponentType identity_type();      // torch.identity     mlp.cpp
ComponentType conv_ae_type();       // torch.conv_ae      autoencoders.cpp
ComponentType conv_vae_type();      // torch.conv_vae     autoencoders.cpp
ComponentType torchscript_type();   // torch.torchscript  torchscript.cpp
ComponentType concat_type();        // torch.concat       composites.cpp
ComponentType blend_type();         // torch.blend        composites.cpp

// Losses (kind "loss")
ComponentType contrastive_type();              // torch.contrastive              pair_losses.cpp
ComponentType dual_margin_contrastive_type();  // torch.dual_margin_contrastive  pair_losses.cpp
ComponentType triplet_margin_type();           // torch.triplet_margin           triplet_losses.cpp
ComponentType batch_hard_triplet_type();       // torch.batch_hard_triplet       batch_losses.cpp
ComponentType semi_hard_triplet_type();        // torch.semi_hard_triplet        batch_losses.cpp
ComponentType all_pairs_contrastive_type();    // torch.all_pairs_contrastive    batch_losses.cpp
ComponentType reconstruction_type();           // torch.reconstruction           autoencoder_losses.cpp
ComponentType kl_divergence_type();            // torch.kl_divergence            autoencoder_losses.cpp
ComponentType l2_embedding_type();             // torch.l2_embedding             combined_losses.cpp
ComponentType sum_type();                      // torch.sum                      combined_losses.cpp
ComponentType batch_contrastive_type();        // torch.batch_contrastive        label_batch_losses.cpp
ComponentType batch_triplet_margin_type();     // torch.batch_triplet_margin     label_batch_losses.cpp
ComponentType cross_batch_memory_type();       // torch.cross_batch_memory       cross_batch_memory.cpp
ComponentType index_hard_negatives_type();     // torch.index_hard_negatives     index_hard_negatives.cpp

// Miners (kind "miner", miners.cpp)
ComponentType batch_easy_hard_miner_type();    // torch.batch_easy_hard_miner
ComponentType batch_hard_miner_type();         // torch.batch_hard_miner
ComponentType multi_similarity_miner_type();   // torch.multi_similarity_miner
ComponentType pair_margin_miner_type();        // torch.pair_margin_miner
ComponentType triplet_margin_miner_type();     // torch.triplet_margin_miner
// Losses as pytorch-metric-learning computes them (docs/torch.md, "Losses from pytorch-metric-learning")
ComponentType arcface_type();                       // torch.arcface                       margin_softmax_losses.cpp
ComponentType cosface_type();                       // torch.cosface                       margin_softmax_losses.cpp
ComponentType proxy_anchor_type();                  // torch.proxy_anchor                  proxy_losses.cpp
ComponentType proxy_nca_type();                     // torch.proxy_nca                     proxy_losses.cpp
ComponentType multi_similarity_type();              // torch.multi_similarity              pair_weighting_losses.cpp
ComponentType circle_type();                        // torch.circle                        pair_weighting_losses.cpp
ComponentType ntxent_type();                        // torch.ntxent                        contrastive_softmax_losses.cpp
ComponentType supcon_type();                        // torch.supcon                        contrastive_softmax_losses.cpp
ComponentType lifted_structure_type();              // torch.lifted_structure              lifted_structure_losses.cpp
ComponentType generalized_lifted_structure_type();  // torch.generalized_lifted_structure  lifted_structure_losses.cpp
ComponentType margin_loss_type();                   // torch.margin                        margin_loss.cpp
ComponentType n_pairs_type();                       // torch.n_pairs                       n_pairs_loss.cpp

// Optimizers (kind "optimizer", optimizers.cpp) and lr schedules (kind "schedule", schedule.cpp)
ComponentType sgd_type();       // torch.sgd
ComponentType adam_type();      // torch.adam
ComponentType adamw_type();     // torch.adamw
ComponentType constant_type();  // torch.constant
ComponentType step_type();      // torch.step
ComponentType cosine_type();    // torch.cosine
ComponentType warmup_type();    // torch.warmup

// Nodes
NodeType train_type();  // torch.train  train.cpp
NodeType embed_type();  // torch.embed  embed.cpp
NodeType export_type();  // torch.export export.cpp

// Every type above, one r.add line each (plugin.cpp): the plugin registers them with the engine
// through it. Nodes that rebuild a model from a snapshot's spec text use the graph's registry
// (NodeContext::registry), which holds every loaded family's types.
void register_types(Registry& r);

// Test and documentation hook: evaluates a loss component (spec as written in YAML, built from
// this family's types) on a batch whose image fields already hold embeddings f32[B,D] (the
// model is the identity). Returns the
// loss and, when `grads` is given, d loss / d field for each embedding field, as f32 arrays.
// Fields "loss.<name>" set the loss's learnable tensor <name> (proxies, class_weights, boundary)
// before it runs, and their gradients come back under the same names.
double evaluate_loss(const Value& spec, const Record& batch, Record* grads = nullptr);

// The same hook for a loss kept across calls, as torch.train keeps it across steps (a
// torch.cross_batch_memory's queue fills step by step).
class LossSequence {
 public:
  explicit LossSequence(const Value& spec);
  ~LossSequence();
  // One step on `batch`: the loss and, with `grads`, d loss / d field for each embedding field.
  double step(const Record& batch, Record* grads = nullptr);
  // The loss of `batch` as validation's loss metric computes it: a loss with state leaves it unchanged.
  double evaluate(const Record& batch);
  // The loss's state (Loss::state) as arrays: a cross-batch memory's embeddings, labels and queue
  // (next slot, filled); empty for a loss without state.
  Record state() const;
  // Restores a state() (Loss::load_state), as a resume from a checkpoint does.
  void load_state(const Record& state);

 private:
  double run(const Record& batch, Record* grads, bool evaluating);

  struct Parts;
  std::unique_ptr<Parts> parts_;
};

// Test and documentation hook: runs a miner component (spec as in YAML) on a label batch whose
// `image` holds embeddings f32[B,D] (with `label` or `pair_labels`). Returns its indices tuple
// as i64 fields: a1, p, a2, n for pairs; a, p, n for triplets.
Record mine_indices(const Value& spec, const Record& batch);

}  // namespace embedflow::torchfam
