// The torch family's node and component types, declared without LibTorch so plugin.cpp and the
// tests compile without it (a LibTorch translation unit costs ~50 s here). plugin.cpp registers
// each one explicitly.
#pragma once

#include <embedflow/embedflow.hpp>

#include <string>
#include <vector>

namespace embedflow::torchfam {

std::vector<ComponentType> model_components();      // kind "model"     (models.cpp)
std::vector<ComponentType> loss_components();       // kind "loss"      (losses.cpp)
std::vector<ComponentType> optimizer_components();  // kind "optimizer" (trainer_node.cpp)
std::vector<ComponentType> schedule_components();   // kind "schedule"  (schedule.cpp)
NodeType train_type();                              // torch.train      (trainer_node.cpp)
NodeType embed_type();                              // torch.embed      (embed_node.cpp)
// Context Embedding Networks (docs/crowd.md), named crowd.* beside crowd.grid_reader:
std::vector<ComponentType> cen_components();        // crowd.cen, crowd.id_table (models), crowd.cen_loss (cen.cpp)
NodeType cen_score_type();                          // crowd.cen_score  (cen_score.cpp)
NodeType cen_synthesize_type();                     // crowd.cen_synthesize (cen_synth.cpp)

// A registry holding only this family's component types. torch.embed rebuilds a model from the
// spec text of a snapshot or checkpoint with it (nodes do not see the engine's registry).
const Registry& family_registry();

// Sets LibTorch's intra-op thread count from a node's `threads` parameter (0: the graph's
// --threads). LibTorch here starts with one thread, so every torch node calls this in open().
void set_torch_threads(std::int64_t threads, int graph_threads, const std::string& node);

// Test and documentation hook: evaluates a loss component (spec as written in YAML) on a batch
// whose image fields already hold embeddings f32[B,D] (the model is the identity). Returns the
// loss and, when `grads` is given, d loss / d field for each embedding field, as f32 arrays.
double evaluate_loss(const Value& spec, const Record& batch, Record* grads = nullptr);

// Test hook for crowd.cen_loss (spec as written in YAML): its value on a batch that holds the
// embeddings and activations directly: x_a, x_b, attributes f32[B,K], pair_label f32[B].
double evaluate_cen_loss(const Value& spec, const Record& batch);

}  // namespace embedflow::torchfam
