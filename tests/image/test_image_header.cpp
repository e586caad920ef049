// The size check before decoding (core/image_header.hpp): the fuzz corpus' real files (PIL and
// hand-written) against their names and OpenCV's decode; cut-off and foreign bytes refused;
// files_reader and decode_by_id refusing a file whose header declares more than max_pixels,
// naming the parameter, the file and its line or photo id; the bound on pixels decoding at once.
#include <catch2/catch.hpp>

#include <atomic>
#include <fstream>
#include <regex>
#include <set>

#include <opencv2/imgcodecs.hpp>
#include <tbb/parallel_for.h>

#include "core/image_files.hpp"
#include "core/image_header.hpp"
#include "image_test_util.hpp"

using namespace embedflow;
using namespace embedflow::test;
namespace fs = std::filesystem;

namespace {

std::vector<unsigned char> bytes_of(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

fs::path corpus() { return fs::path(source_dir()) / "fuzz/corpus/image_header"; }

// The file whose header declares 32768 x 32768 grey pixels in 334 bytes (IHDR with its CRC, an
// IDAT with the first rows, IEND).
fs::path declared_huge_png() { return corpus() / "png-32768x32768-declared.png"; }

}  // namespace

TEST_CASE("image header: each seed file gives the size its name states, the size OpenCV decodes") {
  const std::regex name(R"(^([a-z]+)-(\d+)x(\d+)(-.*)?\..*$)");
  int seeds = 0;
  std::set<std::string> formats;
  for (const auto& entry : fs::directory_iterator(corpus())) {
    const std::string file = entry.path().filename().string();
    std::smatch m;
    INFO(file);
    REQUIRE(std::regex_match(file, m, name));
    const std::vector<unsigned char> bytes = bytes_of(entry.path());
    image::ImageHeader h;
    std::string error;
    REQUIRE(image::read_image_header(bytes.data(), bytes.size(), h, error));
    CHECK(h.width == std::stoull(m[2]));
    CHECK(h.height == std::stoull(m[3]));
    formats.insert(h.format);
    ++seeds;
    if (h.pixels() > 1000000) continue;  // the declared-huge PNG is not decoded
    // OpenCV (the readers' decoder) agrees on the size; BigTIFF and HDR it reads with its own
    // libraries too.
    const cv::Mat decoded = cv::imdecode(bytes, cv::IMREAD_UNCHANGED);
    REQUIRE_FALSE(decoded.empty());
    CHECK(static_cast<std::uint64_t>(decoded.cols) == h.width);
    CHECK(static_cast<std::uint64_t>(decoded.rows) == h.height);
  }
  CHECK(seeds >= 20);
  CHECK(formats == std::set<std::string>{"BMP", "HDR", "JPEG", "PAM", "PBM", "PFM", "PGM", "PNG", "PPM", "Sun raster", "TIFF", "WebP"});
}

TEST_CASE("image header: every cut of a seed gives its size or a reason, never another size; foreign bytes are refused") {
  for (const auto& entry : fs::directory_iterator(corpus())) {
    const std::vector<unsigned char> bytes = bytes_of(entry.path());
    image::ImageHeader full;
    std::string error;
    REQUIRE(image::read_image_header(bytes.data(), bytes.size(), full, error));
    for (std::size_t n = 0; n < bytes.size(); ++n) {
      // Exactly n bytes on the heap: a read past them would be a sanitizer report.
      std::vector<unsigned char> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
      image::ImageHeader h;
      error.clear();
      INFO(entry.path().filename().string() << " cut to " << n << " bytes");
      if (image::read_image_header(cut.data(), cut.size(), h, error)) {
        CHECK(h.width == full.width);
        CHECK(h.height == full.height);
      } else {
        CHECK_FALSE(error.empty());
      }
    }
  }
  image::ImageHeader h;
  std::string error;
  const std::string text = "id,path\n1,a.png\n";
  CHECK_FALSE(image::read_image_header(reinterpret_cast<const unsigned char*>(text.data()), text.size(), h, error));
  CHECK_THAT(error, Catch::Contains("not a PNG, JPEG, BMP, TIFF, WebP"));
  // A PNG whose first chunk is not IHDR, and a JPEG whose segments end before a frame header.
  std::vector<unsigned char> png = bytes_of(corpus() / "png-13x7.png");
  png[12] = 'X';
  CHECK_FALSE(image::read_image_header(png.data(), png.size(), h, error));
  CHECK(error == "PNG header: the first chunk is not IHDR");
  const unsigned char jpeg[] = {0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0x00, 0x00, 0xFF, 0xD9};
  CHECK_FALSE(image::read_image_header(jpeg, sizeof jpeg, h, error));
  CHECK(error == "JPEG header: EOI before the frame header");
  // The saturated product: 2^40 x 2^40 does not wrap to a small number.
  image::ImageHeader huge;
  huge.width = huge.height = std::uint64_t{1} << 40;
  CHECK(huge.pixels() == UINT64_MAX);
}

TEST_CASE("files_reader: a file whose header declares more than max_pixels is refused before decoding, naming the "
          "parameter, the file, its CSV line and id; skip counts it") {
  const fs::path dir = scratch_dir("image_max_pixels_files");
  cv::Mat big(1000, 2000, CV_8UC1, cv::Scalar(90)), small(20, 30, CV_8UC1, cv::Scalar(40));
  REQUIRE(cv::imwrite((dir / "big.png").string(), big));
  REQUIRE(cv::imwrite((dir / "small.png").string(), small));
  fs::copy_file(declared_huge_png(), dir / "huge.png", fs::copy_options::overwrite_existing);
  write_file(dir / "list.csv", "path,id\nsmall.png,7\nbig.png,8\n");
  write_file(dir / "huge.csv", "path,id\nsmall.png,7\nhuge.png,9\n");
  auto graph = [&](const std::string& list, const std::string& extra) {
    return GraphRunner(plugins(), "nodes:\n  read: {type: image.files_reader, params: {csv: " + (dir / list).string() +
                                      ", height: 32, width: 32" + extra + "}}\n", list + ".yaml")
        .collect("read");
  };
  // 2,000,000 pixels against a budget of 1,000,000: the error names all four.
  GraphRun r = graph("list.csv", ", max_pixels: 1000000").run();
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.error, Catch::Contains((dir / "big.png").string()) && Catch::Contains("list.csv:3") &&
                          Catch::Contains("id 8") && Catch::Contains("2000 x 1000 pixels (PNG header)") &&
                          Catch::Contains("max_pixels = 1000000"));
  // Within the budget it decodes.
  GraphRun fits = graph("list.csv", ", max_pixels: 2000000").run();
  INFO(fits.message());
  CHECK(fits.exit_code == 0);
  CHECK(fits.records("read").size() == 2);
  // The 334-byte PNG declaring 32768 x 32768 is refused at the default budget.
  GraphRun huge = graph("huge.csv", "").run();
  CHECK(huge.exit_code == 1);
  CHECK_THAT(huge.error, Catch::Contains("huge.png") && Catch::Contains("huge.csv:3") && Catch::Contains("id 9") &&
                             Catch::Contains("32768 x 32768 pixels (PNG header) exceed max_pixels = 100000000"));
  // on_bad_image: skip skips it and counts it; the other image arrives.
  GraphRun skip = graph("huge.csv", ", on_bad_image: skip").run();
  INFO(skip.message());
  CHECK(skip.exit_code == 0);
  CHECK(skip.records("read").size() == 1);
  CHECK_THAT(skip.log, Catch::Contains("skipped 1 unreadable files") && Catch::Contains("max_pixels"));
}

TEST_CASE("decode_by_id: a file above max_pixels names the photo id, its role, the path and max_pixels; skip drops its rows") {
  const fs::path dir = scratch_dir("image_max_pixels_by_id");
  for (int i = 1; i <= 3; ++i) {
    cv::Mat m(24 + i, 32, CV_8UC3, cv::Scalar(10 * i, 20, 30));
    REQUIRE(cv::imwrite((dir / (std::to_string(i) + ".jpg")).string(), m));
  }
  fs::copy_file(declared_huge_png(), dir / "4.png", fs::copy_options::overwrite_existing);
  Record table;
  table.set("id", Array::from_vector<std::int64_t>({4}, {1, 2, 3, 4}));
  table.set("image", Array::strings({(dir / "1.jpg").string(), (dir / "2.jpg").string(), (dir / "3.jpg").string(),
                                     (dir / "4.png").string()}));
  auto pairs = [] {
    Record in;
    in.set("anchor", Array::from_vector<std::int64_t>({3}, {1, 2, 3}));
    in.set("other", Array::from_vector<std::int64_t>({3}, {2, 4, 1}));
    in.set("label", Array::from_vector<std::int64_t>({3}, {1, 0, 1}));
    return in;
  };
  const auto options = NodeRunner::Options().with_input("photos", "").with_input("in", "");
  NodeRunner strict(plugins(), "image.decode_by_id", "{height: 16, width: 16}", options);
  strict.open();
  strict.push("photos", share(Record(table)));
  CHECK_THROWS_WITH(strict.push("in", pairs()), Catch::Contains("photo 4 (other in record 0)") &&
                                                   Catch::Contains((dir / "4.png").string()) &&
                                                   Catch::Contains("exceed max_pixels = 100000000"));
  NodeRunner skip(plugins(), "image.decode_by_id", "{height: 16, width: 16, on_bad_image: skip}", options);
  skip.open();
  skip.push("photos", share(Record(table)));
  skip.push("in", pairs());
  skip.close();
  REQUIRE(skip.outputs("out").size() == 1);
  CHECK(format_records({skip.outputs("out")[0]})[0] ==
        "{a_id: [1, 3], a_image: u8[2,16,16,3], b_id: [2, 1], b_image: u8[2,16,16,3], pair_label: [1, 1]}");
  CHECK_THAT(skip.log(), Catch::Contains("skipped 1 photos") && Catch::Contains("max_pixels"));
}

TEST_CASE("decode budget: parallel decodes never hold more header pixels than the budget; a larger file decodes alone") {
  const fs::path dir = scratch_dir("image_decode_budget");
  std::vector<std::string> paths;
  for (int i = 0; i < 24; ++i) {
    cv::Mat m(200, 300, CV_8UC3, cv::Scalar(i, 2 * i, 3 * i));
    paths.push_back((dir / (std::to_string(i) + ".png")).string());
    REQUIRE(cv::imwrite(paths.back(), m));
  }
  auto decode_all = [&](std::uint64_t capacity) {
    image::DecodeBudget budget(capacity);
    image::DecodeOptions o;
    o.color = true;
    o.height = o.width = 8;
    o.budget = &budget;
    std::atomic<int> decoded{0};
    tbb::parallel_for(std::size_t{0}, paths.size(), [&](std::size_t i) {
      std::string error;
      if (!image::decode_image(paths[i], o, error).empty()) ++decoded;
    });
    CHECK(decoded == static_cast<int>(paths.size()));
    return budget.peak();
  };
  // Room for two at a time: never three.
  CHECK(decode_all(2 * 60000) <= 2 * 60000);
  // Room for one: exactly one at a time.
  CHECK(decode_all(60000) == 60000);
  // Room for none: each file still decodes, alone.
  CHECK(decode_all(1000) == 60000);
}
