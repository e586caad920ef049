// A mosaic of images and their reconstructions as a PNG (torch.embed's `mosaic`): torch-free, so
// it compiles without LibTorch's headers.
#pragma once

#include <cstdint>
#include <string>

namespace embedflow::torchfam {

// Writes n images and their reconstructions, f32 [n,C,H,W] each (C = 1 grey or 3 RGB, values
// clamped to [0,1]), as a PNG: rows of `cols` originals, each followed by a row of their
// reconstructions, 2-pixel grey gaps, every pixel repeated `scale` times. DataError naming
// `path` when it cannot be written or C is neither 1 nor 3.
void write_reconstruction_mosaic(const std::string& path, const float* originals, const float* reconstructions,
                                 std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t cols,
                                 std::int64_t scale);

}  // namespace embedflow::torchfam
