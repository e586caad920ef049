// gen_photos' rendered photos and truth files, checked from the outside: the tool is run as a
// process, its JPEGs decoded with OpenCV, and every property the experiment relies on measured
// on the pixels or recomputed from the truth file (render parameters) and the metadata:
// determinism and thread-count independence, byte-identical duplicates, time-lapse frames with
// one view and changing light, views that follow the photo's position (photos metres apart share
// facades, by the truth file and by their pixels; street photos of one cell show the same
// facades), colour that varies per photo with the camera, seeds sharing no appearance, triplets
// whose judgements agree with the parameters and that a nearest-in-metres oracle passes while a
// colour histogram does not, the retrieval split, and the YFCC100M layout.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <map>
#include <random>
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
  std::string facade_key, cell;
  int faces;
  double cam_east, cam_north, target_east, target_north, fov, kelvin;
  bool overcast;
};

std::vector<std::string> split_line(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream s(line);
  std::string cell;
  while (std::getline(s, cell, ',')) out.push_back(cell);
  if (!line.empty() && line.back() == ',') out.emplace_back();
  return out;
}

// A CSV with a header, as rows of named cells.
struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::size_t col(const std::string& name) const {
    const auto it = std::find(header.begin(), header.end(), name);
    INFO("column " << name);
    REQUIRE(it != header.end());
    return static_cast<std::size_t>(it - header.begin());
  }
};

Table read_table(const fs::path& path) {
  std::ifstream in(path);
  REQUIRE(in);
  Table t;
  std::string line;
  std::getline(in, line);
  t.header = split_line(line);
  while (std::getline(in, line)) {
    t.rows.push_back(split_line(line));
    REQUIRE(t.rows.back().size() == t.header.size());
  }
  return t;
}

double number(const std::string& s) { return s.empty() ? std::nan("") : std::stod(s); }

std::map<std::int64_t, Truth> read_truth(const fs::path& path) {
  const Table t = read_table(path);
  const std::size_t id = t.col("id"), source = t.col("source"), scene = t.col("scene"), key = t.col("scene_key"),
                    tl = t.col("timelapse"), heading = t.col("heading_deg"), zoom = t.col("zoom"), dist = t.col("distance_m"),
                    sun = t.col("sun_elevation_deg"), bright = t.col("brightness"), season = t.col("season"),
                    facade = t.col("facade_key"), faces = t.col("faces"), cell = t.col("cell"), ce = t.col("cam_east_m"),
                    cn = t.col("cam_north_m"), te = t.col("target_east_m"), tn = t.col("target_north_m"), fov = t.col("fov_deg"),
                    kelvin = t.col("kelvin"), overcast = t.col("overcast");
  std::map<std::int64_t, Truth> out;
  for (const auto& c : t.rows) {
    Truth r{std::stoll(c[id]), std::stoll(c[source]), std::stoll(c[scene]), c[key], c[tl] == "1", std::stod(c[heading]),
            std::stod(c[zoom]), std::stod(c[dist]), std::stod(c[sun]), std::stod(c[bright]), std::stoi(c[season]), c[facade], c[cell],
            std::stoi(c[faces]), std::stod(c[ce]), std::stod(c[cn]), number(c[te]), number(c[tn]), std::stod(c[fov]),
            std::stod(c[kelvin]), c[overcast] == "1"};
    out[r.id] = r;
  }
  return out;
}

std::string file_bytes(const fs::path& p) { return read_file(p); }

struct Generated {
  fs::path dir, meta, images, truth, triplets, triplet_truth, split, validation;
};

// Runs gen_photos into `dir` with truth, triplet and split files; `extra` adds arguments.
Generated generate(const std::string& name, const std::vector<std::string>& extra) {
  Generated g;
  g.dir = scratch_dir(name);
  g.meta = g.dir / "meta.csv";
  g.images = g.dir / "images";
  g.truth = g.dir / "truth.csv";
  g.triplets = g.dir / "triplets.csv";
  g.triplet_truth = g.dir / "triplets_truth.csv";  // the default name beside --triplets
  g.split = g.dir / "split.csv";
  g.validation = g.dir / "validation.csv";
  std::vector<std::string> args{GEN_PHOTOS, "--out", g.meta.string(), "--images", g.images.string(), "--truth", g.truth.string(),
                                "--triplets", g.triplets.string(), "--split", g.split.string(), "--validation",
                                g.validation.string()};
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
cv::Mat colour_histogram(const cv::Mat& bgr, int hue_bins = 30, int sat_bins = 16) {
  cv::Mat hsv, hist;
  cv::cvtColor(bgr, hsv, cv::COLOR_BGR2HSV);
  const int channels[] = {0, 1}, sizes[] = {hue_bins, sat_bins};
  const float hue[] = {0, 180}, sat[] = {0, 256};
  const float* ranges[] = {hue, sat};
  cv::calcHist(&hsv, 1, channels, cv::Mat(), hist, 2, sizes, ranges);
  cv::normalize(hist, hist, 1, 0, cv::NORM_L1);
  return hist;
}

double cosine(const cv::Mat& a, const cv::Mat& b) { return a.dot(b) / std::max(1e-12, cv::norm(a) * cv::norm(b)); }

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

// Grey 32x24 thumbnail, zero mean, unit norm: the dot product of two is their normalised
// cross-correlation, a measure of shared layout (where the structures and the sky are).
cv::Mat thumbnail(const cv::Mat& bgr) {
  cv::Mat grey, small;
  cv::cvtColor(bgr, grey, cv::COLOR_BGR2GRAY);
  cv::resize(grey, small, cv::Size(32, 24), 0, 0, cv::INTER_AREA);
  small.convertTo(small, CV_64F);
  small -= cv::mean(small)[0];
  const double n = cv::norm(small);
  if (n > 0) small /= n;
  return small;
}

double ref_distance(double lat1, double lon1, double lat2, double lon2) {
  const double p = 3.14159265358979323846 / 180.0;
  const double a = std::pow(std::sin((lat2 - lat1) * p / 2), 2) +
                   std::cos(lat1 * p) * std::cos(lat2 * p) * std::pow(std::sin((lon2 - lon1) * p / 2), 2);
  return 2 * 6371000.0 * std::asin(std::sqrt(a));
}

// Photo positions from the metadata CSV, by id.
struct Positions {
  std::map<std::int64_t, std::pair<double, double>> at;
  double metres(std::int64_t a, std::int64_t b) const {
    const auto& p = at.at(a);
    const auto& q = at.at(b);
    return ref_distance(p.first, p.second, q.first, q.second);
  }
};

Positions positions(const Generated& g) {
  const PhotoColumns meta = read_photos_csv(g.meta.string(), CsvReadOptions{});
  Positions p;
  for (std::size_t i = 0; i < meta.size(); ++i) p.at[meta.id[i]] = {meta.lat[i], meta.lon[i]};
  return p;
}

// Originals (no duplicate uploads) outside the time-lapse.
std::vector<std::int64_t> originals(const std::map<std::int64_t, Truth>& truth) {
  std::vector<std::int64_t> out;
  for (const auto& [id, t] : truth)
    if (t.source == id && !t.timelapse) out.push_back(id);
  return out;
}

struct JudgedTriplet {
  std::int64_t q, p, n;
  std::string half, kind;
};

std::vector<JudgedTriplet> read_judged(const Generated& g) {
  const Table t = read_table(g.triplet_truth);
  const std::size_t q = t.col("query"), p = t.col("positive"), n = t.col("negative"), half = t.col("half"), kind = t.col("kind");
  std::vector<JudgedTriplet> out;
  for (const auto& c : t.rows) out.push_back({std::stoll(c[q]), std::stoll(c[p]), std::stoll(c[n]), c[half], c[kind]});
  return out;
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
  CHECK(file_bytes(a.triplet_truth) == file_bytes(b.triplet_truth));
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

TEST_CASE("gen_photos: photos within 10 m share facades far more often than photos 2 km apart", "[geo][gen_photos]") {
  const Generated& g = city();
  const auto truth = read_truth(g.truth);
  const Positions pos = positions(g);
  const std::vector<std::int64_t> ids = originals(truth);
  // Pairs within 10 m (by the metadata), found by sorting on latitude; pairs >= 2 km drawn at random.
  std::vector<std::int64_t> by_lat = ids;
  std::sort(by_lat.begin(), by_lat.end(), [&](std::int64_t a, std::int64_t b) { return pos.at.at(a).first < pos.at.at(b).first; });
  std::vector<std::pair<std::int64_t, std::int64_t>> near, near_apart, far;
  for (std::size_t i = 0; i < by_lat.size(); ++i)
    for (std::size_t j = i + 1; j < by_lat.size() && (pos.at.at(by_lat[j]).first - pos.at.at(by_lat[i]).first) * 111195 <= 10; ++j) {
      const double d = pos.metres(by_lat[i], by_lat[j]);
      if (d > 10) continue;
      if (d > 0.5 && near_apart.size() < 150) near_apart.emplace_back(by_lat[i], by_lat[j]);
      else if (d <= 0.5 && near.size() < 150) near.emplace_back(by_lat[i], by_lat[j]);
    }
  std::mt19937_64 rng(7);
  while (far.size() < 150) {
    const std::int64_t a = ids[rng() % ids.size()], b = ids[rng() % ids.size()];
    if (pos.metres(a, b) >= 2000) far.emplace_back(a, b);
  }
  near.insert(near.end(), near_apart.begin(), near_apart.end());
  REQUIRE(near_apart.size() >= 40);  // not only photos at one venue's exact coordinates
  auto measure = [&](const std::vector<std::pair<std::int64_t, std::int64_t>>& pairs, double* share) {
    double ncc = 0;
    int shared = 0;
    for (const auto& [a, b] : pairs) {
      shared += truth.at(a).facade_key == truth.at(b).facade_key;
      ncc += thumbnail(load(g, a)).dot(thumbnail(load(g, b)));
    }
    *share = static_cast<double>(shared) / static_cast<double>(pairs.size());
    return ncc / static_cast<double>(pairs.size());
  };
  double share_near = 0, share_apart = 0, share_far = 0;
  const double ncc_near = measure(near, &share_near), ncc_apart = measure(near_apart, &share_apart), ncc_far = measure(far, &share_far);
  INFO("within 10 m: " << near.size() << " pairs share facades " << share_near << ", NCC " << ncc_near << "; of them 0.5-10 m apart: "
                       << near_apart.size() << " share " << share_apart << ", NCC " << ncc_apart << "; >= 2 km: share " << share_far
                       << ", NCC " << ncc_far);
  CHECK(share_near > 0.8);
  CHECK(share_apart > 0.6);
  CHECK(share_far < 0.02);
  CHECK(ncc_near > ncc_far + 0.15);
  CHECK(ncc_apart > ncc_far + 0.1);

  // The camera faces what it photographs: a scene photo's heading is the bearing from its camera
  // to its target, give or take a hand-held framing (5 deg).
  int scene_photos = 0, aimed = 0;
  for (std::int64_t id : ids) {
    const Truth& t = truth.at(id);
    if (t.scene < 0 || std::isnan(t.target_east)) continue;
    const double bearing = std::atan2(t.target_east - t.cam_east, t.target_north - t.cam_north) * 180 / 3.14159265358979323846;
    const double diff = std::fabs(std::fmod(t.heading - bearing + 540.0, 360.0) - 180.0);
    ++scene_photos;
    aimed += diff < 15;
  }
  REQUIRE(scene_photos > 1000);
  CHECK(aimed > 0.97 * scene_photos);
}

TEST_CASE("gen_photos: street photos in one cell show the same facades", "[geo][gen_photos]") {
  const Generated& g = city();
  const auto truth = read_truth(g.truth);
  const Positions pos = positions(g);
  std::map<std::string, std::vector<std::int64_t>> by_facade;
  std::vector<std::int64_t> streets;
  for (std::int64_t id : originals(truth)) {
    const Truth& t = truth.at(id);
    if (t.scene >= 0) continue;
    // A street photo's facades are its cell's, seen in one direction along the street.
    CHECK(!t.cell.empty());
    CHECK(t.facade_key.rfind(t.cell, 0) == 0);
    by_facade[t.facade_key].push_back(id);
    streets.push_back(id);
  }
  std::vector<std::pair<std::int64_t, std::int64_t>> same, other;
  for (const auto& [key, m] : by_facade)
    for (std::size_t i = 0; i + 1 < m.size() && same.size() < 120; ++i) same.emplace_back(m[i], m[i + 1]);
  REQUIRE(same.size() >= 30);
  // Street photos of other cells or directions a few hundred metres away, in the same district.
  std::mt19937_64 rng(11);
  for (int attempt = 0; attempt < 2000000 && other.size() < 120; ++attempt) {
    const std::int64_t a = streets[rng() % streets.size()], b = streets[rng() % streets.size()];
    if (truth.at(a).facade_key != truth.at(b).facade_key && pos.metres(a, b) <= 400) other.emplace_back(a, b);
  }
  REQUIRE(other.size() >= 30);
  auto ncc = [&](const std::vector<std::pair<std::int64_t, std::int64_t>>& pairs) {
    double s = 0;
    for (const auto& [a, b] : pairs) s += thumbnail(load(g, a)).dot(thumbnail(load(g, b)));
    return s / static_cast<double>(pairs.size());
  };
  const double ncc_same = ncc(same), ncc_other = ncc(other);
  INFO("one cell, one frontage or vista: NCC " << ncc_same << " (" << same.size() << " pairs); other cells or views within 400 m: NCC "
                                               << ncc_other << " (" << other.size() << " pairs)");
  CHECK(ncc_same > ncc_other + 0.07);
}

TEST_CASE("gen_photos: colour varies per photo with the camera's white balance", "[geo][gen_photos]") {
  const Generated& g = city();
  const auto truth = read_truth(g.truth);
  // Daylight photos of one facade: the place is the same, the camera's white balance is not. A
  // camera assuming a warmer light (lower kelvin) than the daylight renders the scene bluer.
  std::map<std::string, std::vector<std::pair<double, double>>> by_facade;  // mired, log(mean B / mean R)
  for (std::int64_t id : originals(truth)) {
    const Truth& t = truth.at(id);
    if (t.brightness < 0.75) continue;
    const cv::Scalar m = cv::mean(load(g, id));
    by_facade[t.facade_key].emplace_back(1e6 / t.kelvin, std::log((m[0] + 1) / (m[2] + 1)));
  }
  int pairs = 0, agree = 0;
  double spread = 0;
  int spread_n = 0;
  for (const auto& [key, v] : by_facade)
    for (std::size_t i = 0; i + 1 < v.size(); ++i) {
      const double dm = v[i].first - v[i + 1].first, dc = v[i].second - v[i + 1].second;
      spread += std::fabs(dc);
      ++spread_n;
      if (std::fabs(dm) < 40) continue;
      ++pairs;
      agree += (dm > 0) == (dc > 0);
    }
  REQUIRE(pairs >= 100);
  spread /= spread_n;
  INFO(pairs << " pairs of one facade with white balances 40+ mired apart; the bluer is the lower-kelvin one in " << agree
             << "; mean |log(B/R) difference| within a facade " << spread);
  CHECK(agree > 0.8 * pairs);
  CHECK(spread > 0.1);
}

TEST_CASE("gen_photos: another seed gives scenes that share no appearance", "[geo][gen_photos]") {
  // The same landmarks at two seeds, seen from the same side (the facade key names landmark and
  // side): within a seed the photos of one side agree in layout (mean grey thumbnail of each
  // half of its photos, compared by normalised cross-correlation), across seeds they agree no
  // better than two different landmark sides do.
  const Generated a = generate("gen_photos_seed_a", {"--rows", "2500", "--seed", "11", "--image-size", "96", "--threads", "2"});
  const Generated b = generate("gen_photos_seed_b", {"--rows", "2500", "--seed", "12", "--image-size", "96", "--threads", "2"});
  auto mean_thumbnails = [](const Generated& g) {
    std::map<std::string, std::array<cv::Mat, 2>> parts;  // facade key -> [first half, second half] sums
    std::map<std::string, int> count;
    for (const auto& [id, t] : read_truth(g.truth)) {
      if (t.source != id || t.timelapse || t.scene_key.rfind("landmark:", 0) != 0 || t.brightness < 0.75) continue;
      cv::Mat& acc = parts[t.facade_key][count[t.facade_key]++ % 2];
      const cv::Mat th = thumbnail(load(g, id));
      acc = acc.empty() ? th.clone() : acc + th;
    }
    for (auto it = parts.begin(); it != parts.end();) it = count[it->first] < 6 ? parts.erase(it) : std::next(it);
    for (auto& [k, p] : parts)
      for (auto& m : p) {
        m -= cv::mean(m)[0];
        m /= std::max(1e-12, cv::norm(m));
      }
    return parts;
  };
  const auto ta = mean_thumbnails(a), tb = mean_thumbnails(b);
  std::vector<std::string> keys;
  for (const auto& [k, p] : ta)
    if (tb.count(k)) keys.push_back(k);
  REQUIRE(keys.size() >= 8);
  double within = 0, across = 0, different = 0;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const auto& pa = ta.at(keys[i]);
    within += pa[0].dot(pa[1]);
    across += pa[0].dot(tb.at(keys[i])[1]);
    different += pa[0].dot(ta.at(keys[(i + 1) % keys.size()])[1]);
  }
  const double n = static_cast<double>(keys.size());
  within /= n;
  across /= n;
  different /= n;
  INFO(keys.size() << " landmark sides; NCC same side, same seed " << within << "; same side, other seed " << across << "; other side or landmark "
                   << different);
  CHECK(within > across + 0.06);
  CHECK(across < different + 0.05);
  // And the two cities' photos differ byte for byte.
  CHECK(file_bytes(a.images / "1.jpg") != file_bytes(b.images / "1.jpg"));
}

TEST_CASE("gen_photos: triplets and the retrieval split agree with the render parameters", "[geo][gen_photos]") {
  const Generated& g = city();
  const auto truth = read_truth(g.truth);
  const PhotoColumns meta = read_photos_csv(g.meta.string(), CsvReadOptions{});
  REQUIRE(meta.size() == 12000);
  const Positions pos = positions(g);

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
  // Photographers zoom in on a far landmark: its angular size falls with distance.
  double near_zoom = 0, far_zoom = 0;
  int near = 0, far = 0;
  for (const auto& [id, t] : truth) {
    if (t.scene < 0 || t.scene_key.rfind("landmark:", 0) != 0) continue;
    if (t.distance < 30) { near_zoom += t.zoom; ++near; }
    if (t.distance > 200) { far_zoom += t.zoom; ++far; }
  }
  REQUIRE(near > 20);
  REQUIRE(far > 20);
  INFO("mean zoom within 30 m " << near_zoom / near << ", beyond 200 m " << far_zoom / far);
  CHECK(far_zoom / far > 1.15 * near_zoom / near);

  // Triplets: query,positive,negative (what eval.triplet_accuracy reads); the judgement of each,
  // row for row, in triplets_truth.csv. The positive shows the query's facade; easy negatives are
  // of another place >= 2 km away; hard ones a neighbouring scene (150-800 m between centres),
  // the other side of the query's scene, or another street cell within 400 m.
  std::ifstream in(g.triplets);
  std::string line;
  std::getline(in, line);
  REQUIRE(line == "query,positive,negative");
  const std::vector<JudgedTriplet> judged = read_judged(g);
  int hard = 0, easy = 0, row = 0;
  std::map<std::string, int> kinds;
  while (std::getline(in, line)) {
    const auto c = split_line(line);
    REQUIRE(c.size() == 3);
    REQUIRE(row < static_cast<int>(judged.size()));
    const JudgedTriplet& j = judged[static_cast<std::size_t>(row++)];
    CHECK(std::stoll(c[0]) == j.q);
    CHECK(std::stoll(c[1]) == j.p);
    CHECK(std::stoll(c[2]) == j.n);
    const Truth &q = truth.at(j.q), &p = truth.at(j.p), &n = truth.at(j.n);
    INFO(line << " " << j.half << " " << j.kind);
    for (const Truth* t : {&q, &p, &n}) {
      CHECK(t->source == t->id);  // no duplicate uploads
      CHECK(!t->timelapse);
      CHECK(fs::exists(g.images / (std::to_string(t->id) + ".jpg")));
    }
    CHECK(q.id != p.id);
    CHECK(p.facade_key == q.facade_key);
    CHECK(n.facade_key != q.facade_key);
    ++kinds[j.kind];
    if (j.half == "easy") {
      ++easy;
      CHECK(j.kind == "other_place");
      CHECK((n.scene >= 0 ? n.scene_key : n.cell) != (q.scene >= 0 ? q.scene_key : q.cell));
      CHECK(pos.metres(j.q, j.n) >= 1999);
      continue;
    }
    REQUIRE(j.half == "hard");
    ++hard;
    if (j.kind == "neighbour_scene") {
      CHECK(q.scene >= 0);
      CHECK(n.scene >= 0);
      CHECK(n.scene != q.scene);
      CHECK(pos.metres(j.q, j.n) <= 800 + q.distance + n.distance + 1);
    } else if (j.kind == "other_side") {
      CHECK(n.scene == q.scene);
      CHECK((n.faces & q.faces) == 0);
    } else {
      CHECK(j.kind == "neighbour_cell");
      CHECK(q.scene < 0);
      CHECK(n.scene < 0);
      CHECK(pos.metres(j.q, j.n) <= 401);
    }
  }
  CHECK(row == static_cast<int>(judged.size()));
  CHECK(hard + easy == 1000);
  CHECK(hard > 400);  // --hard-fraction 0.5 by default
  CHECK(hard < 600);
  CHECK(kinds["neighbour_scene"] > 100);
  CHECK(kinds["other_side"] > 50);
  CHECK(kinds["neighbour_cell"] > 30);

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

TEST_CASE("gen_photos: a nearest-in-metres oracle passes both halves of the triplets, a colour histogram does not",
          "[geo][gen_photos]") {
  // What geotags can teach: the photo taken nearer the query is the more similar. This oracle
  // must beat chance clearly on each half, or the triplets measure the renderer, not the method.
  // A 16x8 hue-saturation histogram (cosine similarity) must not reach it on the hard half: colour
  // alone does not tell neighbouring places or sides apart.
  const Generated& g = city();
  const Positions pos = positions(g);
  const std::vector<JudgedTriplet> judged = read_judged(g);
  std::map<std::int64_t, cv::Mat> hist;
  auto h = [&](std::int64_t id) -> const cv::Mat& {
    auto it = hist.find(id);
    if (it == hist.end()) it = hist.emplace(id, colour_histogram(load(g, id), 16, 8)).first;
    return it->second;
  };
  std::map<std::string, std::array<int, 3>> score;  // oracle right, histogram right, count
  for (const JudgedTriplet& j : judged)
    for (const std::string& key : {j.half, j.half + ":" + j.kind}) {
      auto& s = score[key];
      s[0] += pos.metres(j.q, j.p) < pos.metres(j.q, j.n);
      s[1] += cosine(h(j.q), h(j.p)) > cosine(h(j.q), h(j.n));
      s[2] += 1;
    }
  auto rate = [&](const std::string& key, int k) { return static_cast<double>(score[key][k]) / std::max(1, score[key][2]); };
  std::ostringstream report;
  for (const auto& [key, s] : score) report << key << ": n " << s[2] << ", oracle " << rate(key, 0) << ", histogram " << rate(key, 1) << "; ";
  INFO(report.str());
  REQUIRE(score["easy"][2] > 300);
  REQUIRE(score["hard"][2] > 300);
  CHECK(rate("easy", 0) > 0.65);
  CHECK(rate("hard", 0) > 0.65);
  for (const char* kind : {"hard:neighbour_scene", "hard:other_side", "hard:neighbour_cell"})
    if (score[kind][2] >= 20) CHECK(rate(kind, 0) > 0.65);
  CHECK(rate("hard", 1) < rate("hard", 0) - 0.15);
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
  set_yfcc_format(yfcc);
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

TEST_CASE("gen_photos --validation: a block of the city that the triplets and the split leave out", "[geo][gen_photos]") {
  // The default area: Midtown from 31st to 44th Street, river to river.
  const double south = 40.7455, west = -74.02, north = 40.7560, east = -73.96;
  const Generated& g = city();
  const auto truth = read_truth(g.truth);
  const PhotoColumns meta = read_photos_csv(g.meta.string(), CsvReadOptions{});
  std::map<std::int64_t, std::int64_t> held;  // id -> label
  {
    std::ifstream in(g.validation);
    std::string line;
    std::getline(in, line);
    REQUIRE(line == "id,label");
    while (std::getline(in, line)) {
      const auto c = split_line(line);
      REQUIRE(c.size() == 2);
      CHECK(held.emplace(std::stoll(c[0]), std::stoll(c[1])).second);
    }
  }
  REQUIRE(held.size() > 100);
  std::map<std::int64_t, std::pair<int, int>> scene_sides;  // scene -> (photos in, photos out)
  std::map<std::string, std::pair<int, int>> titles;  // a landmark photo's title: its landmark
  for (std::size_t i = 0; i < meta.size(); ++i) {
    const Truth& t = truth.at(meta.id[i]);
    const bool in = held.count(meta.id[i]) > 0;
    if (t.scene < 0) {
      // Any photo not of a scene is held out exactly when its geotag lies in the area.
      const bool inside = meta.lat[i] >= south && meta.lat[i] <= north && meta.lon[i] >= west && meta.lon[i] <= east;
      CHECK(in == inside);
    } else {
      (in ? scene_sides[t.scene].first : scene_sides[t.scene].second) += 1;
      (in ? titles[meta.title[i]].first : titles[meta.title[i]].second) += 1;
    }
    if (in) {
      // Scored with its scene only when an original photo of a scene; -1 otherwise.
      const bool original = t.source == t.id && !t.timelapse;
      CHECK(held.at(meta.id[i]) == (original && t.scene >= 0 ? t.scene : -1));
    }
  }
  // A scene is never split between the two sides; the landmarks whose centres lie in the area
  // are held out, Times Square (its centre at 40.758 N) is not. (A photo taken for a landmark
  // may show a nearer scene, so by majority.)
  int scenes_in = 0;
  for (const auto& [scene, sides] : scene_sides) {
    INFO("scene " << scene);
    CHECK((sides.first == 0 || sides.second == 0));
    scenes_in += sides.first > 0;
  }
  CHECK(scenes_in >= 4);
  for (const char* name : {"Empire State Building", "Grand Central Terminal", "Chrysler Building", "High Line"}) {
    INFO(name << ": " << titles[name].first << " held out, " << titles[name].second << " not");
    CHECK(titles[name].first > 4 * titles[name].second);
  }
  INFO("Times Square: " << titles["Times Square"].first << " held out, " << titles["Times Square"].second << " not");
  CHECK(titles["Times Square"].second > 4 * titles["Times Square"].first);
  // Neither the triplets nor the landmark split use a held-out photo.
  for (const fs::path& file : {g.triplets, g.split}) {
    std::ifstream in(file);
    std::string line;
    std::getline(in, line);
    int rows = 0;
    while (std::getline(in, line)) {
      const auto c = split_line(line);
      const std::size_t ids = file == g.triplets ? 3 : 1;
      for (std::size_t k = 0; k < ids; ++k) CHECK(held.count(std::stoll(c[k])) == 0);
      ++rows;
    }
    CHECK(rows > 100);
  }
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
  r = run_process({GEN_PHOTOS, "--rows", "10", "--out", (dir / "m.csv").string(), "--images", (dir / "i").string(),
                   "--triplet-truth", (dir / "j.csv").string()});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("--triplet-truth describes --triplets"));
  // Numbers are read whole: "1e3" is not 1 row, "2x" not 2 threads; absurd thread counts refused.
  for (const std::vector<std::string>& bad : {std::vector<std::string>{"--rows", "1e3"}, {"--threads", "2x"}, {"--seed", "-1"},
                                               {"--hard-fraction", "0.5abc"}, {"--validation-area", "40.7,-74,40.8"},
                                               {"--validation-area", "40.8,-74,40.7,-73.9"}}) {
    r = run_process({GEN_PHOTOS, "--rows", "10", "--out", (dir / "m.csv").string(), bad[0], bad[1]});
    INFO(bad[0] << " " << bad[1]);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("bad value for " + bad[0]));
  }
  r = run_process({GEN_PHOTOS, "--rows", "10", "--out", (dir / "m.csv").string(), "--threads", "100000"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("--threads must be in 1..1024"));
  CHECK(!fs::exists(dir / "m.csv"));
}
