// Photo-scale decoding: strict JPEG decoding (a truncated file is an error, not grey rows),
// DCT-domain reduction and region decoding against cv::imread on the same files, and the
// antialiased resize against PIL (a Python oracle).
#include <catch2/catch.hpp>

#include <fstream>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "core/arrays.hpp"
#include "core/image_files.hpp"
#include "core/jpeg.hpp"
#include "core/ops.hpp"
#include "image_test_util.hpp"

using namespace embedflow::test;
using namespace embedflow::image;
namespace fs = std::filesystem;

namespace {

// A photo-like BGR image: smooth gradients, a few solid shapes and fine texture, so JPEG
// blocks, chroma subsampling and resampling all have something to act on.
cv::Mat photo(int h, int w, int salt) {
  cv::Mat m(h, w, CV_8UC3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      auto* p = m.ptr<cv::Vec3b>(y) + x;
      (*p)[0] = static_cast<std::uint8_t>((x * 255) / w);
      (*p)[1] = static_cast<std::uint8_t>((y * 255) / h);
      (*p)[2] = static_cast<std::uint8_t>(((x / 3 + y / 5 + salt) % 7) * 30);
    }
  cv::circle(m, {w / 3, h / 2}, h / 5, cv::Scalar(20, 200, 240), -1);
  cv::rectangle(m, {w / 2, h / 6}, {w / 2 + w / 4, h / 3}, cv::Scalar(250, 30, 60), -1);
  cv::line(m, {0, h - 1}, {w - 1, 0}, cv::Scalar(0, 0, 0), 3);
  return m;
}

std::vector<unsigned char> file_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& p, const std::vector<unsigned char>& b, std::size_t n) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(n));
}

cv::Mat rgb(const cv::Mat& bgr) {
  cv::Mat out;
  cv::cvtColor(bgr, out, cv::COLOR_BGR2RGB);
  return out;
}

double max_abs_diff(const cv::Mat& a, const cv::Mat& b) {
  REQUIRE(a.size() == b.size());
  REQUIRE(a.type() == b.type());
  return cv::norm(a, b, cv::NORM_INF);
}

}  // namespace

TEST_CASE("jpeg: full, reduced and region decodes equal cv::imread on the same file") {
  const fs::path dir = scratch_dir("image_jpeg_decode");
  const fs::path file = dir / "p.jpg";
  REQUIRE(cv::imwrite(file.string(), photo(375, 500, 1), {cv::IMWRITE_JPEG_QUALITY, 90}));
  const auto bytes = file_bytes(file);
  JpegHeader h;
  std::string error;
  REQUIRE(read_jpeg_header(bytes.data(), bytes.size(), h, error));
  CHECK(h.width == 500);
  CHECK(h.height == 375);
  CHECK(h.plain);

  JpegDecodeOptions o;
  const cv::Mat full = decode_jpeg(bytes.data(), bytes.size(), o, error);
  INFO(error);
  REQUIRE(!full.empty());
  CHECK(max_abs_diff(full, rgb(cv::imread(file.string(), cv::IMREAD_COLOR))) == 0);
  o.color = false;
  CHECK(max_abs_diff(decode_jpeg(bytes.data(), bytes.size(), o, error), cv::imread(file.string(), cv::IMREAD_GRAYSCALE)) == 0);
  o.color = true;

  // DCT-domain reduction is OpenCV's IMREAD_REDUCED_COLOR_N (the same scaled IDCT).
  const std::pair<int, int> modes[] = {{2, cv::IMREAD_REDUCED_COLOR_2}, {4, cv::IMREAD_REDUCED_COLOR_4}, {8, cv::IMREAD_REDUCED_COLOR_8}};
  for (auto [reduce, flag] : modes) {
    o.reduce = reduce;
    const cv::Mat got = decode_jpeg(bytes.data(), bytes.size(), o, error);
    INFO("reduce " << reduce);
    REQUIRE(!got.empty());
    CHECK(got.size() == reduced_size(500, 375, reduce));
    CHECK(max_abs_diff(got, rgb(cv::imread(file.string(), flag))) == 0);
  }

  // A region (skipped rows above, cropped columns, an early stop below) equals the same
  // rectangle of the full decode, at full size and reduced.
  for (int reduce : {1, 2}) {
    o.reduce = reduce;
    o.region = {};
    const cv::Mat whole = decode_jpeg(bytes.data(), bytes.size(), o, error);
    for (const cv::Rect r : {cv::Rect(37, 51, 101, 77), cv::Rect(0, 0, 60, 40), cv::Rect(whole.cols - 45, whole.rows - 33, 45, 33),
                             cv::Rect(1, 17, whole.cols - 2, 5)}) {
      o.region = r;
      const cv::Mat got = decode_jpeg(bytes.data(), bytes.size(), o, error);
      INFO("reduce " << reduce << " region " << r);
      REQUIRE(!got.empty());
      CHECK(max_abs_diff(got, whole(r)) == 0);
    }
  }
  o.region = cv::Rect(0, 0, 600, 10);
  o.reduce = 1;
  CHECK(decode_jpeg(bytes.data(), bytes.size(), o, error).empty());
  CHECK_THAT(error, Catch::Contains("outside the image"));
}

TEST_CASE("jpeg: a file cut to half its bytes is an error (OpenCV alone decodes it with grey rows)") {
  const fs::path dir = scratch_dir("image_jpeg_truncated");
  const fs::path good = dir / "good.jpg", cut = dir / "cut.jpg";
  REQUIRE(cv::imwrite(good.string(), photo(375, 500, 2), {cv::IMWRITE_JPEG_QUALITY, 90}));
  const auto bytes = file_bytes(good);
  write_bytes(cut, bytes, bytes.size() / 2);
  // The defect this guards against: cv::imread returns a full-size image for the cut file.
  const cv::Mat lenient = cv::imread(cut.string(), cv::IMREAD_COLOR);
  CHECK(lenient.rows == 375);

  std::string error;
  DecodeOptions o;
  o.color = true;
  CHECK(decode_image(cut.string(), o, error).empty());
  CHECK_THAT(error, Catch::Contains("corrupt JPEG") && Catch::Contains("Premature end of JPEG file"));
  // Reduced, resized and grey decodes refuse it too.
  o.height = 40;
  o.width = 50;
  error.clear();
  CHECK(decode_image(cut.string(), o, error).empty());
  CHECK_THAT(error, Catch::Contains("Premature end"));
  o.color = false;
  error.clear();
  CHECK(decode_image(cut.string(), o, error).empty());
  // A region of the top rows stops before the cut, but the file has no EOI: still refused.
  JpegDecodeOptions region;
  region.region = cv::Rect(0, 0, 100, 16);
  const auto cut_bytes = file_bytes(cut);
  error.clear();
  CHECK(decode_jpeg(cut_bytes.data(), cut_bytes.size(), region, error).empty());
  CHECK_THAT(error, Catch::Contains("Premature end"));
  CHECK_FALSE(decode_jpeg(bytes.data(), bytes.size(), region, error).empty());
  // Corrupt entropy data in the middle (bytes overwritten, length kept) is refused as well.
  std::vector<unsigned char> garbled = bytes;
  for (std::size_t i = bytes.size() / 2; i < bytes.size() / 2 + 64; ++i) garbled[i] = static_cast<unsigned char>(i * 37);
  error.clear();
  CHECK(decode_jpeg(garbled.data(), garbled.size(), JpegDecodeOptions(), error).empty());
  CHECK_THAT(error, Catch::Contains("Corrupt JPEG data") || Catch::Contains("Premature end") || Catch::Contains("marker"));

  // Through image.files_reader: the run stops naming the file; skip mode counts it.
  std::string csv = "path\ngood.jpg\ncut.jpg\n";
  write_file(dir / "list.csv", csv);
  const std::string yaml = "nodes:\n  read: {type: image.files_reader, params: {csv: " + (dir / "list.csv").string() +
                           ", mode: color, height: 64, width: 64}}\n";
  GraphRun r = GraphRunner(plugins(), yaml, "cut.yaml").collect("read").run();
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.error, Catch::Contains("cut.jpg") && Catch::Contains("list.csv:3") && Catch::Contains("Premature end of JPEG file"));
  GraphRun s = GraphRunner(plugins(), yaml, "cut.yaml").collect("read").run({"read.on_bad_image=skip"});
  INFO(s.message());
  CHECK(s.exit_code == 0);
  CHECK(s.records("read").size() == 1);
  CHECK_THAT(s.log, Catch::Contains("skipped 1 unreadable files") && Catch::Contains("cut.jpg"));
}

TEST_CASE("decode with a target size: DCT reduction when the file allows it, else full decode; both resized with area") {
  const fs::path dir = scratch_dir("image_jpeg_target");
  const fs::path file = dir / "p.jpg";
  REQUIRE(cv::imwrite(file.string(), photo(375, 500, 3), {cv::IMWRITE_JPEG_QUALITY, 92}));
  CHECK(jpeg_reduction(500, 375, 224, 168) == 2);
  CHECK(jpeg_reduction(500, 375, 224, 224) == 1);
  CHECK(jpeg_reduction(500, 375, 60, 40) == 8);
  CHECK(jpeg_reduction(500, 375, 63, 47) == 8);  // ceil(500/8) = 63, ceil(375/8) = 47
  CHECK(jpeg_reduction(500, 375, 64, 47) == 4);
  DecodeOptions o;
  o.color = true;
  o.height = 100;
  o.width = 120;
  std::string error;
  const cv::Mat reduced = decode_image(file.string(), o, error);
  cv::Mat want;
  cv::resize(rgb(cv::imread(file.string(), cv::IMREAD_REDUCED_COLOR_2)), want, cv::Size(120, 100), 0, 0, cv::INTER_AREA);
  CHECK(max_abs_diff(reduced, want) == 0);
  o.dct_scaling = false;
  const cv::Mat full = decode_image(file.string(), o, error);
  cv::resize(rgb(cv::imread(file.string(), cv::IMREAD_COLOR)), want, cv::Size(120, 100), 0, 0, cv::INTER_AREA);
  CHECK(max_abs_diff(full, want) == 0);
  // The two paths differ only by filtering: on average by less than 3 grey levels on this
  // texture-heavy image.
  CHECK(cv::norm(reduced, full, cv::NORM_L1) / static_cast<double>(full.total() * 3) < 3.0);
}

TEST_CASE("antialiased resize is close to PIL's bilinear; OpenCV's plain INTER_LINEAR aliases") {
  const fs::path dir = scratch_dir("image_antialias");
  // A photo-like image, and fine stripes (period 2 px) that alias when shrunk without a low-pass.
  REQUIRE(cv::imwrite((dir / "photo.png").string(), photo(240, 320, 4)));
  cv::Mat stripes(240, 320, CV_8UC3, cv::Scalar(0, 0, 0));
  for (int x = 0; x < stripes.cols; x += 2) stripes.col(x).setTo(cv::Scalar(255, 255, 255));
  REQUIRE(cv::imwrite((dir / "stripes.png").string(), stripes));
  // PIL's bilinear (what torchvision's transforms use on PIL images): shrink both axes,
  // shrink one and enlarge the other.
  Result py = run_python(R"PY(
import sys
from PIL import Image
d = sys.argv[1]
for name in ["photo", "stripes"]:
    im = Image.open("%s/%s.png" % (d, name)).convert("RGB")
    for w, h in [(90, 70), (224, 100), (100, 300)]:
        im.resize((w, h), Image.BILINEAR).save("%s/%s_%dx%d.png" % (d, name, w, h))
)PY", {dir.string()});
  INFO(py.out << py.err);
  REQUIRE(py.exit_code == 0);
  auto load = [&](const std::string& name) { return rgb(cv::imread((dir / (name + ".png")).string(), cv::IMREAD_COLOR)); };
  const cv::Mat photo_in = load("photo"), stripes_in = load("stripes");
  for (const cv::Size s : {cv::Size(90, 70), cv::Size(224, 100), cv::Size(100, 300)}) {
    const std::string tag = "_" + std::to_string(s.width) + "x" + std::to_string(s.height);
    // Photo: within 3 grey levels of PIL on average (the filters differ: PIL's is a triangle
    // as wide as the scale, INTER_AREA a box), less than half INTER_LINEAR's distance.
    const cv::Mat pil = load("photo" + tag);
    const double n = static_cast<double>(pil.total() * 3);
    const double ours = cv::norm(resize_image(photo_in, s, cv::INTER_LINEAR, true), pil, cv::NORM_L1) / n;
    const double plain = cv::norm(resize_image(photo_in, s, cv::INTER_LINEAR, false), pil, cv::NORM_L1) / n;
    INFO(s << ": photo, mean |ours - PIL| " << ours << ", mean |INTER_LINEAR - PIL| " << plain);
    CHECK(ours < 3.0);
    CHECK(ours * 2 < plain);
    // Stripes at these non-integer scales: PIL averages them towards an even grey, INTER_LINEAR
    // keeps stripes and moire (pixels spread widely around the mean); the box filter leaves
    // some ripple, at most 60% of INTER_LINEAR's.
    cv::Scalar pil_mean, pil_std, ours_mean, ours_std, plain_mean, plain_std;
    cv::meanStdDev(load("stripes" + tag), pil_mean, pil_std);
    cv::meanStdDev(resize_image(stripes_in, s, cv::INTER_LINEAR, true), ours_mean, ours_std);
    cv::meanStdDev(resize_image(stripes_in, s, cv::INTER_LINEAR, false), plain_mean, plain_std);
    INFO("stripes: std PIL " << pil_std[0] << ", ours " << ours_std[0] << ", INTER_LINEAR " << plain_std[0]);
    CHECK(std::abs(ours_mean[0] - pil_mean[0]) < 3.0);
    CHECK(ours_std[0] < 0.6 * plain_std[0]);
    CHECK(pil_std[0] < 0.6 * plain_std[0]);
  }
}
