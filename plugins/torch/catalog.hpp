// Torch-free facts the family's declarations and load-time checks share: the batch field groups
// of the image/torch contract, the model input a batch implies, the embedding size a resolved
// component contract gives, and the spec <-> text round trip used by model snapshots and
// checkpoints. What each component consumes and produces is declared beside its class
// (ComponentTypeBuilder::consumes / produces, embedflow/component.hpp).
#pragma once

#include <embedflow/embedflow.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace embedflow::torchfam {

// Every field that holds model inputs, in the order a joint forward pass concatenates them.
inline const std::vector<std::string> kImageFields{"image", "a_image", "b_image", "anchor_image", "positive_image",
                                                   "negative_image"};

// The model input ("in": image: f32[N,C,H,W]) implied by the first image field of `batch`: u8
// images [N,H,W,C] are read as f32 [N,C,H,W] (image_input). Any when the batch is any or has no
// image field.
PortSchema model_input_schema(const PortSchema& batch);

// Dim 1 of the produced `embedding` (or of `field`): fixed when the contract says, else unknown.
Dim produced_dim(const PortSchema& produces, const std::string& field = "embedding");
// The size a row of the model input's first field flattens to (dims after the batch dim), or -1
// when a dim is not fixed.
std::int64_t flattened_size(const PortSchema& input);
// A field [N, dim] with the batch dim N.
FieldSchema embedding_field(const std::string& name, Dim dim);

// A validated spec as one line of flow YAML (Value::str) and back (through the SDK's YAML
// parser); DataError naming `what` when the text is not a spec.
std::string spec_to_text(const Value& spec);
Value spec_from_text(const std::string& text, const std::string& what = "model spec");

}  // namespace embedflow::torchfam
