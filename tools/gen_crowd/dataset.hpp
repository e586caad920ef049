// Image datasets with known attributes for the crowd simulator: rendered shapes, or
// Fashion-MNIST with attributes derived from its labels and pixels.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gen_crowd {

struct Attribute {
  std::string name;
  std::vector<std::string> values;
};

struct Dataset {
  std::string name;                 // "shapes" | "fashion-mnist"
  int height = 0, width = 0, channels = 0;
  std::vector<Attribute> attributes;
  int label_attribute = 0;          // which attribute is written as `label`
  std::vector<std::int64_t> ids;
  std::vector<std::vector<int>> values;  // [image][attribute]: value index
  std::vector<std::uint8_t> pixels;      // images * H * W * C, RGB order for colour

  std::size_t size() const { return ids.size(); }
  const std::uint8_t* image(std::size_t i) const {
    return pixels.data() + i * static_cast<std::size_t>(height * width * channels);
  }
};

// Renders `n` colour images of `size` x `size` pixels with OpenCV. Attributes, each drawn
// uniformly per image: shape (ellipse, rectangle, triangle), colour (red, green, blue, yellow),
// size (small, medium, large), orientation (0, 45, 90, 135 degrees), fill (solid, outline).
// Each image also gets position, angle and colour jitter and background noise, so no two images
// are identical. Image i depends only on (seed, i): fewer images are a prefix of more.
Dataset render_shapes(std::int64_t n, int size, std::uint64_t seed);

// The first `n` images of a Fashion-MNIST split (IDX .gz files in `dir`), ids = their index in
// the file (as image.idx_reader numbers them). Attributes: class (the 10 labels), brightness
// (mean intensity of the ink pixels, > 32) and ink (fraction of ink pixels), each binned into
// terciles of the selected images: dark/medium/bright and small/medium/large.
Dataset load_fashion_mnist(const std::string& dir, const std::string& split, std::int64_t n);

}  // namespace gen_crowd
