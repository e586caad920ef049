// geo_pairs_bench: the geo.pair_sampler / exact-count benchmark behind tools/bench/geo_pairs.
//
// On a photo CSV (tools/gen_photos, 6M rows): reads it, builds the sampler's KD-tree and draws
// k_pos positives and k_neg negatives for every anchor (P_{10,2000}), then counts the photo
// pairs within 10 m exactly (grid counting) on all rows and on a seeded random subset. It writes
// the subset's lat/lon and per-point counts as raw f64/i64 files so the Python peer
// (geo_pairs_peer.py, scikit-learn BallTree) can time itself on the same points and check that
// the counts agree. Prints one "key value" line per figure.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>
#include <string>

#include "embedflow/rng.hpp"
#include "pair_count.hpp"
#include "pair_sampler.hpp"
#include "photo_csv.hpp"

using namespace embedflow::geo;

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
// Process CPU seconds (user + system): on a shared machine, wall time alone overstates cost.
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}
double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}
template <class T>
void write_raw(const std::string& path, const std::vector<T>& v) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
  if (!f) throw std::runtime_error("cannot write " + path);
}
}  // namespace

int main(int argc, char** argv) {
  std::string csv, subset_prefix;
  int threads = 2, k_pos = 4, k_neg = 4;
  double radius = 10, neg_min = 2000, neg_max = 0, unsure_fraction = -1;
  std::size_t subset = 1000000;
  bool count = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--csv") csv = v;
    else if (a == "--threads") threads = std::stoi(v);
    else if (a == "--k-pos") k_pos = std::stoi(v);
    else if (a == "--k-neg") k_neg = std::stoi(v);
    else if (a == "--radius") radius = std::stod(v);
    else if (a == "--negative-min") neg_min = std::stod(v);
    else if (a == "--negative-max") neg_max = std::stod(v);
    else if (a == "--unsure-fraction") unsure_fraction = std::stod(v);
    else if (a == "--subset") subset = std::stoul(v);
    else if (a == "--subset-prefix") subset_prefix = v;
    else if (a == "--count") count = v != "0";
    else { std::fprintf(stderr, "unknown argument %s\n", a.c_str()); return 2; }
  }
  if (csv.empty()) {
    std::fprintf(stderr, "usage: geo_pairs_bench --csv photos.csv [--threads 2] [--subset 1000000 --subset-prefix P]\n");
    return 2;
  }
  try {
    auto t0 = std::chrono::steady_clock::now();
    CsvReadOptions opt;
    opt.keep_text = false;
    PhotoColumns cols = read_photos_csv(csv, opt);
    const double t_read = seconds_since(t0);
    std::printf("photos %zu\nread_csv_s %.3f\n", cols.size(), t_read);

    t0 = std::chrono::steady_clock::now();
    PhotoSet photos;
    photos.id = std::move(cols.id);
    photos.lat = std::move(cols.lat);
    photos.lon = std::move(cols.lon);
    photos.time = std::move(cols.time);
    UserInterner users;
    photos.user.reserve(cols.user.size());
    for (const auto& u : cols.user) photos.user.push_back(users.intern(u));
    cols = PhotoColumns();
    const double t_intern = seconds_since(t0);

    SamplerConfig c;
    c.positive_radius_m = radius;
    c.negative_min_m = neg_min;
    c.negative_max_m = neg_max;
    if (unsure_fraction >= 0) c.unsure_fraction = unsure_fraction;
    c.k_pos = k_pos;
    c.k_neg = k_neg;
    c.threads = threads;
    c.seed = 7;
    t0 = std::chrono::steady_clock::now();
    const double cpu0 = cpu_seconds();
    PairSampler sampler(photos, c);
    std::int64_t rows = 0;
    sampler.run([&](PairRows&& b) { rows += static_cast<std::int64_t>(b.size()); });
    const double t_sample = seconds_since(t0);
    const double cpu_sample = cpu_seconds() - cpu0;
    const SamplerStats& s = sampler.stats();
    std::printf("users %zu\nintern_users_s %.3f\n", users.size(), t_intern);
    std::printf("sampler_kept %lld\nsampler_unique_locations %lld\nsampler_anchors_with_positive %lld\n",
                static_cast<long long>(s.kept), static_cast<long long>(s.unique_locations),
                static_cast<long long>(s.anchors_with_positive));
    std::printf("sampler_rows %lld\nsampler_positives %lld\nsampler_negatives %lld\nsampler_negative_fallbacks %lld\n",
                static_cast<long long>(rows), static_cast<long long>(s.positives), static_cast<long long>(s.negatives),
                static_cast<long long>(s.negative_fallbacks));
    std::printf("sampler_build_s %.3f\nsampler_sample_s %.3f\nsampler_total_s %.3f\nsampler_cpu_s %.3f\n",
                s.build_seconds, s.sample_seconds, t_sample, cpu_sample);

    if (!count) {
      std::printf("peak_rss_mb %.1f\n", peak_rss_mb());
      return 0;
    }
    t0 = std::chrono::steady_clock::now();
    const double cpu1 = cpu_seconds();
    const PairCount all = count_pairs_within(photos.lat, photos.lon, radius, threads, false);
    const double t_count = seconds_since(t0);
    const double cpu_count = cpu_seconds() - cpu1;
    std::printf("count_all_pairs %lld\ncount_all_unique_locations %lld\ncount_all_s %.3f\ncount_all_cpu_s %.3f\n"
                "count_all_us_per_point %.4f\n",
                static_cast<long long>(all.pairs), static_cast<long long>(all.unique_locations), t_count, cpu_count,
                1e6 * t_count / static_cast<double>(photos.lat.size()));

    // The peer's subset: a seeded uniform sample without replacement.
    const std::size_t n = photos.lat.size();
    subset = std::min(subset, n);
    std::vector<std::uint32_t> idx(n);
    std::iota(idx.begin(), idx.end(), 0u);
    embedflow::Rng rng(embedflow::derive_seed(1, "geo_pairs subset"));
    for (std::size_t i = 0; i < subset; ++i) std::swap(idx[i], idx[i + rng() % (n - i)]);
    idx.resize(subset);
    std::sort(idx.begin(), idx.end());
    std::vector<double> slat(subset), slon(subset);
    for (std::size_t i = 0; i < subset; ++i) { slat[i] = photos.lat[idx[i]]; slon[i] = photos.lon[idx[i]]; }
    t0 = std::chrono::steady_clock::now();
    const PairCount sub = count_pairs_within(slat, slon, radius, threads, true);
    const double t_sub = seconds_since(t0);
    std::printf("count_subset_points %zu\ncount_subset_pairs %lld\ncount_subset_s %.3f\ncount_subset_us_per_point %.4f\n",
                subset, static_cast<long long>(sub.pairs), t_sub, 1e6 * t_sub / static_cast<double>(subset));
    if (!subset_prefix.empty()) {
      write_raw(subset_prefix + ".lat.f64", slat);
      write_raw(subset_prefix + ".lon.f64", slon);
      write_raw(subset_prefix + ".counts.i64", sub.per_point);
    }
    std::printf("peak_rss_mb %.1f\n", peak_rss_mb());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "geo_pairs_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
