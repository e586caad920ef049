#include "dataset.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <opencv2/imgproc.hpp>
#include <zlib.h>

#include "prng.hpp"

namespace gen_crowd {

namespace {

constexpr double kPi = 3.14159265358979323846;

// Base colours in RGB; each image moves every channel by up to +-20.
const int kColours[4][3] = {{215, 40, 40}, {40, 165, 60}, {45, 85, 215}, {225, 195, 35}};
const double kSizes[3] = {0.42, 0.62, 0.84};  // long axis, as a fraction of the image side

std::vector<cv::Point> polygon(const std::vector<cv::Point2d>& local, cv::Point2d centre, double angle_deg, int shift) {
  const double a = angle_deg * kPi / 180.0, c = std::cos(a), s = std::sin(a);
  std::vector<cv::Point> pts;
  for (const cv::Point2d& p : local) {
    // Image y grows downwards, so a positive angle turns counter-clockwise on screen.
    const double x = centre.x + c * p.x + s * p.y;
    const double y = centre.y - s * p.x + c * p.y;
    pts.emplace_back(static_cast<int>(std::lround(x * (1 << shift))), static_cast<int>(std::lround(y * (1 << shift))));
  }
  return pts;
}

}  // namespace

Dataset render_shapes(std::int64_t n, int size, std::uint64_t seed) {
  Dataset d;
  d.name = "shapes";
  d.height = d.width = size;
  d.channels = 3;
  d.attributes = {{"shape", {"ellipse", "rectangle", "triangle"}},
                  {"colour", {"red", "green", "blue", "yellow"}},
                  {"size", {"small", "medium", "large"}},
                  {"orientation", {"0", "45", "90", "135"}},
                  {"fill", {"solid", "outline"}}};
  d.label_attribute = 0;
  const std::size_t bytes = static_cast<std::size_t>(size * size * 3);
  d.pixels.resize(static_cast<std::size_t>(n) * bytes);
  const int shift = 4;  // sub-pixel vertex precision for the polygons
  const int thickness = std::max(1, static_cast<int>(std::lround(size / 20.0)));
  for (std::int64_t i = 0; i < n; ++i) {
    Prng rng(seed, "image", static_cast<std::uint64_t>(i));
    std::vector<int> v(d.attributes.size());
    for (std::size_t k = 0; k < v.size(); ++k) v[k] = static_cast<int>(rng.below(static_cast<std::int64_t>(d.attributes[k].values.size())));
    d.ids.push_back(i);
    d.values.push_back(v);

    cv::Mat img(size, size, CV_8UC3);  // RGB
    for (int y = 0; y < size; ++y)
      for (int x = 0; x < size; ++x)
        for (int ch = 0; ch < 3; ++ch)
          img.ptr<std::uint8_t>(y)[3 * x + ch] = cv::saturate_cast<std::uint8_t>(205 + 7 * rng.normal());
    const int* base = kColours[v[1]];
    const cv::Scalar colour(std::clamp(base[0] + static_cast<int>(rng.below(41)) - 20, 0, 255),
                            std::clamp(base[1] + static_cast<int>(rng.below(41)) - 20, 0, 255),
                            std::clamp(base[2] + static_cast<int>(rng.below(41)) - 20, 0, 255));
    const double len = kSizes[v[2]] * size * rng.uniform(0.95, 1.05);
    const double wid = 0.5 * len;
    const double angle = 45.0 * v[3] + rng.uniform(-6, 6);
    const double jitter = 0.06 * size;
    const cv::Point2d centre(size / 2.0 + rng.uniform(-jitter, jitter), size / 2.0 + rng.uniform(-jitter, jitter));
    const bool solid = v[4] == 0;
    if (v[0] == 0) {
      // cv::ellipse measures its angle clockwise in image coordinates; negate to match polygon().
      cv::ellipse(img, cv::RotatedRect(cv::Point2f(static_cast<float>(centre.x), static_cast<float>(centre.y)),
                                       cv::Size2f(static_cast<float>(len), static_cast<float>(wid)), static_cast<float>(-angle)),
                  colour, solid ? cv::FILLED : thickness, cv::LINE_AA);
    } else {
      std::vector<cv::Point2d> local;
      if (v[0] == 1) local = {{-len / 2, -wid / 2}, {len / 2, -wid / 2}, {len / 2, wid / 2}, {-len / 2, wid / 2}};
      else local = {{len / 2, 0}, {-len / 2, -wid / 2}, {-len / 2, wid / 2}};  // apex along the axis
      const std::vector<cv::Point> pts = polygon(local, centre, angle, shift);
      if (solid) cv::fillConvexPoly(img, pts, colour, cv::LINE_AA, shift);
      else cv::polylines(img, pts, true, colour, thickness, cv::LINE_AA, shift);
    }
    std::copy(img.data, img.data + bytes, d.pixels.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(i) * bytes));
  }
  return d;
}

namespace {

std::vector<std::uint8_t> read_gz(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error(path + ": cannot open");
  std::vector<std::uint8_t> out;
  std::uint8_t buf[1 << 16];
  for (;;) {
    const int got = gzread(f, buf, sizeof buf);
    if (got < 0) {
      int err = 0;
      const std::string msg = gzerror(f, &err);
      gzclose(f);
      throw std::runtime_error(path + ": " + msg);
    }
    if (got == 0) break;
    out.insert(out.end(), buf, buf + got);
  }
  gzclose(f);
  return out;
}

std::uint32_t be32(const std::vector<std::uint8_t>& b, std::size_t at) {
  return (std::uint32_t{b[at]} << 24) | (std::uint32_t{b[at + 1]} << 16) | (std::uint32_t{b[at + 2]} << 8) | b[at + 3];
}

// Tercile bin (0, 1, 2) of each value among all of them.
std::vector<int> terciles(const std::vector<double>& x) {
  std::vector<double> s = x;
  std::sort(s.begin(), s.end());
  const double t1 = s[s.size() / 3], t2 = s[2 * s.size() / 3];
  std::vector<int> bin(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) bin[i] = x[i] < t1 ? 0 : x[i] < t2 ? 1 : 2;
  return bin;
}

}  // namespace

Dataset load_fashion_mnist(const std::string& dir, const std::string& split, std::int64_t n) {
  const std::string stem = split == "test" ? "t10k" : "train";
  const std::string img_path = dir + "/" + stem + "-images-idx3-ubyte.gz";
  const std::string lab_path = dir + "/" + stem + "-labels-idx1-ubyte.gz";
  const std::vector<std::uint8_t> img = read_gz(img_path), lab = read_gz(lab_path);
  if (img.size() < 16 || be32(img, 0) != 0x803) throw std::runtime_error(img_path + ": not an IDX image file");
  if (lab.size() < 8 || be32(lab, 0) != 0x801) throw std::runtime_error(lab_path + ": not an IDX label file");
  const std::int64_t count = be32(img, 4), rows = be32(img, 8), cols = be32(img, 12);
  if (static_cast<std::int64_t>(be32(lab, 4)) != count) throw std::runtime_error(lab_path + ": label count differs from the images'");
  if (img.size() < 16 + static_cast<std::size_t>(count * rows * cols) || lab.size() < 8 + static_cast<std::size_t>(count))
    throw std::runtime_error(img_path + ": truncated");
  if (n > count) throw std::runtime_error("--images " + std::to_string(n) + " but the " + split + " split has " + std::to_string(count));

  Dataset d;
  d.name = "fashion-mnist";
  d.height = static_cast<int>(rows);
  d.width = static_cast<int>(cols);
  d.channels = 1;
  d.attributes = {{"class", {"t-shirt/top", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "ankle boot"}},
                  {"brightness", {"dark", "medium", "bright"}},
                  {"ink", {"small", "medium", "large"}}};
  d.label_attribute = 0;
  const std::size_t px = static_cast<std::size_t>(rows * cols);
  d.pixels.assign(img.begin() + 16, img.begin() + 16 + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(n) * px));
  std::vector<double> brightness(static_cast<std::size_t>(n)), ink(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint8_t* p = d.pixels.data() + static_cast<std::size_t>(i) * px;
    double sum = 0;
    std::size_t on = 0;
    for (std::size_t k = 0; k < px; ++k)
      if (p[k] > 32) {
        sum += p[k];
        ++on;
      }
    brightness[static_cast<std::size_t>(i)] = on ? sum / static_cast<double>(on) : 0;
    ink[static_cast<std::size_t>(i)] = static_cast<double>(on) / static_cast<double>(px);
  }
  const std::vector<int> b = terciles(brightness), a = terciles(ink);
  for (std::int64_t i = 0; i < n; ++i) {
    d.ids.push_back(i);
    d.values.push_back({static_cast<int>(lab[8 + static_cast<std::size_t>(i)]), b[static_cast<std::size_t>(i)], a[static_cast<std::size_t>(i)]});
  }
  return d;
}

}  // namespace gen_crowd
