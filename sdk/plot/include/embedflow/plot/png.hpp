// Pixels a node already has (thumbnails, mosaics) written as a PNG through the charts' writer:
// all or nothing (a temporary renamed into place), parent directory created.
#pragma once

#include <cstdint>
#include <string>

namespace embedflow {

// The order of a 3-channel pixel's bytes: RGB (tensors, decoded images) or BGR (pixels a node
// drew with OpenCV, whose native order it is).
enum class PixelOrder { rgb, bgr };

// `pixels`: u8, height x width x channels, row-major (HWC); channels 1 (grey) or 3 (in `order`).
// Every PNG a node writes goes through here, so all of them are encoded alike and written all or
// nothing. Throws embedflow::Error naming the path when it cannot be encoded or written, or for
// other channel counts.
void save_png(const std::string& path, const std::uint8_t* pixels, int height, int width, int channels,
              PixelOrder order = PixelOrder::rgb);

}  // namespace embedflow
