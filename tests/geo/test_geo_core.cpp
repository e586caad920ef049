// Unit tests of the geo compute, without the engine: CSV and time parsing, the location index,
// exact pair counting (against O(n^2) brute force and scikit-learn's BallTree), and the pair
// sampler's constraints, budgets and thread-count independence (against brute force).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "cli.hpp"
#include "embedflow/error.hpp"
#include "geodesy.hpp"
#include "pair_count.hpp"
#include "pair_sampler.hpp"
#include "photo_csv.hpp"
#include "spatial_index.hpp"

using namespace embedflow;
using namespace embedflow::geo;
namespace fs = std::filesystem;

namespace {

// Reference distance written out independently of geodesy.hpp's split helpers.
double ref_distance(double lat1, double lon1, double lat2, double lon2) {
  const double p = 3.14159265358979323846 / 180.0;
  const double a = std::pow(std::sin((lat2 - lat1) * p / 2), 2) +
                   std::cos(lat1 * p) * std::cos(lat2 * p) * std::pow(std::sin((lon2 - lon1) * p / 2), 2);
  return 2 * 6371000.0 * std::asin(std::sqrt(a));
}

// Photos around Manhattan with the features that break naive samplers: identical-coordinate hot
// spots, tight clusters (many pairs within metres), a few users owning most photos, times over
// several years, and sparse background.
PhotoSet synthetic_photos(std::size_t n, std::uint64_t seed, std::size_t hot_spot = 40) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::normal_distribution<double> nd(0, 1);
  PhotoSet p;
  const double lat0 = 40.75, lon0 = -73.98;
  const double mlat = 1.0 / 111195.0, mlon = 1.0 / (111195.0 * std::cos(lat0 * kDegToRad));
  const double centres[3][2] = {{0, 0}, {800, 300}, {5000, -4000}};
  for (std::size_t i = 0; i < n; ++i) {
    double lat, lon;
    const double k = u(g);
    if (i < hot_spot) {  // one venue's default location
      lat = 40.7484;
      lon = -73.9857;
    } else if (k < 0.5) {
      const auto& c = centres[static_cast<std::size_t>(u(g) * 3)];
      lat = lat0 + (c[1] + nd(g) * 12) * mlat;
      lon = lon0 + (c[0] + nd(g) * 12) * mlon;
    } else {
      lat = lat0 + (u(g) - 0.5) * 9000 * mlat;
      lon = lon0 + (u(g) - 0.5) * 9000 * mlon;
    }
    // Six decimals like Flickr: creates further identical coordinates.
    lat = std::round(lat * 1e6) / 1e6;
    lon = std::round(lon * 1e6) / 1e6;
    p.id.push_back(static_cast<std::int64_t>(1000 + i));
    p.lat.push_back(lat);
    p.lon.push_back(lon);
    // 2012..2014, so same-month and same-year constraints bite.
    p.time.push_back(1325376000 + static_cast<std::int64_t>(u(g) * 3 * 365 * 86400));
    p.user.push_back(u(g) < 0.6 ? static_cast<std::int32_t>(u(g) * 3) : static_cast<std::int32_t>(3 + u(g) * 200));
  }
  return p;
}

struct Pairs {
  std::vector<std::int64_t> anchor, other, label;
  std::vector<double> d;
};

Pairs run_sampler(const PhotoSet& p, const SamplerConfig& c, SamplerStats* stats = nullptr) {
  PairSampler s(p, c);
  Pairs out;
  s.run([&](PairRows&& b) {
    out.anchor.insert(out.anchor.end(), b.anchor.begin(), b.anchor.end());
    out.other.insert(out.other.end(), b.other.begin(), b.other.end());
    out.label.insert(out.label.end(), b.label.begin(), b.label.end());
    out.d.insert(out.d.end(), b.distance_m.begin(), b.distance_m.end());
  });
  if (stats) *stats = s.stats();
  return out;
}

bool in_window(const SamplerConfig& c, std::int64_t ta, std::int64_t tb) {
  if (c.same_month && month_of(ta).begin != month_of(tb).begin) return false;
  if (c.same_year && year_of(ta).begin != year_of(tb).begin) return false;
  if (c.max_time_gap_s > 0 && std::llabs(ta - tb) > c.max_time_gap_s) return false;
  return true;
}

// The configuration the brute-force comparisons start from: seeded, two threads, and no
// duplicates dropped (check_against_brute_force counts partners as if none were).
SamplerConfig brute_force_base(std::uint64_t seed) {
  SamplerConfig c;
  c.duplicate_time_s = -1;
  c.seed = seed;
  c.threads = 2;
  return c;
}

// Checks every emitted row against the constraints, and each anchor's counts against the brute
// force number of valid partners: min(k, available).
void check_against_brute_force(const PhotoSet& p, const SamplerConfig& c, const Pairs& out) {
  std::map<std::int64_t, std::size_t> row_of;
  for (std::size_t i = 0; i < p.size(); ++i) row_of[p.id[i]] = i;
  std::map<std::int64_t, std::pair<std::set<std::int64_t>, std::set<std::int64_t>>> got;
  for (std::size_t r = 0; r < out.anchor.size(); ++r) {
    const std::size_t a = row_of.at(out.anchor[r]), b = row_of.at(out.other[r]);
    REQUIRE(a != b);
    const double d = ref_distance(p.lat[a], p.lon[a], p.lat[b], p.lon[b]);
    REQUIRE(out.d[r] == Approx(d).margin(1e-6));
    REQUIRE(in_window(c, p.time[a], p.time[b]));
    if (out.label[r] == 1) {
      REQUIRE(d <= c.positive_radius_m + 1e-6);
      if (c.positive_user == UserRule::same) REQUIRE(p.user[a] == p.user[b]);
      if (c.positive_user == UserRule::different) REQUIRE(p.user[a] != p.user[b]);
      REQUIRE(got[out.anchor[r]].first.insert(out.other[r]).second);  // no repeats
    } else {
      REQUIRE(out.label[r] == 0);
      REQUIRE(d >= c.negative_min_m - 1e-6);
      if (c.negative_max_m > 0) REQUIRE(d <= c.negative_max_m + 1e-6);
      REQUIRE(got[out.anchor[r]].second.insert(out.other[r]).second);
    }
  }
  // Availability by brute force (the data has no duplicates to drop: duplicate_time_s = -1).
  std::size_t anchors_with_pos = 0;
  for (std::size_t a = 0; a < p.size(); ++a) {
    std::size_t pos = 0, neg = 0;
    for (std::size_t b = 0; b < p.size(); ++b) {
      if (a == b || !in_window(c, p.time[a], p.time[b])) continue;
      const double d = ref_distance(p.lat[a], p.lon[a], p.lat[b], p.lon[b]);
      const bool user_ok = c.positive_user == UserRule::any || (c.positive_user == UserRule::same) == (p.user[a] == p.user[b]);
      if (d <= c.positive_radius_m && user_ok) ++pos;
      if (d >= c.negative_min_m && (c.negative_max_m <= 0 || d <= c.negative_max_m)) ++neg;
    }
    auto it = got.find(p.id[a]);
    if (pos == 0) {
      REQUIRE(it == got.end());
      continue;
    }
    ++anchors_with_pos;
    REQUIRE(it != got.end());
    INFO("anchor " << p.id[a] << " available positives " << pos << " negatives " << neg);
    REQUIRE(it->second.first.size() == std::min<std::size_t>(c.k_pos, pos));
    REQUIRE(it->second.second.size() == std::min<std::size_t>(c.k_neg, neg));
  }
  REQUIRE(anchors_with_pos > p.size() / 10);  // the data must exercise the positive path
}

}  // namespace

TEST_CASE("times parse as ISO 8601 and unix seconds", "[geo][csv]") {
  std::int64_t t = 0;
  struct Parsed {
    const char* text;
    TimeFormat format;
    std::int64_t seconds;
  };
  for (const Parsed& p : {Parsed{"2013-06-14T12:34:56Z", TimeFormat::automatic, 1371213296},
                          Parsed{"2013-06-14 12:34:56", TimeFormat::automatic, 1371213296},
                          Parsed{"2013-06-14T14:34:56+02:00", TimeFormat::iso8601, 1371213296},
                          Parsed{"2013-06-14T07:04:56.250-0530", TimeFormat::iso8601, 1371213296},
                          Parsed{"2013-06-14", TimeFormat::automatic, 1371168000},
                          Parsed{"1371213296", TimeFormat::automatic, 1371213296},
                          Parsed{"-1.5", TimeFormat::unix_seconds, -2}}) {
    INFO(p.text);
    CHECK(parse_time(p.text, p.format, t));
    CHECK(t == p.seconds);
  }
  CHECK(parse_time("2012-02-29", TimeFormat::iso8601, t));
  CHECK_FALSE(parse_time("2013-02-29", TimeFormat::iso8601, t));
  CHECK_FALSE(parse_time("0000-00-00 00:00:00", TimeFormat::automatic, t));
  CHECK_FALSE(parse_time("2013-06-14T25:00:00", TimeFormat::automatic, t));
  CHECK_FALSE(parse_time("yesterday", TimeFormat::automatic, t));
  CHECK_FALSE(parse_time("2013-06-14", TimeFormat::unix_seconds, t));
  CHECK_FALSE(parse_time("1371213296", TimeFormat::iso8601, t));
  // Calendar windows used by same_month / same_year.
  CHECK(month_of(1371213296).begin == 1370044800);  // 2013-06-01
  CHECK(month_of(1371213296).end == 1372636800);    // 2013-07-01
  CHECK(year_of(1371213296).begin == 1356998400);   // 2013-01-01
  CHECK(month_of(-1).begin == -31 * 86400);         // December 1969
}

TEST_CASE("CSV rows: quoting, header order, filters, bad rows with file:line", "[geo][csv]") {
  const fs::path dir = test::scratch_dir("geo_csv");
  const fs::path good = dir / "good.csv";
  test::write_file(good,
                   "user,lat,lon,id,time,accuracy,title,description\n"
                   "alice,40.75,-73.98,1,2013-06-14T12:00:00Z,16,\"Bridge, at night\",\"she said \"\"hi\"\"\nthen left\"\n"
                   "bob,40.76,-73.97,2,1371213296,12,plain,\r\n"
                   "\n"
                   "carol,41.50,-73.97,3,2013-06-14,16,outside bbox,\n"
                   "dave,40.70,-74.00,4,2013-06-15,16,,\n");
  CsvReadStats stats;
  CsvReadOptions opt;
  opt.bbox = BBox{-74.052544, 40.525070, -73.740685, 40.889249};
  opt.min_accuracy = 13;
  const PhotoColumns cols = read_photos_csv(good.string(), opt, &stats);
  REQUIRE(cols.size() == 2);
  CHECK(cols.id == std::vector<std::int64_t>{1, 4});
  CHECK(cols.title[0] == "Bridge, at night");
  CHECK(cols.description[0] == "she said \"hi\"\nthen left");
  CHECK(cols.user[1] == "dave");
  CHECK(cols.time[1] == 1371254400);
  CHECK(stats.rows == 4);
  CHECK(stats.outside_bbox == 1);
  CHECK(stats.low_accuracy == 1);

  // Line numbers count the newline inside the quoted description.
  const fs::path bad = dir / "bad.csv";
  test::write_file(bad,
                   "id,lat,lon,time,user,description\n"
                   "1,40.75,-73.98,2013-06-14,alice,\"two\nlines\"\n"
                   "2,forty,-73.98,2013-06-14,bob,x\n"
                   "3,40.75,-73.98,2013-13-01,bob,x\n"
                   "4,40.75,-73.98,2013-06-14,bob\n"
                   "5,40.75,-73.98,2013-06-14,carol,ok\n"
                   "x6,40.75,-73.98,2013-06-14,carol,id\n"
                   "7,95.0,-73.98,2013-06-14,carol,lat range\n");
  try {
    read_photos_csv(bad.string(), CsvReadOptions{});
    FAIL("a malformed row must throw");
  } catch (const DataError& e) {
    const std::string msg = e.what();
    CHECK(msg.find(bad.string() + ":4: lat 'forty'") != std::string::npos);
  }
  CsvReadOptions skip;
  skip.skip_bad_rows = true;
  const PhotoColumns kept = read_photos_csv(bad.string(), skip, &stats);
  CHECK(kept.id == std::vector<std::int64_t>{1, 5});
  CHECK(stats.bad_rows == 5);
  REQUIRE(stats.first_bad.size() == 5);
  CHECK(stats.first_bad[0].find(":4: lat") != std::string::npos);
  CHECK(stats.first_bad[1].find(":5: time '2013-13-01'") != std::string::npos);
  CHECK(stats.first_bad[2].find(":6: expected 6 fields, got 5") != std::string::npos);
  CHECK(stats.first_bad[3].find(":8: id 'x6'") != std::string::npos);
  CHECK(stats.first_bad[4].find(":9: lat '95.0'") != std::string::npos);

  const fs::path unterminated = dir / "unterminated.csv";
  test::write_file(unterminated, "id,lat,lon,time,user\n1,40.7,-73.9,2013-06-14,\"alice\n");
  CHECK_THROWS_WITH(read_photos_csv(unterminated.string(), skip), Catch::Contains(":2: unterminated quoted field"));
  const fs::path missing = dir / "missing.csv";
  test::write_file(missing, "id,lat,lon,user\n1,40.7,-73.9,alice\n");
  CHECK_THROWS_WITH(read_photos_csv(missing.string(), skip), Catch::Contains("header has no 'time' column"));
}

TEST_CASE("the CSV reader handles records spanning its buffer", "[geo][csv]") {
  const fs::path f = test::scratch_dir("geo_csv_big") / "big.csv";
  std::ostringstream s;
  s << "id,lat,lon,time,user,description\n";
  const std::string long_text(3 << 20, 'x');  // larger than the 4 MiB buffer's remainder
  for (int i = 0; i < 3000; ++i) {
    s << i << ",40.7,-73.9," << 1371213296 + i << ",u" << i % 7 << ",";
    if (i == 1500) s << '"' << long_text << "\"\"q\"\"" << long_text << '"';
    else s << "\"a,\"\"b\"\"\"";
    s << "\n";
  }
  test::write_file(f, s.str());
  const PhotoColumns c = read_photos_csv(f.string(), CsvReadOptions{});
  REQUIRE(c.size() == 3000);
  CHECK(c.description[0] == "a,\"b\"");
  CHECK(c.description[1500].size() == 2 * long_text.size() + 3);
  CHECK(c.time[2999] == 1371213296 + 2999);
}

TEST_CASE("haversine matches known distances", "[geo][index]") {
  CHECK(haversine_m(40, -74, 41, -74) == Approx(6371000.0 * kDegToRad).epsilon(1e-12));
  // Brooklyn Bridge anchorages, 1825 m apart in the generator's model.
  CHECK(haversine_m(40.7, -74.0, 40.7, -74.0) == 0.0);
  CHECK(haversine_m(0, 0, 0, 180) == Approx(6371000.0 * 3.14159265358979323846).epsilon(1e-12));
}

TEST_CASE("ball and ring queries equal brute force", "[geo][index]") {
  const PhotoSet p = synthetic_photos(3000, 11);
  const LocationGroups g = group_by_location(p.lat, p.lon, {});
  REQUIRE(g.size() < p.size());  // hot spot and rounding made shared coordinates
  LocationIndex index(g.lat, g.lon);
  std::vector<std::uint32_t> got;
  std::size_t nontrivial = 0;  // queries that found more than one point
  for (std::size_t q = 0; q < g.size(); q += 7) {
    for (auto [lo, hi] : {std::pair<double, double>{0, 1}, {0, 10}, {0, 30}, {30, 100}, {500, 2000}}) {
      index.query(g.lat[q], g.lon[q], lo, hi, got);
      // The index numbers points in tree order; map back to input indices.
      std::vector<std::uint32_t> got_input;
      for (std::uint32_t t : got) got_input.push_back(index.order()[t]);
      std::sort(got_input.begin(), got_input.end());
      std::vector<std::uint32_t> want;
      for (std::uint32_t u = 0; u < g.size(); ++u) {
        const double d = ref_distance(g.lat[q], g.lon[q], g.lat[u], g.lon[u]);
        if (d >= lo && d <= hi) want.push_back(u);
      }
      REQUIRE(got_input == want);
      if (want.size() > 1) ++nontrivial;
    }
  }
  CHECK(nontrivial > 500);
}

TEST_CASE("grid pair counts equal O(n^2) brute force", "[geo][count]") {
  for (std::uint64_t seed : {1, 2}) {
    const PhotoSet p = synthetic_photos(2500, seed, 200);
    for (double r : {0.0, 1.0, 10.0, 25.0, 300.0}) {
      const PairCount grid = count_pairs_within(p.lat, p.lon, r, 2, true);
      const PairCount brute = count_pairs_brute_force(p.lat, p.lon, r);
      INFO("seed " << seed << " radius " << r);
      CHECK(grid.pairs == brute.pairs);
      CHECK(grid.per_point == brute.per_point);
      CHECK(grid.pairs >= 200 * 199 / 2);  // the hot spot alone
    }
  }
}

TEST_CASE("grid pair counts equal scikit-learn BallTree(haversine) on 100k points", "[geo][count][oracle]") {
  const PhotoSet p = synthetic_photos(100000, 5, 3000);
  const fs::path dir = test::scratch_dir("geo_sklearn");
  {
    std::ofstream f(dir / "points.f64", std::ios::binary);
    for (std::size_t i = 0; i < p.size(); ++i) {
      f.write(reinterpret_cast<const char*>(&p.lat[i]), sizeof(double));
      f.write(reinterpret_cast<const char*>(&p.lon[i]), sizeof(double));
    }
  }
  const std::string script = R"(
import sys, numpy as np
from sklearn.neighbors import BallTree
pts = np.radians(np.fromfile(sys.argv[1], dtype=np.float64).reshape(-1, 2))
tree = BallTree(pts, metric="haversine")
for r in (1.0, 10.0):
    counts = tree.query_radius(pts, r=r / 6371000.0, count_only=True)
    counts.astype(np.int64).tofile(sys.argv[2] + "_%g.i64" % r)
)";
  const auto res = test::run_python(script, {(dir / "points.f64").string(), (dir / "counts").string()});
  INFO(res.err);
  REQUIRE(res.exit_code == 0);
  for (double r : {1.0, 10.0}) {
    std::ostringstream name;
    name << "counts_" << r << ".i64";
    std::ifstream f(dir / name.str(), std::ios::binary);
    std::vector<std::int64_t> sk(p.size());
    f.read(reinterpret_cast<char*>(sk.data()), static_cast<std::streamsize>(sk.size() * sizeof(std::int64_t)));
    REQUIRE(f.gcount() == static_cast<std::streamsize>(sk.size() * sizeof(std::int64_t)));
    const PairCount grid = count_pairs_within(p.lat, p.lon, r, 2, true);
    std::size_t differ = 0;
    for (std::size_t i = 0; i < sk.size(); ++i) differ += grid.per_point[i] != sk[i];
    INFO("radius " << r << ": " << differ << " points differ");
    CHECK(differ == 0);
    std::int64_t sum = 0;
    for (auto v : sk) sum += v;
    CHECK(grid.pairs == (sum - static_cast<std::int64_t>(p.size())) / 2);
  }
}

TEST_CASE("sampled pairs meet their constraints and budgets (brute force)", "[geo][sampler]") {
  const PhotoSet p = synthetic_photos(1500, 21, 60);
  SamplerConfig base = brute_force_base(99);
  base.block_anchors = 97;  // many blocks, so block boundaries are exercised
  auto check = [&](const SamplerConfig& c) { check_against_brute_force(p, c, run_sampler(p, c)); };
  // Negatives from the ring [30 m, 100 m] around the anchor instead of beyond negative_min_m.
  auto with_ring_negatives = [](SamplerConfig c) {
    c.negative_min_m = 30;
    c.negative_max_m = 100;
    return c;
  };

  SECTION("P_{10,2000}") { check(base); }
  SECTION("P_{1,2000} with many positives per anchor") {
    SamplerConfig c = base;
    c.positive_radius_m = 1;
    c.k_pos = 7;
    c.k_neg = 3;
    check(c);
  }
  SECTION("same month, same-user positives") {
    SamplerConfig c = base;
    c.same_month = true;
    c.positive_user = UserRule::same;
    c.positive_radius_m = 30;
    check(c);
  }
  SECTION("same year, different-user positives, max time gap") {
    SamplerConfig c = base;
    c.same_year = true;
    c.max_time_gap_s = 200 * 86400;
    c.positive_user = UserRule::different;
    c.positive_radius_m = 30;
    check(c);
  }
  SECTION("ring negatives P_{10,[30,100]}") {
    SamplerConfig c = with_ring_negatives(base);
    c.k_neg = 5;
    check(c);
  }
  SECTION("superset draws: straddling leaves always left to rejection") {
    SamplerConfig c = base;
    c.unsure_fraction = 1.0;
    c.k_pos = 6;
    check(c);
    check(with_ring_negatives(c));
  }
  SECTION("straddling leaves always resolved point by point") {
    SamplerConfig c = base;
    c.unsure_fraction = 0.0;
    check(c);
    check(with_ring_negatives(c));
  }
  SECTION("negatives scarce: exact fallback") {
    // Nearly all photos lie within 3 km of each other, so rejection fails and enumeration runs.
    SamplerConfig c = base;
    c.negative_min_m = 6000;
    SamplerStats s;
    const Pairs out = run_sampler(p, c, &s);
    check_against_brute_force(p, c, out);
    CHECK(s.negative_fallbacks > 0);
  }
}

TEST_CASE("date window, duplicates and identical files are dropped", "[geo][sampler]") {
  PhotoSet p;
  auto add = [&](std::int64_t id, double lat, double lon, std::int64_t t, std::int32_t user, std::string path = "") {
    p.id.push_back(id); p.lat.push_back(lat); p.lon.push_back(lon); p.time.push_back(t); p.user.push_back(user);
    p.path.push_back(std::move(path));
  };
  const fs::path dir = test::scratch_dir("geo_dups");
  test::write_file(dir / "a.jpg", "image bytes A");
  test::write_file(dir / "b.jpg", "image bytes B");
  test::write_file(dir / "a_copy.jpg", "image bytes A");
  const std::int64_t june = 1370044800;  // 2013-06-01
  add(1, 40.75, -73.98, june + 100, 1, "a.jpg");
  add(2, 40.75, -73.98, june + 101, 1, "b.jpg");      // same spot and user, 1 s later: duplicate
  add(3, 40.75, -73.98, june + 100, 2, "a_copy.jpg"); // other user, same file contents: duplicate
  add(4, 40.75, -73.98, june + 500, 1);               // 400 s later: kept
  add(5, 40.75001, -73.98, june + 100, 3);            // 1.1 m away: kept
  add(6, 40.80, -73.98, june + 100, 4);               // 5.6 km away: a negative
  add(7, 40.75, -73.98, june - 100, 4);               // May: outside the window
  SamplerConfig c;
  c.date_from = june;
  c.date_to = june + 30 * 86400;
  c.image_root = dir.string();
  c.k_pos = 10;
  SamplerStats s;
  const Pairs out = run_sampler(p, c, &s);
  CHECK(s.outside_dates == 1);
  CHECK(s.duplicates == 1);
  CHECK(s.duplicate_files == 1);
  CHECK(s.kept == 4);
  std::set<std::int64_t> seen(out.anchor.begin(), out.anchor.end());
  seen.insert(out.other.begin(), out.other.end());
  CHECK(seen == std::set<std::int64_t>{1, 4, 5, 6});

  c.image_root = (dir / "nowhere").string();
  CHECK_THROWS_WITH(PairSampler(p, c), Catch::Contains("cannot read image file"));
}

TEST_CASE("time-lapse positives come from one user's consecutive frames", "[geo][sampler]") {
  PhotoSet p = synthetic_photos(2000, 3, 0);
  // A 300-frame time-lapse, one frame every 10 minutes from one spot, and a second user at the
  // same spot whose frames are too sparse (2 h apart) to form a sequence.
  for (int i = 0; i < 300; ++i) {
    p.id.push_back(900000 + i); p.lat.push_back(40.6829); p.lon.push_back(-73.9755);
    p.time.push_back(1369008000 + i * 600); p.user.push_back(777);
  }
  for (int i = 0; i < 150; ++i) {
    p.id.push_back(950000 + i); p.lat.push_back(40.6829); p.lon.push_back(-73.9755);
    p.time.push_back(1369008000 + i * 7200); p.user.push_back(778);
  }
  SamplerConfig c;
  c.mode = PositiveMode::timelapse;
  c.timelapse_gap_s = 3600;
  c.timelapse_min_frames = 100;
  c.k_pos = 3;
  c.seed = 5;
  SamplerStats s;
  const Pairs out = run_sampler(p, c, &s);
  CHECK(s.timelapse_sequences == 1);
  CHECK(s.timelapse_frames == 300);
  std::map<std::int64_t, int> pos_per_anchor;
  for (std::size_t r = 0; r < out.anchor.size(); ++r) {
    REQUIRE(out.anchor[r] >= 900000);
    REQUIRE(out.anchor[r] < 900300);
    if (out.label[r] == 1) {
      REQUIRE(out.other[r] >= 900000);
      REQUIRE(out.other[r] < 900300);
      REQUIRE(std::llabs(out.other[r] - out.anchor[r]) <= 6);  // within 3600 s = 6 frames
      ++pos_per_anchor[out.anchor[r]];
    } else {
      REQUIRE(out.d[r] >= c.negative_min_m);
    }
  }
  CHECK(pos_per_anchor.size() == 300);
  for (auto [a, n] : pos_per_anchor) REQUIRE(n == 3);
}

TEST_CASE("output is identical for 1 and 2 threads and depends on the seed", "[geo][sampler]") {
  const PhotoSet p = synthetic_photos(20000, 8, 500);
  SamplerConfig c;
  c.block_anchors = 1000;
  c.seed = 1;
  c.threads = 1;
  const Pairs one = run_sampler(p, c);
  c.threads = 2;
  const Pairs two = run_sampler(p, c);
  REQUIRE(one.anchor.size() > 10000);
  CHECK(one.anchor == two.anchor);
  CHECK(one.other == two.other);
  CHECK(one.d == two.d);
  c.seed = 2;
  const Pairs other_seed = run_sampler(p, c);
  CHECK(other_seed.other != one.other);
}

TEST_CASE("a 20k-photo hot spot: every anchor draws, spread over the whole spot", "[geo][sampler]") {
  // Per-location grouping keeps a hot spot at O(group * k) candidate visits rather than
  // O(group^2); speed is tools/bench/geo_pairs' business (generated photos, whose venues share
  // coordinates), not a wall-clock bound here, which a loaded machine makes flaky.
  const PhotoSet p = synthetic_photos(25000, 4, 20000);
  SamplerConfig c;
  c.k_pos = 4;
  c.threads = 2;
  SamplerStats s;
  const Pairs out = run_sampler(p, c, &s);
  CHECK(s.anchors_with_positive >= 20000);
  // Draws within the hot spot are spread over it, not stuck on neighbours in storage order.
  std::set<std::int64_t> partners;
  for (std::size_t r = 0; r < out.anchor.size(); ++r)
    if (out.label[r] == 1 && out.anchor[r] < 1000 + 20000) partners.insert(out.other[r]);
  CHECK(partners.size() > 19000);  // 80k draws over 20k members: ~98% are hit
}

TEST_CASE("triplets pair each anchor's i-th positive with its i-th negative", "[geo][sampler]") {
  const PhotoSet p = synthetic_photos(3000, 13, 30);
  SamplerConfig c;
  c.k_pos = 3;
  c.k_neg = 2;
  c.duplicate_time_s = -1;
  PairSampler s(p, c);
  std::vector<PairRows> blocks;
  s.run([&](PairRows&& b) { blocks.push_back(std::move(b)); });
  std::size_t anchors = 0, triplets = 0;
  for (const PairRows& b : blocks) {
    const TripletRows t = to_triplets(b);
    // Expected from the pair rows: per anchor, min(#positives, #negatives) triplets.
    std::map<std::int64_t, std::vector<std::int64_t>> pos, neg;
    std::map<std::int64_t, std::vector<double>> pos_d, neg_d;
    for (std::size_t r = 0; r < b.size(); ++r) {
      (b.label[r] == 1 ? pos : neg)[b.anchor[r]].push_back(b.other[r]);
      (b.label[r] == 1 ? pos_d : neg_d)[b.anchor[r]].push_back(b.distance_m[r]);
    }
    std::size_t expected = 0;
    for (const auto& [a, v] : pos) expected += std::min(v.size(), neg[a].size());
    REQUIRE(t.size() == expected);
    std::map<std::int64_t, std::size_t> seen;
    for (std::size_t i = 0; i < t.size(); ++i) {
      const std::size_t k = seen[t.anchor[i]]++;
      REQUIRE(t.positive[i] == pos[t.anchor[i]][k]);
      REQUIRE(t.negative[i] == neg[t.anchor[i]][k]);
      REQUIRE(t.positive_m[i] == pos_d[t.anchor[i]][k]);
      REQUIRE(t.negative_m[i] == neg_d[t.anchor[i]][k]);
      REQUIRE(t.positive_m[i] < t.negative_m[i]);
    }
    anchors += pos.size();
    triplets += t.size();
  }
  CHECK(anchors > 300);
  CHECK(triplets >= anchors);  // every anchor with a positive also has a negative here
  CHECK(triplets <= 2 * anchors);
}

TEST_CASE("draws are uniform over photos, not over locations", "[geo][sampler]") {
  // Anchor 1 has four positives: three photos sharing one spot 2 m away and one photo 5 m away;
  // and four negatives: two photos sharing a spot 3 km away and two single photos further out.
  // A location-weighted draw would pick the lone photos half the time; a photo-uniform one a
  // quarter. 4000 seeds, k = 1: each photo is expected 1000 times (sd 27).
  PhotoSet p;
  const double m = 1.0 / 111195.0;
  auto add = [&](std::int64_t id, double dy_m, std::int32_t user) {
    p.id.push_back(id); p.lat.push_back(40.75 + dy_m * m); p.lon.push_back(-73.98);
    p.time.push_back(1370044800 + id); p.user.push_back(user);
  };
  add(1, 0, 1);
  add(2, 2, 2); add(3, 2, 3); add(4, 2, 4);
  add(5, 5, 5);
  add(6, 3000, 6); add(7, 3000, 7); add(8, 4000, 8); add(9, 5000, 9);
  // Both ways of drawing from a region: exact runs, and rejection from a superset.
  for (double fraction : {0.0, 1.0}) {
  INFO("unsure_fraction " << fraction);
  std::map<std::int64_t, int> pos, neg;
  SamplerConfig c;
  c.k_pos = 1;
  c.k_neg = 1;
  c.duplicate_time_s = -1;
  c.unsure_fraction = fraction;
  for (std::uint64_t seed = 0; seed < 4000; ++seed) {
    c.seed = seed;
    const Pairs out = run_sampler(p, c);
    for (std::size_t r = 0; r < out.anchor.size(); ++r)
      if (out.anchor[r] == 1) (out.label[r] == 1 ? pos : neg)[out.other[r]]++;
  }
  REQUIRE(pos.size() == 4);
  REQUIRE(neg.size() == 4);
  for (auto [id, n] : pos) {
    INFO("positive " << id);
    CHECK(std::abs(n - 1000) < 150);
  }
  for (auto [id, n] : neg) {
    INFO("negative " << id);
    CHECK(std::abs(n - 1000) < 150);
  }
  }
}

TEST_CASE("YFCC100M layouts: the column count picks Webscope or Multimedia Commons, templates name columns", "[geo][csv][yfcc]") {
  const fs::path dir = test::scratch_dir("geo_yfcc_core");
  // The Webscope fixture's first two rows, and the same rows in the 25-column layout (a line
  // number first, the photo hash after the id).
  std::ifstream in(test::source_dir() + "/tests/geo/data/yfcc_sample.tsv");
  std::string row1, row2;
  std::getline(in, row1);
  std::getline(in, row2);
  auto commons = [](const std::string& row, int line, const std::string& hash) {
    const std::size_t tab = row.find('\t');
    return std::to_string(line) + "\t" + row.substr(0, tab) + "\t" + hash + row.substr(tab);
  };
  test::write_file(dir / "commons.tsv", commons(row1, 0, "4e2f7a26a1dfbf165a7e30bdabf7e72a") + "\n" +
                                            commons(row2, 1, "9b1c0d2e3f405162738495a6b7c8d9e0") + "\n");
  test::write_file(dir / "webscope.tsv", row1 + "\n" + row2 + "\n");
  CsvReadOptions o;
  set_yfcc_format(o);
  o.image_template = "/img/{hash}.jpg";
  {
    PhotoCsvReader r((dir / "commons.tsv").string(), o);
    CHECK(r.layout_name() == "YFCC100M, Multimedia Commons copy, 25 columns");
    PhotoColumns c;
    REQUIRE(r.next(10, c));
    CHECK(c.id == std::vector<std::int64_t>{6185218911, 6185218912});
    CHECK(c.path == std::vector<std::string>{"/img/4e2f7a26a1dfbf165a7e30bdabf7e72a.jpg", "/img/9b1c0d2e3f405162738495a6b7c8d9e0.jpg"});
    CHECK(c.title[0] == "Brooklyn Bridge, at dawn");
    CHECK(c.user[1] == "39019111@N00");
    CHECK(c.lat[1] == 40.706120);
  }
  // {hash} exists only in the 25-column layout.
  CHECK_THROWS_WITH(PhotoCsvReader((dir / "webscope.tsv").string(), o),
                    Catch::Contains("unknown placeholder {hash}; known: id, nickname, server, farm, secret"));
  o.image_template = "photos/{farm}/{server}/{id}_{secret}.{extension_original}";
  const PhotoColumns w = read_photos_csv((dir / "webscope.tsv").string(), o);
  REQUIRE(w.size() == 2);
  CHECK(w.path[0] == "photos/8/7205/6185218911_a1b2c3d4e5.jpg");
  // A file of neither layout says what was expected.
  test::write_file(dir / "other.tsv", "1\t2\t3\n");
  CHECK_THROWS_WITH(read_photos_csv((dir / "other.tsv").string(), o),
                    Catch::Contains(":1: first row has 3 fields; expected 23 (YFCC100M, Webscope release, 23 columns) or 25"));
  // A path or image column in a CSV is relative to the CSV's folder.
  test::write_file(dir / "with_images.csv", "id,lat,lon,time,user,image\n1,40.7,-73.9,2013-06-14,a,pics/1.jpg\n2,40.7,-73.9,2013-06-14,b,/abs/2.jpg\n");
  const PhotoColumns p = read_photos_csv((dir / "with_images.csv").string(), CsvReadOptions{});
  CHECK(p.path == std::vector<std::string>{(dir / "pics" / "1.jpg").string(), "/abs/2.jpg"});
}

TEST_CASE("CSV rows with text after a closing quote, NUL bytes or invalid UTF-8 are bad rows at their line", "[geo][csv]") {
  const fs::path dir = test::scratch_dir("geo_csv_bytes");
  const fs::path bad = dir / "bytes.csv";
  test::write_file(bad, std::string("id,lat,lon,time,user,title\n"
                                    "1,40.75,-73.98,2013-06-14,alice,\"abc\"def\n"
                                    "2,40.75,-73.98,2013-06-14,bob,nul\0here\n"
                                    "3,40.75,-73.98,2013-06-14,carol,caf\xe9\n"
                                    "4,40.75,-73.98,2013-06-14,dave,\"padded\"  \n"
                                    "5,40.75,-73.98,2013-06-14,erin,caf\xc3\xa9\n",
                                    223));
  CHECK_THROWS_WITH(read_photos_csv(bad.string(), CsvReadOptions{}),
                    Catch::Contains(bad.string() + ":2: text after the closing quote of field 6"));
  CsvReadOptions skip;
  skip.skip_bad_rows = true;
  CsvReadStats stats;
  const PhotoColumns kept = read_photos_csv(bad.string(), skip, &stats);
  CHECK(kept.id == std::vector<std::int64_t>{4, 5});
  CHECK(kept.title[0] == "padded  ");
  CHECK(kept.title[1] == "caf\xc3\xa9");
  CHECK(stats.bad_rows == 3);
  REQUIRE(stats.first_bad.size() == 3);
  CHECK(stats.first_bad[1].find(":3: NUL byte") != std::string::npos);
  CHECK(stats.first_bad[2].find(":4: invalid UTF-8 (sequence cut off at the end)") != std::string::npos);
}

TEST_CASE("k far above the candidates takes every candidate, exactly as brute force finds them", "[geo][sampler]") {
  // 200 photos and k = 10^9: each anchor's partners are then all of its valid partners, so the
  // expected pairs are fixed; the draw costs what the candidates cost, not what k asks.
  const PhotoSet p = synthetic_photos(200, 5, 30);
  SamplerConfig base = brute_force_base(3);
  base.k_pos = 1000000000;
  base.k_neg = 1000000000;
  SECTION("radius positives, open-ended negatives") {
    check_against_brute_force(p, base, run_sampler(p, base));
  }
  SECTION("ring negatives, superset draws") {
    SamplerConfig c = base;
    c.negative_min_m = 30;
    c.negative_max_m = 3000;
    c.unsure_fraction = 1.0;
    check_against_brute_force(p, c, run_sampler(p, c));
  }
  SECTION("windowed, different-user positives, scarce negatives") {
    SamplerConfig c = base;
    c.same_year = true;
    c.positive_user = UserRule::different;
    c.positive_radius_m = 30;
    c.negative_min_m = 6000;
    check_against_brute_force(p, c, run_sampler(p, c));
  }
  SECTION("ring negatives within a time window") {
    SamplerConfig c = base;
    c.max_time_gap_s = 400 * 86400;
    c.negative_min_m = 30;
    c.negative_max_m = 3000;
    check_against_brute_force(p, c, run_sampler(p, c));
  }
}

TEST_CASE("a photo id on two rows: the CSV reader names both lines or keeps the first; the sampler refuses it", "[geo][csv][sampler]") {
  // 70,000 rows (the id table grows past its first sizes); every 7,000th row repeats an earlier id.
  const fs::path dir = test::scratch_dir("geo_duplicate_ids");
  std::string text = "id,lat,lon,time,user\n";
  for (int i = 0; i < 70000; ++i) {
    const int id = i % 7000 == 6999 ? i - 5000 : i;
    text += std::to_string(id) + ",40.7" + std::to_string(i % 1000) + ",-73.9,2013-06-14T10:00:00,u" + std::to_string(i % 97) + "\n";
  }
  test::write_file(dir / "p.csv", text);
  CsvReadOptions o;
  // Row 6999 (line 7001) repeats id 1999 (line 2001).
  CHECK_THROWS_WITH(read_photos_csv((dir / "p.csv").string(), o),
                    Catch::Contains("p.csv:7001: photo id 1999 repeats the id of line 2001") &&
                        Catch::Contains("duplicate_ids: keep_first"));
  o.duplicate_ids = DuplicateIds::keep_first;
  CsvReadStats stats;
  const PhotoColumns kept = read_photos_csv((dir / "p.csv").string(), o, &stats);
  CHECK(stats.duplicate_ids == 10);
  CHECK(kept.size() == 69990);
  CHECK(std::set<std::int64_t>(kept.id.begin(), kept.id.end()).size() == kept.size());
  REQUIRE(stats.first_duplicates.size() == 5);
  CHECK_THAT(stats.first_duplicates[1], Catch::EndsWith("p.csv:14001: photo id 8999 repeats the id of line 9001"));
  CHECK_THAT(describe(stats), Catch::Contains("10 repeated ids (first row kept)"));

  // The sampler, fed a photo set with an id twice (any source), refuses it: photo 1 would be
  // its own positive at 1.1 m.
  PhotoSet p;
  auto add = [&](std::int64_t id, double lat, std::int32_t user) {
    p.id.push_back(id); p.lat.push_back(lat); p.lon.push_back(-73.98); p.time.push_back(1370044800); p.user.push_back(user);
  };
  add(1, 40.75, 1);
  add(2, 40.75, 2);
  add(1, 40.75001, 3);
  add(3, 40.80, 4);
  SamplerConfig c;
  c.k_pos = 10;
  CHECK_THROWS_WITH(PairSampler(p, c), Catch::Contains("photo id 1 appears twice among the photos (rows 0 and 2"));
  // Without the repeat, no pair joins a photo with itself.
  p.id[2] = 5;
  const Pairs out = run_sampler(p, c);
  REQUIRE(!out.anchor.empty());
  for (std::size_t i = 0; i < out.anchor.size(); ++i) CHECK(out.anchor[i] != out.other[i]);
}

TEST_CASE("max_rows bounds the pair rows drawn: past it sampling stops with an error, below it output is unchanged", "[geo][sampler]") {
  // k far above the candidates asks for every pair: 2000 photos, ~2000 rows an anchor.
  const PhotoSet p = synthetic_photos(2000, 9, 30);
  SamplerConfig c = brute_force_base(3);
  c.k_neg = 1000000000;
  c.block_anchors = 64;  // many blocks and waves, as on a large set
  SamplerStats s;
  const Pairs all = run_sampler(p, c, &s);
  REQUIRE(all.anchor.size() > 100000);
  SamplerConfig bounded = c;
  bounded.max_rows = 50000;
  std::size_t handed = 0;
  PairSampler sampler(p, bounded);
  CHECK_THROWS_WITH(sampler.run([&](PairRows&& rows) { handed += rows.size(); }),
                    Catch::StartsWith("more than max_pairs = 50000 pair rows: ") && Catch::Contains("k_neg = 1000000000") &&
                        Catch::Contains("raise max_pairs"));
  // Only whole waves within the bound reached the sink.
  CHECK(handed <= 50000);
  // A bound the set fits in changes nothing.
  bounded.max_rows = all.anchor.size();
  const Pairs same = run_sampler(p, bounded);
  CHECK(same.anchor == all.anchor);
  CHECK(same.other == all.other);
}

TEST_CASE("sharded anchors: W ranks' rows concatenate to the unsharded rows; a bad place is refused", "[geo][sampler][shard]") {
  const PhotoSet p = synthetic_photos(20000, 8, 500);
  SamplerConfig c;
  c.block_anchors = 1000;
  c.seed = 5;
  c.threads = 2;
  SamplerStats whole_stats;
  const Pairs whole = run_sampler(p, c, &whole_stats);
  REQUIRE(whole.anchor.size() > 10000);
  for (std::int64_t world : {2, 3, 4}) {
    Pairs joined;
    std::int64_t anchors = 0;
    for (std::int64_t rank = 0; rank < world; ++rank) {
      c.place = {world, rank};
      SamplerStats s;
      const Pairs mine = run_sampler(p, c, &s);
      anchors += s.anchors;
      // Each rank samples about its 1/W of the anchors (whole locations: up to the largest one over).
      CHECK(std::abs(s.anchors - whole_stats.anchors / world) < 2000);
      joined.anchor.insert(joined.anchor.end(), mine.anchor.begin(), mine.anchor.end());
      joined.other.insert(joined.other.end(), mine.other.begin(), mine.other.end());
      joined.d.insert(joined.d.end(), mine.d.begin(), mine.d.end());
    }
    INFO("world " << world);
    CHECK(anchors == whole_stats.anchors);
    CHECK(joined.anchor == whole.anchor);
    CHECK(joined.other == whole.other);
    CHECK(joined.d == whole.d);
  }
  c.place = {2, 2};
  CHECK_THROWS_WITH(PairSampler(p, c), Catch::Contains("rank 2 is outside [0, 2)"));
}
