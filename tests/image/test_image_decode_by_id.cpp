// image.decode_by_id on real files written with OpenCV: pair, triplet and photo records decode
// to the pixels of cv::imread + resize; missing and corrupt files are errors naming the photo id
// and path, or skipped and counted; a whole graph from geo.csv_photos and geo.pair_sampler.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "core/arrays.hpp"
#include "image_test_util.hpp"

using namespace embedflow;
using namespace embedflow::test;
namespace fs = std::filesystem;

namespace {

// Photos 1..6: JPEGs of several sizes and one PNG, each with its own colours.
struct PhotoDir {
  fs::path dir;
  std::vector<std::int64_t> ids;
  std::vector<std::string> paths;
};

PhotoDir write_photos(const std::string& name) {
  PhotoDir p;
  p.dir = scratch_dir(name);
  const cv::Size sizes[] = {{320, 240}, {500, 375}, {90, 120}, {64, 48}, {640, 200}, {100, 100}};
  cv::RNG rng(11);
  for (int i = 0; i < 6; ++i) {
    cv::Mat m(sizes[i], CV_8UC3);
    rng.fill(m, cv::RNG::UNIFORM, 0, 256);
    cv::GaussianBlur(m, m, cv::Size(0, 0), 3.0);  // photo-like: smooth, not white noise
    cv::rectangle(m, {5, 5}, {m.cols / 2, m.rows / 3}, cv::Scalar(30 * i, 255 - 30 * i, 90), -1);
    const std::string file = (p.dir / (std::to_string(i + 1) + (i == 5 ? ".png" : ".jpg"))).string();
    REQUIRE(cv::imwrite(file, m));
    p.ids.push_back(i + 1);
    p.paths.push_back(file);
  }
  return p;
}

// photos.csv beside the photos: three places in Manhattan, two photos a few metres apart at each.
void write_photo_table(const PhotoDir& p) {
  std::string csv = "id,lat,lon,time,user,path\n";
  const char* where[] = {"40.752216,-73.977597", "40.752230,-73.977610", "40.779571,-73.963691",
                         "40.779580,-73.963700", "40.700000,-74.010000", "40.700010,-74.010010"};
  for (std::size_t i = 0; i < 6; ++i)
    csv += cat(p.ids[i], ",", where[i], ",2013-06-0", i + 1, "T10:00:00,u", i, "@N00,", fs::path(p.paths[i]).filename().string(), "\n");
  write_file(p.dir / "photos.csv", csv);
}

RecordPtr table(const std::vector<std::int64_t>& ids, const std::vector<std::string>& paths) {
  Record r;
  r.set("id", Array::from_vector<std::int64_t>({static_cast<std::int64_t>(ids.size())}, ids));
  r.set("image", Array::strings(paths));
  return share(std::move(r));
}

Array i64s(std::vector<std::int64_t> v) {
  const auto n = static_cast<std::int64_t>(v.size());
  return Array::from_vector<std::int64_t>({n}, std::move(v));
}
Array f64s(std::vector<double> v) {
  const auto n = static_cast<std::int64_t>(v.size());
  return Array::from_vector<double>({n}, std::move(v));
}

// What the node should produce for a file: cv::imread (RGB), reduced by libjpeg when asked,
// resized with area when no axis grows, else bilinear (every test size shrinks or keeps both
// axes, or enlarges both).
cv::Mat expected(const std::string& path, int h, int w, int imread_flag = cv::IMREAD_COLOR) {
  cv::Mat m = cv::imread(path, imread_flag), out;
  cv::cvtColor(m, m, cv::COLOR_BGR2RGB);
  const bool shrink = w <= m.cols && h <= m.rows;
  cv::resize(m, out, cv::Size(w, h), 0, 0, shrink ? cv::INTER_AREA : cv::INTER_LINEAR);
  return out;
}

bool same(const cv::Mat& a, const cv::Mat& b) {
  return a.size() == b.size() && a.type() == b.type() && cv::norm(a, b, cv::NORM_INF) == 0;
}

// The optional photo table port connected (NodeRunner leaves optional ports unconnected).
NodeRunner::Options with_table() { return NodeRunner::Options().with_input("photos", "").with_input("in", ""); }

cv::Mat row_image(const Array& batch, std::int64_t i) { return image::image_view(batch, i).clone(); }

}  // namespace

TEST_CASE("decode_by_id: pair, triplet and photo records decode to cv::imread + resize of each member's file") {
  const PhotoDir p = write_photos("decode_by_id_pixels");
  NodeRunner pairs(plugins(), "image.decode_by_id", "{height: 40, width: 50, dct_scaling: false, cache_images: 2}", with_table());
  pairs.open();
  pairs.push("photos", table(p.ids, p.paths));
  Record in;
  in.set("anchor", i64s({1, 2, 3, 6, 2}));
  in.set("other", i64s({2, 4, 5, 1, 2}));
  in.set("label", i64s({1, 0, 0, 1, 1}));
  in.set("distance_m", f64s({1.5, 3000, 2500, 4, 0}));
  pairs.push("in", in);
  // The decoded-image cache holds 2: photos 4 and 5 (decoded last) are reused, photo 1 is
  // decoded again.
  Record reuse;
  reuse.set("anchor", i64s({4, 1}));
  reuse.set("other", i64s({5, 5}));
  pairs.push("in", reuse);
  pairs.close();
  REQUIRE(pairs.outputs("out").size() == 2);
  CHECK(same(row_image(pairs.outputs("out")[1]->get("a_image"), 0), expected(p.paths[3], 40, 50)));
  CHECK(same(row_image(pairs.outputs("out")[1]->get("a_image"), 1), expected(p.paths[0], 40, 50)));
  CHECK(same(row_image(pairs.outputs("out")[1]->get("b_image"), 1), expected(p.paths[4], 40, 50)));
  const Record& out = *pairs.outputs("out")[0];
  CHECK(format_records({pairs.outputs("out")[0]})[0] ==
        "{a_id: [1, 2, 3, 6, 2], a_image: u8[5,40,50,3], b_id: [2, 4, 5, 1, 2], b_image: u8[5,40,50,3], "
        "pair_label: [1, 0, 0, 1, 1], distance_m: [1.5, 3000, 2500, 4, 0]}");
  CHECK(out.get("pair_label").dtype() == DType::f32);
  const std::vector<std::int64_t> a{1, 2, 3, 6, 2}, b{2, 4, 5, 1, 2};
  for (std::int64_t i = 0; i < 5; ++i) {
    INFO("row " << i);
    CHECK(same(row_image(out.get("a_image"), i), expected(p.paths[static_cast<std::size_t>(a[i] - 1)], 40, 50)));
    CHECK(same(row_image(out.get("b_image"), i), expected(p.paths[static_cast<std::size_t>(b[i] - 1)], 40, 50)));
  }
  CHECK_THAT(pairs.log(), Catch::Contains("decoded 7 image files"));

  // Triplets; DCT reduction on: photo 2 (500 x 375) decodes at 1/8 (63 x 47 >= 50 x 40),
  // exactly OpenCV's IMREAD_REDUCED_COLOR_8 then area.
  NodeRunner trips(plugins(), "image.decode_by_id", "{height: 40, width: 50}", with_table());
  trips.open();
  trips.push("photos", table(p.ids, p.paths));
  Record t;
  t.set("anchor", i64s({2, 4}));
  t.set("positive", i64s({1, 4}));
  t.set("negative", i64s({6, 3}));
  t.set("weight", Array::from_vector<float>({2}, {0.5f, 2.0f}));
  trips.push("in", t);
  trips.close();
  const Record& to = *trips.outputs("out")[0];
  CHECK(format_records({trips.outputs("out")[0]})[0] ==
        "{anchor_id: [2, 4], anchor_image: u8[2,40,50,3], positive_id: [1, 4], positive_image: u8[2,40,50,3], "
        "negative_id: [6, 3], negative_image: u8[2,40,50,3], weight: [0.5, 2]}");
  CHECK(same(row_image(to.get("anchor_image"), 0), expected(p.paths[1], 40, 50, cv::IMREAD_REDUCED_COLOR_8)));
  CHECK(same(row_image(to.get("negative_image"), 0), expected(p.paths[5], 40, 50)));      // the PNG
  CHECK(same(row_image(to.get("anchor_image"), 1), expected(p.paths[3], 40, 50)));        // 64 x 48: no reduction
  CHECK(same(row_image(to.get("negative_image"), 1), expected(p.paths[2], 40, 50)));

  // Photo records carrying their own path (no table), single records: image [H,W,C] added.
  NodeRunner photos(plugins(), "image.decode_by_id", "{height: 30, width: 30, mode: grey, dct_scaling: false, path_field: file}");
  photos.open();
  for (int i = 0; i < 3; ++i) {
    Record r;
    r.set("id", Array::scalar<std::int64_t>(p.ids[static_cast<std::size_t>(i)]));
    r.set("file", Array::string_scalar(p.paths[static_cast<std::size_t>(i)]));
    photos.push("in", r);
  }
  photos.close();
  REQUIRE(photos.outputs("out").size() == 3);
  for (int i = 0; i < 3; ++i) {
    const Array& img = photos.outputs("out")[static_cast<std::size_t>(i)]->get("image");
    CHECK(img.shape() == Shape{30, 30, 1});
    cv::Mat want;
    cv::resize(cv::imread(p.paths[static_cast<std::size_t>(i)], cv::IMREAD_GRAYSCALE), want, cv::Size(30, 30), 0, 0, cv::INTER_AREA);
    CHECK(same(image::image_view(img).clone(), want));
  }
}

TEST_CASE("decode_by_id: a missing or corrupt file names the photo id and path; skip drops its rows and counts them") {
  PhotoDir p = write_photos("decode_by_id_bad");
  // Photo 7: the JPEG of photo 2 cut to half its bytes; photo 8: no file.
  {
    std::ifstream f(p.paths[1], std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::ofstream cut(p.dir / "7.jpg", std::ios::binary);
    cut.write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
  }
  p.ids.push_back(7);
  p.paths.push_back((p.dir / "7.jpg").string());
  p.ids.push_back(8);
  p.paths.push_back((p.dir / "8.jpg").string());
  auto pairs_record = [] {
    Record in;
    in.set("anchor", i64s({1, 7, 3, 2, 8}));
    in.set("other", i64s({2, 1, 4, 5, 1}));
    in.set("label", i64s({1, 1, 0, 0, 1}));
    in.set("distance_m", f64s({1, 2, 3, 4, 5}));
    return in;
  };

  NodeRunner strict(plugins(), "image.decode_by_id", "{height: 32, width: 32}", with_table());
  strict.open();
  strict.push("photos", table(p.ids, p.paths));
  CHECK_THROWS_WITH(strict.push("in", pairs_record()),
                    Catch::Contains("photo 7 (anchor in record 0)") && Catch::Contains(p.paths[6]) &&
                        Catch::Contains("Premature end of JPEG file"));
  NodeRunner missing(plugins(), "image.decode_by_id", "{height: 32, width: 32}", with_table());
  missing.open();
  missing.push("photos", table(p.ids, p.paths));
  Record only_missing;
  only_missing.set("anchor", i64s({8}));
  only_missing.set("other", i64s({1}));
  CHECK_THROWS_WITH(missing.push("in", only_missing),
                    Catch::Contains("photo 8 (anchor in record 0)") && Catch::Contains(p.paths[7]) && Catch::Contains("cannot open"));
  // An id the table does not have.
  Record unknown;
  unknown.set("anchor", i64s({1}));
  unknown.set("other", i64s({99}));
  CHECK_THROWS_WITH(missing.push("in", unknown), Catch::Contains("other id 99 is not in the photo table (8 photos)"));

  // Skip: rows 1 (photo 7) and 4 (photo 8) go, the other rows and their fields stay aligned.
  NodeRunner skip(plugins(), "image.decode_by_id", "{height: 32, width: 32, on_bad_image: skip}", with_table());
  skip.open();
  skip.push("photos", table(p.ids, p.paths));
  skip.push("in", pairs_record());
  Record again;  // photo 7 again: known bad, not decoded a second time; a record left empty emits nothing
  again.set("anchor", i64s({7}));
  again.set("other", i64s({1}));
  again.set("label", i64s({1}));
  skip.push("in", again);
  skip.close();
  REQUIRE(skip.outputs("out").size() == 1);
  CHECK(format_records({skip.outputs("out")[0]})[0] ==
        "{a_id: [1, 3, 2], a_image: u8[3,32,32,3], b_id: [2, 4, 5], b_image: u8[3,32,32,3], pair_label: [1, 0, 0], "
        "distance_m: [1, 3, 4]}");
  CHECK_THAT(skip.log(), Catch::Contains("skipped 2 photos whose files could not be decoded and the 3 records or rows") &&
                             Catch::Contains("photo 7") && Catch::Contains("Premature end"));
}

TEST_CASE("decode_by_id in a graph: geo.csv_photos -> geo.pair_sampler -> decode, same output for --threads 1 and 2") {
  const PhotoDir p = write_photos("decode_by_id_graph");
  write_photo_table(p);
  const std::string yaml = R"(
nodes:
  photos: {type: geo.csv_photos, params: {path: )" + (p.dir / "photos.csv").string() + R"(}}
  pairs:  {type: geo.pair_sampler, params: {positive_radius_m: 10, negative_min_m: 2000, batch_size: 4, image_root: )" + p.dir.string() + R"(}}
  decode: {type: image.decode_by_id, params: {path_field: path, root: )" + p.dir.string() + R"(, height: 24, width: 24}}
edges: [photos.out -> pairs.photos, photos.out -> decode.photos, pairs.out -> decode.in]
)";
  GraphRun one = GraphRunner(plugins(), yaml, "g.yaml").collect("decode").threads(1).run();
  GraphRun two = GraphRunner(plugins(), yaml, "g.yaml").collect("decode").threads(2).run();
  INFO(one.message() << two.message());
  REQUIRE(one.exit_code == 0);
  REQUIRE(two.exit_code == 0);
  const auto& r1 = one.records("decode");
  const auto& r2 = two.records("decode");
  REQUIRE(r1.size() == r2.size());
  REQUIRE(!r1.empty());
  std::int64_t rows = 0;
  for (std::size_t k = 0; k < r1.size(); ++k) {
    CHECK(format_records({r1[k]}) == format_records({r2[k]}));
    const Array& ids = r1[k]->get("a_id");
    for (std::int64_t i = 0; i < ids.numel(); ++i, ++rows) {
      const std::int64_t id = ids.data<std::int64_t>()[i];
      CHECK(same(row_image(r1[k]->get("a_image"), i), row_image(r2[k]->get("a_image"), i)));
      // Which file: the image equals that photo's decode (reduction where the file allows).
      const std::string& path = p.paths[static_cast<std::size_t>(id - 1)];
      const cv::Mat full = cv::imread(path);
      // libjpeg's reduced sizes round up: 1/d is used when ceil(side / d) >= 24 on both sides.
      int flag = cv::IMREAD_COLOR;
      const std::pair<int, int> modes[] = {{8, cv::IMREAD_REDUCED_COLOR_8}, {4, cv::IMREAD_REDUCED_COLOR_4}, {2, cv::IMREAD_REDUCED_COLOR_2}};
      for (auto [d, f] : modes)
        if (flag == cv::IMREAD_COLOR && (full.cols + d - 1) / d >= 24 && (full.rows + d - 1) / d >= 24) flag = f;
      if (fs::path(path).extension() == ".png") flag = cv::IMREAD_COLOR;
      INFO("photo " << id << " " << path);
      CHECK(same(row_image(r1[k]->get("a_image"), i), expected(path, 24, 24, flag)));
    }
  }
  CHECK(rows > 6);
}

// Behind a sharded geo.pair_sampler each rank decodes the photos of its own pairs and no others.
// With positives only (k_neg 0), each of two ranks takes three anchors and their partners; a photo
// only rank 1's pairs name, cut short, stops rank 1 and the unsharded run, naming it, while rank 0
// never opens it. With every file sound, the ranks' rows in rank order are the unsharded rows,
// images included, and each rank decodes only the files its rows name.
TEST_CASE("decode_by_id behind a sharded pair sampler decodes only the rank's pairs' photos", "[shard]") {
  const PhotoDir p = write_photos("decode_by_id_shard");
  write_photo_table(p);
  auto graph = [&](int world, int rank) {
    return R"(
nodes:
  photos: {type: geo.csv_photos, params: {path: )" + (p.dir / "photos.csv").string() + R"(}}
  pairs:  {type: geo.pair_sampler, params: {positive_radius_m: 10, negative_min_m: 2000, k_neg: 0, batch_size: 4, shard_world_size: )" +
           std::to_string(world) + ", shard_rank: " + std::to_string(rank) + R"(}}
  decode: {type: image.decode_by_id, params: {path_field: path, root: )" + p.dir.string() + R"(, height: 24, width: 24}}
edges: [photos.out -> pairs.photos, photos.out -> decode.photos, pairs.out -> decode.in]
)";
  };
  // A run's rows in output order: "a-b" ids, both images, and the set of photos named.
  struct Rows {
    std::vector<std::string> keys;
    std::vector<cv::Mat> a, b;
    std::set<std::int64_t> photos;
  };
  auto rows_of = [](const GraphRun& run) {
    Rows out;
    for (const auto& r : run.records("decode")) {
      const Array& a = r->get("a_id");
      const Array& b = r->get("b_id");
      for (std::int64_t i = 0; i < a.numel(); ++i) {
        out.keys.push_back(cat(a.data<std::int64_t>()[i], "-", b.data<std::int64_t>()[i]));
        out.a.push_back(row_image(r->get("a_image"), i));
        out.b.push_back(row_image(r->get("b_image"), i));
        out.photos.insert({a.data<std::int64_t>()[i], b.data<std::int64_t>()[i]});
      }
    }
    return out;
  };
  auto run = [&](int world, int rank) { return GraphRunner(plugins(), graph(world, rank), "g.yaml").collect("decode").threads(2).run(); };

  GraphRun whole = run(1, 0), r0 = run(2, 0), r1 = run(2, 1);
  INFO(whole.message() << r0.message() << r1.message());
  REQUIRE(whole.exit_code == 0);
  REQUIRE(r0.exit_code == 0);
  REQUIRE(r1.exit_code == 0);
  const Rows w = rows_of(whole), s0 = rows_of(r0), s1 = rows_of(r1);
  REQUIRE(w.keys.size() == 6);  // each photo's one nearby partner
  REQUIRE(s0.keys.size() == 3);
  REQUIRE(s1.keys.size() == 3);
  for (std::size_t i = 0; i < w.keys.size(); ++i) {
    const Rows& s = i < 3 ? s0 : s1;
    const std::size_t j = i < 3 ? i : i - 3;
    INFO("row " << i << " " << w.keys[i]);
    CHECK(w.keys[i] == s.keys[j]);
    CHECK(same(w.a[i], s.a[j]));
    CHECK(same(w.b[i], s.b[j]));
  }
  CHECK(w.photos.size() == 6);
  CHECK_THAT(whole.message(), Catch::Contains("decoded 6 image files"));
  CHECK_THAT(r0.message(), Catch::Contains(cat("decoded ", s0.photos.size(), " image files")));
  CHECK_THAT(r1.message(), Catch::Contains(cat("decoded ", s1.photos.size(), " image files")));

  std::vector<std::int64_t> only1;
  std::set_difference(s1.photos.begin(), s1.photos.end(), s0.photos.begin(), s0.photos.end(), std::back_inserter(only1));
  REQUIRE(!only1.empty());
  const std::int64_t cut = only1.front();
  const std::string file = p.paths[static_cast<std::size_t>(cut - 1)];
  fs::resize_file(file, 200);
  GraphRun broken_whole = run(1, 0), broken0 = run(2, 0), broken1 = run(2, 1);
  INFO("photo " << cut << " cut short: " << file);
  CHECK(broken0.exit_code == 0);
  CHECK(rows_of(broken0).keys == s0.keys);
  CHECK(broken_whole.exit_code != 0);
  CHECK(broken1.exit_code != 0);
  CHECK_THAT(broken1.message(), Catch::Contains(cat("photo ", cut)) && Catch::Contains(file));
  CHECK_THAT(broken_whole.message(), Catch::Contains(cat("photo ", cut)));
}
