// Torch-free facts about the family's components that graph-load checks need: which batch fields
// each loss consumes, the embedding size a model spec implies, and the spec <-> text round trip
// used by model snapshots and checkpoints.
#pragma once

#include <embedflow/embedflow.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace embedflow::torchfam {

// Batch field groups (docs/torch.md and the image/torch contract).
inline const std::vector<std::string> kPairFields{"a_image", "b_image", "pair_label"};
inline const std::vector<std::string> kTripletFields{"anchor_image", "positive_image", "negative_image"};
// A label batch gives pair relations as class labels or as image.batch_pairs' matrix
// pair_labels f32[B,B] (1 similar, 0 dissimilar, < 0 or NaN unknown); "a|b" means either field.
inline const std::vector<std::string> kLabelFields{"image", "label|pair_labels"};
// Every field that holds model inputs, in the order a joint forward pass concatenates them.
inline const std::vector<std::string> kImageFields{"image", "a_image", "b_image", "anchor_image", "positive_image",
                                                   "negative_image"};

// Fields a loss spec ({type: torch.contrastive, ...}) needs in every batch ("a|b": one of them);
// for torch.sum the union of its terms. Unknown types (another family's losses) need nothing
// we know of.
std::vector<std::string> loss_fields(const Value& spec);

// The embedding dimension a model spec produces, or -1 when only a forward pass can tell
// (TorchScript, identity).
std::int64_t embedding_dim_of(const Value& spec);

// A validated spec as one line of flow YAML (Value::str) and back.
std::string spec_to_text(const Value& spec);
Value spec_from_text(const std::string& text);

}  // namespace embedflow::torchfam
