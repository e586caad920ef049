// Image kernels and ops without a graph: each op against OpenCV called directly or a hand
// computation, determinism by seed, and the `classes` parameter forms.
#include <catch2/catch.hpp>

#include <opencv2/imgproc.hpp>

#include "core/arrays.hpp"
#include "core/classes.hpp"
#include "core/kernels.hpp"
#include "core/ops.hpp"

using namespace embedflow;
using namespace embedflow::image;

namespace {

// A deterministic test image with structure in every direction (so flips and rotations show).
cv::Mat pattern(int h, int w, int c, int salt = 0) {
  cv::Mat m(h, w, CV_8UC(c));
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int k = 0; k < c; ++k) m.ptr<std::uint8_t>(y)[x * c + k] = static_cast<std::uint8_t>((y * 31 + x * 7 + k * 53 + salt + x * y) % 256);
  return m;
}

bool same(const cv::Mat& a, const cv::Mat& b) {
  if (a.size() != b.size() || a.type() != b.type()) return false;
  cv::Mat d;
  cv::absdiff(a, b, d);
  return cv::countNonZero(d.reshape(1)) == 0;
}

Value params(std::vector<std::pair<std::string, Value>> kv) { return Value::map(std::move(kv)); }
Value numbers(std::vector<double> v) {
  Value::List l;
  for (double x : v) l.push_back(Value::number(x));
  return Value::list(l);
}

cv::Mat run_op(const OpSpec& op, const Value& p, const cv::Mat& in, std::uint64_t seed = 1) {
  auto o = make_op(op, p);
  Rng rng(seed);
  return o->apply(in, rng);
}

}  // namespace

TEST_CASE("classes accept a label, a list and range strings") {
  CHECK(ClassSet::parse(Value()).all());
  CHECK(ClassSet::parse(Value::string("0-4")).labels() == std::vector<std::int64_t>{0, 1, 2, 3, 4});
  CHECK(ClassSet::parse(Value::string("7, 0-2,9")).labels() == std::vector<std::int64_t>{0, 1, 2, 7, 9});
  CHECK(ClassSet::parse(Value::integer(3)).labels() == std::vector<std::int64_t>{3});
  CHECK(ClassSet::parse(Value::list({Value::integer(5), Value::integer(1)})).labels() == std::vector<std::int64_t>{1, 5});
  CHECK(ClassSet::parse(Value::string("5-9")).str() == "5-9");
  CHECK(ClassSet::parse(Value::string("0-2,7")).str() == "0-2,7");
  CHECK_FALSE(ClassSet::parse(Value::string("0-4")).contains(5));
  CHECK_THROWS_AS(ClassSet::parse(Value::string("4-0")), ConfigError);
  CHECK_THROWS_AS(ClassSet::parse(Value::string("a")), ConfigError);
  CHECK_THROWS_AS(ClassSet::parse(Value::string("1,,2")), ConfigError);
  CHECK_THROWS_AS(ClassSet::parse(Value::list({Value::number(1.5)})), ConfigError);
}

TEST_CASE("flip with p=1 equals cv::flip; p=0 forwards the image without a copy") {
  const cv::Mat img = pattern(5, 7, 3);
  cv::Mat h, v, both;
  cv::flip(img, h, 1);
  cv::flip(img, v, 0);
  cv::flip(img, both, -1);
  CHECK(same(run_op(flip_op(), params({{"horizontal_p", Value::number(1)}}), img), h));
  CHECK(same(run_op(flip_op(), params({{"horizontal_p", Value::number(0)}, {"vertical_p", Value::number(1)}}), img), v));
  CHECK(same(run_op(flip_op(), params({{"horizontal_p", Value::number(1)}, {"vertical_p", Value::number(1)}}), img), both));
  const cv::Mat none = run_op(flip_op(), params({{"horizontal_p", Value::number(0)}}), img);
  CHECK(none.data == img.data);
  // p = 0.5 flips about half of 2000 seeded images.
  auto op = make_op(flip_op(), params({}));
  int flipped = 0;
  for (std::uint64_t s = 0; s < 2000; ++s) {
    Rng rng(derive_seed(42, s));
    flipped += op->apply(img, rng).data != img.data;
  }
  CHECK(flipped > 900);
  CHECK(flipped < 1100);
}

TEST_CASE("resize equals cv::resize; rotate by 180 and 90 degrees equals the exact rotations") {
  const cv::Mat img = pattern(9, 9, 1);
  cv::Mat want;
  cv::resize(img, want, cv::Size(13, 11), 0, 0, cv::INTER_LINEAR);
  CHECK(same(run_op(resize_op(), params({{"height", Value::integer(11)}, {"width", Value::integer(13)}}), img), want));
  cv::Mat r180, r90;
  cv::rotate(img, r180, cv::ROTATE_180);
  cv::rotate(img, r90, cv::ROTATE_90_COUNTERCLOCKWISE);
  CHECK(same(run_op(rotate_op(), params({{"degrees", numbers({180, 180})}}), img), r180));
  CHECK(same(run_op(rotate_op(), params({{"degrees", numbers({90, 90})}}), img), r90));
  // A random angle changes the image and keeps its size; p = 0 leaves it alone.
  const cv::Mat turned = run_op(rotate_op(), params({{"degrees", numbers({10, 20})}}), img);
  CHECK(turned.size() == img.size());
  CHECK_FALSE(same(turned, img));
  CHECK(run_op(rotate_op(), params({{"p", Value::number(0)}}), img).data == img.data);
}

TEST_CASE("gaussian blur equals cv::GaussianBlur with the drawn sigma and the automatic kernel") {
  const cv::Mat img = pattern(16, 16, 3);
  cv::Mat want;
  cv::GaussianBlur(img, want, cv::Size(7, 7), 1.0, 1.0, cv::BORDER_REFLECT_101);  // 2*ceil(3*1)+1 = 7
  const cv::Mat got = run_op(gaussian_blur_op(), params({{"sigma", numbers({1, 1})}}), img);
  CHECK(same(got, want));
  CHECK_FALSE(same(got, img));
  CHECK(run_op(gaussian_blur_op(), params({{"p", Value::number(0)}}), img).data == img.data);
  CHECK_THROWS_WITH(make_op(gaussian_blur_op(), params({{"kernel_size", Value::integer(4)}})), Catch::Contains("must be odd"));
}

TEST_CASE("color jitter matches the hand formulas") {
  // One RGB pixel row: brightness 1.5 on (100, 200, 50) -> (150, 255 clamped, 75).
  cv::Mat px(1, 2, CV_8UC3);
  px.at<cv::Vec3b>(0, 0) = {100, 200, 50};
  px.at<cv::Vec3b>(0, 1) = {10, 20, 30};
  cv::Mat b = color_jitter_apply(px, 1.5, 1, 1);
  CHECK(b.at<cv::Vec3b>(0, 0) == cv::Vec3b(150, 255, 75));
  CHECK(b.at<cv::Vec3b>(0, 1) == cv::Vec3b(15, 30, 45));
  // Contrast 0.5 blends with the mean grey of the image.
  const double g0 = 0.299 * 100 + 0.587 * 200 + 0.114 * 50, g1 = 0.299 * 10 + 0.587 * 20 + 0.114 * 30;
  const double mean = (g0 + g1) / 2;
  cv::Mat c = color_jitter_apply(px, 1, 0.5, 1);
  for (int x = 0; x < 2; ++x)
    for (int k = 0; k < 3; ++k)
      CHECK(c.at<cv::Vec3b>(0, x)[k] == static_cast<int>(std::lround(0.5 * px.at<cv::Vec3b>(0, x)[k] + 0.5 * mean)));
  // Saturation 0 turns each pixel into its grey value.
  cv::Mat s = color_jitter_apply(px, 1, 1, 0);
  CHECK(s.at<cv::Vec3b>(0, 0) == cv::Vec3b::all(static_cast<std::uint8_t>(std::lround(g0))));
  // f32 images clamp to [0, 1].
  cv::Mat f(1, 1, CV_32FC1, cv::Scalar(0.8f));
  CHECK(color_jitter_apply(f, 2.0, 1, 1).at<float>(0, 0) == 1.0f);
  // The random op draws factors within range: brightness 0.5 keeps a grey value within [0.5, 1.5] x.
  auto op = make_op(color_jitter_op(), params({{"brightness", Value::number(0.5)}}));
  const cv::Mat grey(4, 4, CV_8UC1, cv::Scalar(100));
  bool changed = false;
  for (std::uint64_t seed = 0; seed < 50; ++seed) {
    Rng rng(seed);
    const int v = op->apply(grey, rng).at<std::uint8_t>(0, 0);
    CHECK(v >= 50);
    CHECK(v <= 150);
    changed = changed || v != 100;
  }
  CHECK(changed);
}

TEST_CASE("random resized crop: bounds, area fraction, output size, determinism by seed") {
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    Rng rng(seed);
    const cv::Rect r = random_resized_crop_rect(40, 30, 0.3, 0.9, 0.75, 4.0 / 3.0, rng);
    CHECK(r.x >= 0);
    CHECK(r.y >= 0);
    CHECK(r.x + r.width <= 40);
    CHECK(r.y + r.height <= 30);
    const double frac = static_cast<double>(r.area()) / (40 * 30);
    CHECK(frac > 0.25);  // rounding of w and h moves the fraction slightly
    CHECK(frac < 0.95);
  }
  // An impossible ratio falls back to the largest centre crop with a ratio in range.
  Rng rng(1);
  const cv::Rect fb = random_resized_crop_rect(40, 10, 1.0, 1.0, 1.0, 1.0, rng);
  CHECK(fb == cv::Rect(15, 0, 10, 10));
  const cv::Mat img = pattern(30, 40, 1);
  const Value p = params({{"height", Value::integer(16)}, {"width", Value::integer(16)}});
  const cv::Mat a = run_op(random_resized_crop_op(), p, img, 5), b = run_op(random_resized_crop_op(), p, img, 5);
  const cv::Mat c = run_op(random_resized_crop_op(), p, img, 6);
  CHECK(a.size() == cv::Size(16, 16));
  CHECK(same(a, b));
  CHECK_FALSE(same(a, c));
}

TEST_CASE("to_tensor and normalize match a hand computation") {
  // 2x2 RGB image, HWC.
  std::vector<std::uint8_t> hwc{0, 51, 102, 153, 204, 255, 10, 20, 30, 40, 50, 60};
  Array img = Array::from_vector<std::uint8_t>({2, 2, 3}, hwc);
  Array t = hwc_to_chw_f32(img);
  REQUIRE(t.shape() == Shape{3, 2, 2});
  const float* v = t.data<float>();
  for (int c = 0; c < 3; ++c)
    for (int p = 0; p < 4; ++p) CHECK(v[c * 4 + p] == Approx(hwc[static_cast<std::size_t>(p * 3 + c)] / 255.0f));
  Array batch = Array::stack({img, img});
  CHECK(hwc_to_chw_f32(batch).shape() == Shape{2, 3, 2, 2});
  CHECK(hwc_to_chw_f32(batch).row(1).equals(t));
  Array n = normalize_chw(t, {0.5, 0.4, 0.3}, {0.25, 0.5, 2.0});
  const double mean[3] = {0.5, 0.4, 0.3}, sd[3] = {0.25, 0.5, 2.0};
  for (int c = 0; c < 3; ++c)
    for (int p = 0; p < 4; ++p)
      CHECK(n.data<float>()[c * 4 + p] == Approx((hwc[static_cast<std::size_t>(p * 3 + c)] / 255.0 - mean[c]) / sd[c]).epsilon(1e-6));
  CHECK_THROWS_AS(normalize_chw(t, {0.1, 0.2}, {1.0}), DataError);
  CHECK_THROWS_AS(normalize_chw(img, {0.1}, {1.0}), DataError);  // u8 HWC is not a tensor
}

TEST_CASE("map_images seeds each image of a batch on its own and keeps batch shapes") {
  std::vector<Array> parts;
  for (int i = 0; i < 6; ++i) parts.push_back(array_from_mat(pattern(12, 12, 1, i)));
  Array batch = Array::stack(parts);
  auto op = make_op(rotate_op(), params({{"degrees", numbers({-30, 30})}}));
  ImageFn fn = [&](const cv::Mat& m, Rng& r) { return op->apply(m, r); };
  Array a = map_images(batch, 99, fn, false), b = map_images(batch, 99, fn, false), c = map_images(batch, 100, fn, false);
  CHECK(a.shape() == batch.shape());
  CHECK(a.equals(b));
  CHECK_FALSE(a.equals(c));
  // Image i of the batch is the single-image result with seed derive_seed(seed, i).
  Array one = map_images(parts[3], derive_seed(99, 3), fn, false);
  CHECK(one.equals(a.row(3)));
  // CHW output of a batch.
  auto tt = make_op(to_tensor_op(), params({}));
  Array chw = map_images(batch, 1, [&](const cv::Mat& m, Rng& r) { return tt->apply(m, r); }, true);
  CHECK(chw.shape() == Shape{6, 1, 12, 12});
  CHECK(chw.equals(hwc_to_chw_f32(batch)));
}
