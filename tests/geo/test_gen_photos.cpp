// gen_photos' rendered photos and truth files, checked from the outside: the tool is run as a
// process, its JPEGs decoded with OpenCV, and every property the experiment relies on measured
// on the pixels or recomputed from the truth file (render parameters) and the metadata:
// determinism and thread-count independence, byte-identical duplicates, time-lapse frames with
// one view and changing light, scenes recognisable by colour, seeds sharing no appearance,
// triplets and the retrieval split agreeing with the parameters, and the YFCC100M layout.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "cli.hpp"
#include "photo_csv.hpp"

using namespace embedflow;
using namespace embedflow::geo;
using namespace embedflow::test;
namespace fs = std::filesystem;

namespace {

struct Truth {
  std::int64_t id, source, scene;
  std::string scene_key;
  bool timelapse;
  double heading, zoom, distance, sun, brightness;
  int season;
};

std::vector<std::string> split_line(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream s(line);
  std::string cell;
  while (std::getline(s, cell, ',')) out.push_back(cell);
  return out;
}

std::map<std::int64_t, Truth> read_truth(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  REQUIRE(line == "id,source,scene,scene_key,timelapse,heading_deg,zoom,distance_m,sun_elevation_deg,brightness,season");
  std::map<std::int64_t, Truth> out;
  while (std::getline(in, line)) {
    const auto c = split_line(line);
    REQUIRE(c.size() == 11);
    Truth t{std::stoll(c[0]), std::stoll(c[1]), std::stoll(c[2]), c[3], c[4] == "1", std::stod(c[5]), std::stod(c[6]),
            std::stod(c[7]), std::stod(c[8]), std::stod(c[9]), std::stoi(c[10])};
    out[t.id] = t;
  }
  return out;
}

std::string file_bytes(const fs::path& p) { return read_file(p); }

struct Generated {
  fs::path dir, meta, images, truth, triplets, split;
};

// Runs gen_photos into `dir` with truth, triplet and split files; `extra` adds arguments.
Generated generate(const std::string& name, const std::vector<std::string>& extra) {
  Generated g;
  g.dir = scratch_dir(name);
  g.meta = g.dir / "meta.csv";
  g.images = g.dir / "images";
  g.truth = g.dir / "truth.csv";
  g.triplets = g.dir / "triplets.csv";
  g.split = g.dir / "split.csv";
  std::vector<std::string> args{GEN_PHOTOS, "--out", g.meta.string(), "--images", g.images.string(), "--truth", g.truth.string(),
                                "--triplets", g.triplets.string(), "--split", g.split.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  const Result r = run_process(args);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return g;
}

// The 12k-row city rendered small: 10 time-lapse frames, ~120 duplicates, every landmark.
const Generated& city() {
  static const Generated g = generate("gen_photos_city", {"--rows", "12000", "--seed", "3", "--image-size", "128", "--threads", "2"});
  return g;
}

cv::Mat load(const Generated& g, std::int64_t id) {
  cv::Mat m = cv::imread((g.images / (std::to_string(id) + ".jpg")).string(), cv::IMREAD_COLOR);
  REQUIRE(!m.empty());
  return m;
}

// Hue-saturation histogram, normalised; compared with the Bhattacharyya distance.
cv::Mat colour_histogram(const cv::Mat& bgr) {
  cv::Mat hsv, hist;
  cv::cvtColor(bgr, hsv, cv::COLOR_BGR2HSV);
  const int channels[] = {0, 1}, sizes[] = {30, 16};
  const float hue[] = {0, 180}, sat[] = {0, 256};
  const float* ranges[] = {hue, sat};
  cv::calcHist(&hsv, 1, channels, cv::Mat(), hist, 2, sizes, ranges);
  cv::normalize(hist, hist, 1, 0, cv::NORM_L1);
  return hist;
}

double histogram_distance(const cv::Mat& a, const cv::Mat& b) { return cv::compareHist(a, b, cv::HISTCMP_BHATTACHARYYA); }

// The strongest 8% of a blurred image's gradients, as a binary edge map: where structures are,
// whatever their brightness.
cv::Mat edge_map(const cv::Mat& bgr) {
  cv::Mat grey, gx, gy, mag;
  cv::cvtColor(bgr, grey, cv::COLOR_BGR2GRAY);
  cv::GaussianBlur(grey, grey, cv::Size(5, 5), 1.2);
  cv::Sobel(grey, gx, CV_32F, 1, 0);
  cv::Sobel(grey, gy, CV_32F, 0, 1);
  cv::magnitude(gx, gy, mag);
  std::vector<float> v(mag.begin<float>(), mag.end<float>());
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() * 0.92), v.end());
  const float threshold = v[static_cast<std::size_t>(v.size() * 0.92)];
  return mag > threshold;
}

double edge_iou(const cv::Mat& a, const cv::Mat& b) {
  cv::Mat both, either;
  cv::bitwise_and(a, b, both);
  cv::bitwise_or(a, b, either);
  return static_cast<double>(cv::countNonZero(both)) / std::max(1, cv::countNonZero(either));
}

double mean_grey(const cv::Mat& bgr) {
  cv::Mat grey;
  cv::cvtColor(bgr, grey, cv::COLOR_BGR2GRAY);
  return cv::mean(grey)[0];
}

// The triplet rule restated from the truth file: heading, zoom and light, each scaled to [0, 1].
double view_distance(const Truth& a, const Truth& b) {
  const double dh = std::fabs(std::fmod(a.heading - b.heading + 540.0, 360.0) - 180.0);
  return dh / 180.0 + std::fabs(std::log(a.zoom / b.zoom)) / std::log(4.0) + 0.5 * std::fabs(a.brightness - b.brightness) / 0.78;
}

double ref_distance(double lat1, double lon1, double lat2, double lon2) {
  const double p = 3.14159265358979323846 / 180.0;
  const double a = std::pow(std::sin((lat2 - lat1) * p / 2), 2) +
                   std::cos(lat1 * p) * std::cos(lat2 * p) * std::pow(std::sin((lon2 - lon1) * p / 2), 2);
  return 2 * 6371000.0 * std::asin(std::sqrt(a));
}

}  // namespace

TEST_CASE("gen_photos: same seed and photo id give the same bytes, for any thread count", "[geo][gen_photos]") {
  const Generated a = generate("gen_photos_det_a", {"--rows", "400", "--seed", "5", "--image-size", "200", "--threads", "1"});
  const Generated b = generate("gen_photos_det_b", {"--rows", "400", "--seed", "5", "--image-size", "200", "--threads", "2"});
  // Only the first 150 rendered: the same ids give the same files as rendering all 400.
  const Generated c =
      generate("gen_photos_det_c", {"--rows", "400", "--seed", "5", "--image-size", "200", "--threads", "2", "--image-limit", "150"});
  CHECK(file_bytes(a.truth) == file_bytes(b.truth));
  CHECK(file_bytes(a.triplets) == file_bytes(b.triplets));
  CHECK(file_bytes(a.split) == file_bytes(b.split));
  int same = 0;
  for (int id = 1; id <= 400; ++id) {
    const std::string name = std::to_string(id) + ".jpg";
    const std::string x = file_bytes(a.images / name);
    REQUIRE(x.size() > 1000);
    same += x == file_bytes(b.images / name);
    if (id <= 150) CHECK(x == file_bytes(c.images / name));
    else CHECK(!fs::exists(c.images / name));
  }
  CHECK(same == 400);
  // 4:3 landscape at the requested longest side.
  const cv::Mat m = load(a, 1);
  CHECK(m.cols == 200);
  CHECK(m.rows == 150);

  // The metadata's image column names the files, relative to the CSV's folder; rows past the
  // limit have none. The reader resolves them against the CSV's folder.
  const PhotoColumns cols = read_photos_csv(c.meta.string(), CsvReadOptions{});
  REQUIRE(cols.size() == 400);
  CHECK(cols.path[0] == (c.dir / "images" / "1.jpg").string());
  CHECK(fs::exists(cols.path[149]));
  CHECK(cols.path[150].empty());
  CHECK(read_file(c.meta).find("\n1,") != std::string::npos);
  CHECK(read_file(c.meta).find(",images/1.jpg\n") != std::string::npos);
}

TEST_CASE("gen_photos: duplicate uploads are byte-identical files, and only they are", "[geo][gen_photos]") {
  const Generated& g = city();
  const auto truth = read_truth(g.truth);
  REQUIRE(truth.size() == 12000);
  int duplicates = 0;
  for (const auto& [id, t] : truth) {
    if (t.source == id) continue;
    ++duplicates;
    CHECK(file_bytes(g.images / (std::to_string(id) + ".jpg")) == file_bytes(g.images / (std::to_string(t.source) + ".jpg")));
  }
  CHECK(duplicates >= 100);
  // Originals differ from one another (a sample of neighbours).
  for (std::int64_t id = 1; id < 300; ++id)
    if (truth.at(id).source == id && truth.at(id + 1).source == id + 1)
      CHECK(file_bytes(g.images / (std::to_string(id) + ".jpg")) != file_bytes(g.images / (std::to_string(id + 1) + ".jpg")));
}

TEST_CASE("gen_photos: time-lapse frames keep one view while the light changes", "[geo][gen_photos]") {
  const Generated& g = city();
  const auto truth = read_truth(g.truth);
  std::vector<Truth> frames;
  for (const auto& [id, t] : truth)
    if (t.timelapse && t.source == id) frames.push_back(t);
  REQUIRE(frames.size() == 10);
  // Frame pairs whose light differs clearly (the frames are 10 minutes apart over ~100 minutes).
  double tl_iou = 0, tl_brightness_gap = 0;
  int tl_pairs = 0;
  for (std::size_t i = 0; i < frames.size(); ++i)
    for (std::size_t j = i + 1; j < frames.size(); ++j) {
      CHECK(frames[i].scene == frames[j].scene);
      CHECK(frames[i].heading == frames[j].heading);
      if (std::fabs(frames[i].brightness - frames[j].brightness) < 0.05) continue;
      const cv::Mat a = load(g, frames[i].id), b = load(g, frames[j].id);
      tl_iou += edge_iou(edge_map(a), edge_map(b));
      tl_brightness_gap += std::fabs(mean_grey(a) - mean_grey(b));
      ++tl_pairs;
    }
  // The frames start at 2013-06-01T00:00Z (evening in New York): the light changes across them.
  REQUIRE(tl_pairs >= 5);
  tl_iou /= tl_pairs;
  tl_brightness_gap /= tl_pairs;
  // Other photos of the same scene, from their own views.
  double other_iou = 0;
  int other_pairs = 0;
  std::vector<std::int64_t> same_scene;
  for (const auto& [id, t] : truth)
    if (!t.timelapse && t.source == id && t.scene == frames[0].scene) same_scene.push_back(id);
  REQUIRE(same_scene.size() >= 10);
  for (std::size_t i = 0; i + 1 < same_scene.size() && other_pairs < 30; i += 2, ++other_pairs)
    other_iou += edge_iou(edge_map(load(g, same_scene[i])), edge_map(load(g, same_scene[i + 1])));
  other_iou /= other_pairs;
  INFO("time-lapse edge IoU " << tl_iou << " vs other views " << other_iou << "; brightness gap " << tl_brightness_gap);
  CHECK(tl_iou > 0.4);
  CHECK(tl_iou > 2 * other_iou);
  CHECK(tl_brightness_gap > 8);
}

TEST_CASE("gen_photos: photos of one scene are more alike in colour than photos of different scenes", "[geo][gen_photos]") {
  const Generated& g = city();
  const auto truth = read_truth(g.truth);
  // Daylight originals, by scene.
  std::map<std::int64_t, std::vector<cv::Mat>> by_scene;
  for (const auto& [id, t] : truth)
    if (t.source == id && !t.timelapse && t.scene >= 0 && t.brightness > 0.9 && by_scene[t.scene].size() < 12)
      by_scene[t.scene].push_back(colour_histogram(load(g, id)));
  std::vector<const std::vector<cv::Mat>*> scenes;
  for (const auto& [s, h] : by_scene)
    if (h.size() >= 6) scenes.push_back(&h);
  REQUIRE(scenes.size() >= 10);
  double same = 0, different = 0;
  int n_same = 0, n_different = 0;
  for (std::size_t s = 0; s < scenes.size(); ++s) {
    const auto& h = *scenes[s];
    for (std::size_t i = 0; i + 1 < h.size(); ++i) {
      same += histogram_distance(h[i], h[i + 1]);
      ++n_same;
      const auto& o = *scenes[(s + 1 + i) % scenes.size()];
      different += histogram_distance(h[i], o[i % o.size()]);
      ++n_different;
    }
  }
  same /= n_same;
  different /= n_different;
  INFO("Bhattacharyya distance same scene " << same << ", different scenes " << different);
  CHECK(same < 0.8 * different);

  // Streets far from every scene differ from one another about as much as different scenes do.
  std::vector<cv::Mat> streets;
  for (const auto& [id, t] : truth)
    if (t.source == id && t.scene < 0 && t.brightness > 0.9 && streets.size() < 20) streets.push_back(colour_histogram(load(g, id)));
  REQUIRE(streets.size() == 20);
  double street = 0;
  for (std::size_t i = 0; i + 1 < streets.size(); ++i) street += histogram_distance(streets[i], streets[i + 1]);
  street /= streets.size() - 1;
  INFO("streets " << street);
  CHECK(street > 1.15 * same);
  CHECK(street > 0.85 * different);
}

TEST_CASE("gen_photos: another seed gives scenes that share no appearance", "[geo][gen_photos]") {
  // The same landmarks at two seeds: within a seed a landmark's photos agree in colour, across
  // seeds they agree no better than two different landmarks do.
  const Generated a = generate("gen_photos_seed_a", {"--rows", "2500", "--seed", "11", "--image-size", "96", "--threads", "2"});
  const Generated b = generate("gen_photos_seed_b", {"--rows", "2500", "--seed", "12", "--image-size", "96", "--threads", "2"});
  auto mean_histograms = [](const Generated& g) {
    std::map<std::string, std::vector<cv::Mat>> parts;  // scene_key -> [first half, second half] sums
    std::map<std::string, int> count;
    for (const auto& [id, t] : read_truth(g.truth)) {
      if (t.source != id || t.timelapse || t.scene < 0 || t.scene_key.rfind("landmark:", 0) != 0 || t.brightness < 0.9) continue;
      auto& p = parts[t.scene_key];
      if (p.empty()) p = {cv::Mat(), cv::Mat()};
      cv::Mat& acc = p[count[t.scene_key]++ % 2];
      const cv::Mat h = colour_histogram(load(g, id));
      acc = acc.empty() ? h.clone() : acc + h;
    }
    for (auto& [k, p] : parts)
      for (auto& m : p)
        if (!m.empty()) cv::normalize(m, m, 1, 0, cv::NORM_L1);
    for (auto it = parts.begin(); it != parts.end();) it = count[it->first] < 8 ? parts.erase(it) : std::next(it);
    return parts;
  };
  const auto ha = mean_histograms(a), hb = mean_histograms(b);
  double within = 0, across = 0, different = 0;
  int n = 0;
  std::vector<std::string> keys;
  for (const auto& [k, p] : ha)
    if (hb.count(k)) keys.push_back(k);
  REQUIRE(keys.size() >= 8);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const auto& pa = ha.at(keys[i]);
    within += histogram_distance(pa[0], pa[1]);
    across += histogram_distance(pa[0], hb.at(keys[i])[1]);
    different += histogram_distance(pa[0], ha.at(keys[(i + 1) % keys.size()])[1]);
    ++n;
  }
  within /= n;
  across /= n;
  different /= n;
  INFO("same landmark, same seed " << within << "; same landmark, other seed " << across << "; other landmark " << different);
  CHECK(across > 1.5 * within);
  CHECK(across > 0.75 * different);
  // And the two cities' photos differ byte for byte.
  CHECK(file_bytes(a.images / "1.jpg") != file_bytes(b.images / "1.jpg"));
}

TEST_CASE("gen_photos: triplets and the retrieval split agree with the render parameters", "[geo][gen_photos]") {
  const Generated& g = city();
  const auto truth = read_truth(g.truth);
  const PhotoColumns meta = read_photos_csv(g.meta.string(), CsvReadOptions{});
  REQUIRE(meta.size() == 12000);

  // The truth's scenes follow the metadata: photos at one spot share a scene, and two photos of
  // one scene are no farther apart than the sum of their distances to its centre.
  for (std::size_t i = 0; i + 1 < 3000; ++i) {
    const Truth& t = truth.at(meta.id[i]);
    const Truth& u = truth.at(meta.id[i + 1]);
    if (t.source != t.id || u.source != u.id) continue;
    if (meta.lat[i] == meta.lat[i + 1] && meta.lon[i] == meta.lon[i + 1]) CHECK(t.scene == u.scene);
    if (t.scene >= 0 && t.scene == u.scene)
      CHECK(ref_distance(meta.lat[i], meta.lon[i], meta.lat[i + 1], meta.lon[i + 1]) <= t.distance + u.distance + 0.5);
  }
  // Views come closer as the photo nears its scene's centre.
  double near_zoom = 0, far_zoom = 0;
  int near = 0, far = 0;
  for (const auto& [id, t] : truth) {
    if (t.scene < 0) continue;
    if (t.distance < 30) { near_zoom += t.zoom; ++near; }
    if (t.distance > 200) { far_zoom += t.zoom; ++far; }
  }
  REQUIRE(near > 20);
  REQUIRE(far > 20);
  CHECK(near_zoom / near > 1.8 * far_zoom / far);

  // Triplets: query,positive,negative; easy ones take the negative from another scene, hard ones
  // from the query's scene with a view at least 0.2 farther than the positive's.
  std::ifstream in(g.triplets);
  std::string line;
  std::getline(in, line);
  REQUIRE(line == "query,positive,negative");
  int hard = 0, easy = 0;
  while (std::getline(in, line)) {
    const auto c = split_line(line);
    REQUIRE(c.size() == 3);
    const Truth &q = truth.at(std::stoll(c[0])), &p = truth.at(std::stoll(c[1])), &n = truth.at(std::stoll(c[2]));
    INFO(line);
    for (const Truth* t : {&q, &p, &n}) {
      CHECK(t->source == t->id);  // no duplicate uploads
      CHECK(!t->timelapse);
      CHECK(fs::exists(g.images / (std::to_string(t->id) + ".jpg")));
    }
    CHECK(q.id != p.id);
    CHECK(q.scene >= 0);
    CHECK(p.scene == q.scene);
    if (n.scene == q.scene) {
      ++hard;
      CHECK(n.id != q.id);
      CHECK(n.id != p.id);
      CHECK(view_distance(q, p) + 0.2 <= view_distance(q, n) + 1e-3);  // the truth file rounds
    } else {
      ++easy;
    }
  }
  CHECK(hard + easy == 1000);
  CHECK(hard > 400);  // --hard-fraction 0.5 by default
  CHECK(hard < 600);

  // The split: one label per scene, each with queries and a gallery, streets left out.
  std::ifstream sp(g.split);
  std::getline(sp, line);
  REQUIRE(line == "id,label,role");
  std::map<std::int64_t, std::pair<int, int>> roles;
  std::set<std::int64_t> seen;
  int queries = 0, total = 0;
  while (std::getline(sp, line)) {
    const auto c = split_line(line);
    REQUIRE(c.size() == 3);
    const Truth& t = truth.at(std::stoll(c[0]));
    CHECK(seen.insert(t.id).second);
    CHECK(std::stoll(c[1]) == t.scene);
    CHECK(t.scene >= 0);
    CHECK(t.source == t.id);
    CHECK((c[2] == "query" || c[2] == "gallery"));
    (c[2] == "query" ? roles[t.scene].first : roles[t.scene].second) += 1;
    queries += c[2] == "query";
    ++total;
  }
  for (const auto& [scene, r] : roles) {
    CHECK(r.first >= 1);
    CHECK(r.second >= 1);
  }
  CHECK(roles.size() >= 19);  // every landmark and the bridge, plus hot spots
  CHECK(std::fabs(static_cast<double>(queries) / total - 0.2) < 0.05);
}

TEST_CASE("gen_photos --format yfcc: the YFCC100M reader reads what the CSV reader reads", "[geo][gen_photos][yfcc]") {
  const fs::path dir = scratch_dir("gen_photos_yfcc");
  const fs::path csv = dir / "meta.csv", tsv = dir / "meta.tsv";
  for (const auto& [out, format] : {std::pair{csv, "csv"}, std::pair{tsv, "yfcc"}}) {
    const Result r = run_process({GEN_PHOTOS, "--rows", "30000", "--seed", "9", "--out", out.string(), "--format", format});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
  }
  CsvReadOptions yfcc;
  yfcc.delimiter = '\t';
  yfcc.quoting = false;
  yfcc.missing_coordinates_bad = false;
  yfcc.url_decode_text = true;
  yfcc.time_format = TimeFormat::iso8601;
  yfcc.layouts = {yfcc_columns(YfccLayout::webscope), yfcc_columns(YfccLayout::commons)};
  yfcc.image_template = "photos/{id}.jpg";
  CsvReadStats stats;
  const PhotoColumns a = read_photos_csv(csv.string(), CsvReadOptions{});
  const PhotoColumns b = read_photos_csv(tsv.string(), yfcc, &stats);
  REQUIRE(a.size() == 30000);
  REQUIRE(b.size() == 30000);
  CHECK(a.id == b.id);
  CHECK(a.lat == b.lat);
  CHECK(a.lon == b.lon);
  CHECK(a.time == b.time);
  CHECK(a.user == b.user);
  CHECK(a.accuracy == b.accuracy);
  CHECK(a.title == b.title);  // percent-decoded: commas, quotes
  CHECK(a.description == b.description);  // and newlines
  CHECK(b.path[41] == "photos/" + std::to_string(b.id[41]) + ".jpg");
  // min_accuracy 16 keeps exactly the street-level rows.
  yfcc.min_accuracy = 16;
  const PhotoColumns c = read_photos_csv(tsv.string(), yfcc, &stats);
  CHECK(static_cast<std::int64_t>(c.size()) == std::count(a.accuracy.begin(), a.accuracy.end(), 16));
  CHECK(stats.low_accuracy == 30000 - static_cast<std::int64_t>(c.size()));
}

TEST_CASE("gen_photos rejects bad arguments with a message", "[geo][gen_photos]") {
  const fs::path dir = scratch_dir("gen_photos_args");
  Result r = run_process({GEN_PHOTOS, "--rows", "10", "--out", (dir / "m.csv").string(), "--triplets", (dir / "t.csv").string()});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("need --images DIR"));
  r = run_process({GEN_PHOTOS, "--rows", "10", "--out", (dir / "m.csv").string(), "--format", "tsv"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("--format is csv or yfcc"));
  r = run_process({GEN_PHOTOS, "--rows", "10", "--out", (dir / "m.csv").string(), "--images", (dir / "i").string(),
                   "--image-size", "8"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("--image-size must be in 32..4096"));
}
