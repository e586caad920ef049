// TorchScript export of a trained model (docs/torch.md, "Exporting a model"): torch.train's
// `export` parameter and the torch.export node (the `embedflow export` command) write a
// TorchScript module whose forward(x) is what torch.embed computes on x.
//
// The module is the model traced on a zero batch of the training input size, with the weights
// torch.embed would use (a checkpoint's `model` entry; at the end of training, the final
// snapshot's: the best evaluation's with validation, the weight average with ema_decay). Its
// forward takes f32 [N,C,H,W] images with values in [0,1] (what torch.embed reads: u8 images
// divided by 255, channels in the order the images came, RGB for the image family's readers),
// subtracts `mean` and divides by `std` when they were given, and returns the embeddings
// f32 [N,D], L2-normalised when the model normalises. Its parameters keep embedflow's (and
// torchvision's, for the ResNets) names, nested as submodules.
//
// What the file says about itself, for a Python user:
//   extra file "embedflow.json": {"format": "embedflow-torchscript/1", "input_size": [C,H,W],
//     "channel_order": "RGB" or "grey", "value_range": [0,1], "mean": [...], "std": [...],
//     "embedding_dim": D, "normalized": bool, "spec": the model spec (flow YAML), "step": N,
//     "source": what the weights came from}
//   attributes on the module: input_size (List[int]), mean, std (List[float]), embedding_dim
//     (int), channel_order (str), spec (str).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "model.hpp"

namespace embedflow::torchfam {

inline constexpr const char* kTorchScriptExportFormat = "embedflow-torchscript/1";

struct ExportOptions {
  std::vector<std::int64_t> input_size;  // C, H, W
  std::vector<double> mean, std;         // per channel (or one for all); empty: no normalisation
  std::string source;                    // what the weights came from (a checkpoint file, "torch.train node 'x'")
  std::int64_t step = 0;
};

// Builds the model from `spec_text` through `registry`, loads the weights from `weights` (a
// checkpoint or snapshot archive; `what` names it in errors), traces its embedding and saves the
// module to `out` (to a temporary name, then renamed). Returns the embedding size D.
std::int64_t export_torchscript(const std::string& spec_text, torch::serialize::InputArchive& weights,
                                const std::string& what, const ExportOptions& options, const Registry& registry,
                                std::uint64_t seed, const std::filesystem::path& out);

// ConfigError unless `values` has 0, 1 or `channels` entries (`name`: mean or std), and std has
// no zero.
void check_export_normalization(const std::vector<double>& mean, const std::vector<double>& std,
                                std::int64_t channels, const std::string& owner);

}  // namespace embedflow::torchfam
