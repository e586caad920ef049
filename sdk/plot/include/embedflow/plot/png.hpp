// Pixels a node already has (thumbnails, mosaics) written as a PNG through the charts' writer:
// all or nothing (a temporary renamed into place), parent directory created.
#pragma once

#include <cstdint>
#include <string>

namespace embedflow {

// `pixels`: u8, height x width x channels, row-major (HWC); channels 1 (grey) or 3 (RGB order).
// Throws embedflow::Error naming the path when it cannot be encoded or written, or for other
// channel counts.
void save_png(const std::string& path, const std::uint8_t* pixels, int height, int width, int channels);

}  // namespace embedflow
