// The torch plugin's entry point: the engine calls register_types (plugin.cpp) when it loads
// libembedflow_torch.so.
#include <torch/version.h>

#include "torch_types.hpp"

EMBEDFLOW_PLUGIN("torch", "0.1.0", "LibTorch " TORCH_VERSION, embedflow::torchfam::register_types)
