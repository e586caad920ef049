// The loss interface of the torch family (components of kind "loss") and the batch view a loss
// computes on. Each loss reads the fields it needs from the batch (pair, triplet or image+label
// fields: catalog.hpp) and asks StepInputs for embeddings; StepInputs runs the model once per
// step for all requested image fields (concatenated along the batch, so batch norm sees the whole
// step) and memoises the result, so the terms of a torch.sum share one forward pass.
#pragma once

#include "model.hpp"

namespace embedflow::torchfam {

class StepInputs {
 public:
  StepInputs(Model& model, const Record& batch, torch::Device device, std::string loss_name = "");
  bool has(const std::string& field) const { return record_.find(field) != nullptr; }
  // The field as a tensor on the device (image fields: f32 [N,C,H,W]; u8 [N,H,W,C] images are
  // converted and scaled by 1/255). DataError naming the field and the batch's fields if absent.
  torch::Tensor field(const std::string& name);
  // Embeddings of image fields, one forward pass for those not yet computed this step.
  std::vector<torch::Tensor> embed(const std::vector<std::string>& fields);
  torch::Tensor embed_one(const std::string& field) { return embed(std::vector<std::string>{field}).front(); }
  // Sets a field's tensor directly (tests feed embeddings that require grad through it).
  void provide(const std::string& name, torch::Tensor t);
  // A named model output of an image field ("reconstruction", "mu", "logvar", "latent": see the
  // model's forward_all), from the same forward pass as embed(). DataError naming the outputs the
  // model gives when it has no such output (e.g. logvar from a plain autoencoder).
  torch::Tensor output(const std::string& field, const std::string& name);
  // Sets a model output directly (tests); the name "embedding" also sets the field's embedding.
  void provide_output(const std::string& field, const std::string& name, torch::Tensor t);
  // Embeddings computed so far this step, by field name.
  const TensorMap& embeddings() const { return embeddings_; }
  Model& model() { return model_; }
  const Record& record() const { return record_; }
  std::int64_t batch_size() const;
  // An evaluation (validation's loss metric) rather than a training step: a loss that keeps state
  // across steps computes as usual but leaves its state unchanged.
  bool evaluating() const { return evaluating_; }
  void set_evaluating(bool on) { evaluating_ = on; }

 private:
  Model& model_;
  const Record& record_;
  torch::Device device_;
  std::string loss_name_;
  TensorMap tensors_, embeddings_;
  std::map<std::string, TensorMap> outputs_;  // per image field: the model's named outputs
  bool evaluating_ = false;
};

class Loss : public Component {
 public:
  ~Loss() override;
  // The scalar loss of one batch (a 0-dim tensor that carries the autograd graph).
  virtual torch::Tensor compute(StepInputs& in) = 0;
  // What a loss keeps from one step to the next (torch.cross_batch_memory's queue), which
  // torch.train's checkpoints carry and a resume restores; empty for a loss without state.
  virtual NamedTensors state() const { return {}; }
  // Restores state() of a checkpoint (`what` names it in errors).
  virtual void load_state(const NamedTensors& state, const std::string& what) {
    (void)state;
    (void)what;
  }
  // Learnable tensors the loss owns (proxies, class weights, a learnable margin), each a leaf that
  // requires grad, under a stable name: torch.train optimises them with the model's parameters
  // and checkpoints them beside the model. Default: none.
  virtual NamedTensors parameters() { return {}; }
  // Moves those tensors to the device the model trains on, before the optimizer sees them.
  virtual void to(const torch::Device& device) { (void)device; }
};

// Converts an image field to model input: u8 [N,H,W,C] -> f32 [N,C,H,W] / 255, other dtypes to f32.
torch::Tensor image_input(const torch::Tensor& t);

}  // namespace embedflow::torchfam
