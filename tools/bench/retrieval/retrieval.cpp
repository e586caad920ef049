// Benchmark: exact retrieval evaluation at scale through the eval core, against faiss
// in the same run, and LMNN on 3k x 64-d.
//
//   1. Seeded synthetic re-id data: --gallery items of --gallery/10 identities (5 per camera, 2
//      cameras, centre ~ N(0, I) plus N(0, noise^2 I) per image, --noise 1.3) and --queries queries (one per
//      identity, random camera), --dim dims, float32.
//   2. Ours: BlockScorer (euclidean) + evaluate_retrieval on --threads threads: CMC rank-1/5/10
//      and the exact full-gallery mAP under the re-id rule (same identity AND camera removed),
//      best of --repeats; peak RSS of this process after it.
//   3. Peer (retrieval_peer.py, a child process): faiss.IndexFlatL2 add + search of the top --k,
//      then numpy CMC and AP@k over the lists, on the same thread count; it also checks our first
//      ranks against its lists and our full-gallery AP on 200 queries by an exact numpy sort.
//   4. LMNN (metric core) on --lmnn-rows x --lmnn-dim (300 classes in an 8-d identity subspace,
//      4 nuisance directions of scale 2, isotropic noise): time, objective first -> last, active
//      triplets, and 3-NN accuracy on held-out points of the same classes before and after.
//
//   build/bin/bench_retrieval [--queries 10000] [--gallery 100000] [--dim 128] [--threads 2]
//                             [--k 100] [--repeats 3] [--lmnn-rows 3000] [--lmnn-dim 64]
//                             [--lmnn-iterations 100] [--noise 1.3] [--skip-lmnn]
//
// Targets: ours <= 1.5x the peer's time, peak RSS < 1 GB. Prints "key value" lines; exit code 0
// when both targets are met and the cross-checks agree, 1 otherwise.
#include <cblas.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <thread>
#include <unistd.h>
#include <string>
#include <vector>

#include "distance.hpp"
#include "embedflow/error.hpp"
#include "learners.hpp"
#include "retrieval.hpp"

using namespace embedflow;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::int64_t queries = 10000, gallery = 100000;
  int dim = 128, threads = 2, k = 100, repeats = 3;
  double noise = 1.3;
  std::int64_t lmnn_rows = 3000;
  int lmnn_dim = 64, lmnn_iterations = 100;
  bool skip_lmnn = false;
};

[[noreturn]] void usage(const std::string& error) {
  std::fprintf(stderr,
               "bench_retrieval: %s\n"
               "usage: bench_retrieval [--queries 10000] [--gallery 100000] [--dim 128] [--threads 2] [--k 100]\n"
               "         [--repeats 3] [--lmnn-rows 3000] [--lmnn-dim 64] [--lmnn-iterations 100] [--noise 1.3]\n"
               "         [--skip-lmnn]\n",
               error.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> long long {
      if (i + 1 >= argc) usage("missing value after " + a);
      char* end = nullptr;
      const long long v = std::strtoll(argv[++i], &end, 10);
      if (*end || v < 1) usage(a + " needs a positive integer, got '" + argv[i] + "'");
      return v;
    };
    if (a == "--queries") o.queries = value();
    else if (a == "--gallery") o.gallery = value();
    else if (a == "--dim") o.dim = static_cast<int>(value());
    else if (a == "--threads") o.threads = static_cast<int>(value());
    else if (a == "--k") o.k = static_cast<int>(value());
    else if (a == "--repeats") o.repeats = static_cast<int>(value());
    else if (a == "--lmnn-rows") o.lmnn_rows = value();
    else if (a == "--lmnn-dim") o.lmnn_dim = static_cast<int>(value());
    else if (a == "--lmnn-iterations") o.lmnn_iterations = static_cast<int>(value());
    else if (a == "--noise") {
      if (i + 1 >= argc) usage("missing value after --noise");
      o.noise = std::strtod(argv[++i], nullptr);
      if (!(o.noise > 0)) usage("--noise needs a positive number");
    }
    else if (a == "--skip-lmnn") o.skip_lmnn = true;
    else usage("unknown option '" + a + "'");
  }
  if (o.gallery < 20) usage("--gallery must be at least 20");
  return o;
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

template <class T>
void write_raw(const fs::path& p, const std::vector<T>& v) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
  if (!f) throw Error(cat("cannot write ", p.string()));
}

std::string run_capture(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) throw Error(cat("cannot run: ", cmd));
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  const int rc = pclose(p);
  if (rc != 0) throw Error(cat("failed (", rc, "): ", cmd, "\n", out));
  return out;
}

double json_number(const std::string& json, const std::string& key) {
  const auto pos = json.find("\"" + key + "\":");
  if (pos == std::string::npos) throw Error(cat("no '", key, "' in ", json));
  return std::stod(json.substr(pos + key.size() + 3));
}

struct ReidData {
  std::vector<float> query, gallery;
  std::vector<std::int64_t> query_label, gallery_label, query_camera, gallery_camera;
};

ReidData make_reid(const Options& o) {
  std::mt19937_64 rng(42);
  std::normal_distribution<float> normal(0, 1);
  const std::int64_t ids = std::max<std::int64_t>(1, o.gallery / 10);
  const int dim = o.dim;
  const auto noise = static_cast<float>(o.noise);
  std::vector<float> centre(static_cast<std::size_t>(ids * dim));
  for (auto& c : centre) c = normal(rng);
  ReidData r;
  r.gallery.reserve(static_cast<std::size_t>(o.gallery * dim));
  for (std::int64_t g = 0; g < o.gallery; ++g) {
    const std::int64_t id = g / 10 % ids;
    for (int d = 0; d < dim; ++d) r.gallery.push_back(centre[static_cast<std::size_t>(id * dim + d)] + noise * normal(rng));
    r.gallery_label.push_back(id);
    r.gallery_camera.push_back(g % 10 < 5 ? 0 : 1);
  }
  for (std::int64_t q = 0; q < o.queries; ++q) {
    const std::int64_t id = q % ids;
    for (int d = 0; d < dim; ++d) r.query.push_back(centre[static_cast<std::size_t>(id * dim + d)] + noise * normal(rng));
    r.query_label.push_back(id);
    r.query_camera.push_back(static_cast<std::int64_t>(rng() % 2));
  }
  return r;
}

// LMNN data: classes apart in an 8-d identity subspace, 4 nuisance directions of scale 2 that
// swamp them for Euclidean kNN, small isotropic noise.
struct LmnnData {
  std::vector<double> x;
  std::vector<std::int64_t> y;
  metriccore::Data view(int d) const { return {x.data(), static_cast<std::int64_t>(y.size()), d, y.data()}; }
};

void make_lmnn(int classes, std::int64_t rows, int dim, std::uint64_t seed, const std::vector<double>& centres,
               LmnnData& out) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0, 1);
  for (std::int64_t i = 0; i < rows; ++i) {
    const int c = static_cast<int>(i % classes);
    for (int d = 0; d < dim; ++d) {
      double v = 0.3 * normal(rng);
      if (d < 8) v += centres[static_cast<std::size_t>(c * 8 + d)];
      else if (d < 12) v += 2.0 * normal(rng);
      out.x.push_back(v);
    }
    out.y.push_back(c);
  }
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  bool ok = true;
  openblas_set_num_threads(o.threads);
  const ReidData data = make_reid(o);
  std::printf("# %lld queries x %lld gallery x %d dims, threads %d, %u cores, load %s\n", static_cast<long long>(o.queries),
              static_cast<long long>(o.gallery), o.dim, o.threads, std::thread::hardware_concurrency(),
              run_capture("cut -d' ' -f1-3 /proc/loadavg | tr -d '\\n'").c_str());

  // ---- ours --------------------------------------------------------------------------------
  evalcore::RetrievalOptions ro;
  ro.ranks = {1, 5, 10};
  ro.max_rank = 10;
  ro.threads = o.threads;
  evalcore::RetrievalResult result;
  double ours = 1e30;
  for (int r = 0; r < o.repeats; ++r) {
    const auto t0 = Clock::now();
    evalcore::BlockScorer scorer({evalcore::DistanceKind::euclidean, 1.0}, {data.query.data(), o.queries, o.dim},
                                 {data.gallery.data(), o.gallery, o.dim});
    evalcore::RetrievalLabels labels{data.query_label.data(), data.gallery_label.data(), data.query_camera.data(),
                                     data.gallery_camera.data()};
    result = evalcore::evaluate_retrieval(scorer, labels, ro);
    ours = std::min(ours, seconds_since(t0));
  }
  const double rss = peak_rss_mb();
  const auto& s = result.summary;
  std::printf("ours_s %.3f\nours_rank1 %.4f\nours_rank5 %.4f\nours_rank10 %.4f\nours_map %.4f\nours_evaluated %lld\n", ours,
              s.cmc[0], s.cmc[4], s.cmc[9], s.map, static_cast<long long>(s.evaluated));
  std::printf("peak_rss_mb %.1f\n", rss);

  // ---- peer --------------------------------------------------------------------------------
  const fs::path dir = fs::temp_directory_path() / cat("bench_retrieval_", ::getpid());
  fs::create_directories(dir);
  write_raw(dir / "query.f32", data.query);
  write_raw(dir / "gallery.f32", data.gallery);
  write_raw(dir / "query_label.i64", data.query_label);
  write_raw(dir / "gallery_label.i64", data.gallery_label);
  write_raw(dir / "query_camera.i64", data.query_camera);
  write_raw(dir / "gallery_camera.i64", data.gallery_camera);
  std::vector<std::int64_t> first;
  std::vector<double> ap;
  for (const auto& q : result.queries) first.push_back(q.first_rank), ap.push_back(q.ap);
  write_raw(dir / "ours_first_rank.i64", first);
  write_raw(dir / "ours_ap.f64", ap);
  std::string peer;
  try {
    peer = run_capture(cat("OPENBLAS_NUM_THREADS=", o.threads, " OMP_NUM_THREADS=", o.threads, " /usr/bin/python3 ",
                           RETRIEVAL_PEER_PY, " ", dir.string(), " ", o.queries, " ", o.gallery, " ", o.dim, " ", o.k, " ",
                           o.threads, " ", o.repeats, " 200"));
  } catch (...) {
    fs::remove_all(dir);
    throw;
  }
  fs::remove_all(dir);
  const double peer_s = json_number(peer, "peer_total_s");
  std::printf("# peer: faiss %s IndexFlatL2 (add + search k=%d) + numpy CMC / AP@%d, %d threads\n",
              peer.substr(peer.find("\"faiss\": \"") + 10, 5).c_str(), o.k, o.k, o.threads);
  for (const char* key : {"peer_add_s", "peer_search_s", "peer_ap_s", "peer_total_s", "peer_rank1", "peer_rank5",
                          "peer_rank10", "peer_map_at_k", "first_rank_mismatches", "first_rank_compared",
                          "exact_ap_max_abs_diff"})
    std::printf("%s %.6g\n", key, json_number(peer, key));
  const double ratio = ours / peer_s;
  std::printf("ratio_ours_over_peer %.2f\n", ratio);
  std::printf("target_ratio_le_1.5 %s\n", ratio <= 1.5 ? "yes" : "no");
  std::printf("target_rss_lt_1GB %s\n", rss < 1024 ? "yes" : "no");
  const bool agree = json_number(peer, "exact_ap_max_abs_diff") < 1e-9 &&
                     json_number(peer, "first_rank_mismatches") <= 1e-3 * json_number(peer, "first_rank_compared");
  std::printf("checks_agree %s\n", agree ? "yes" : "no");
  ok = ok && ratio <= 1.5 && rss < 1024 && agree;

  // ---- LMNN --------------------------------------------------------------------------------
  if (!o.skip_lmnn) {
    const int classes = 300, dim = o.lmnn_dim;
    if (dim < 12) usage("--lmnn-dim must be at least 12");
    std::mt19937_64 rng(7);
    std::normal_distribution<double> normal(0, 1);
    std::vector<double> centres(static_cast<std::size_t>(classes * 8));
    for (auto& c : centres) c = normal(rng);
    LmnnData train, test;
    make_lmnn(classes, o.lmnn_rows, dim, 8, centres, train);
    make_lmnn(classes, 1000, dim, 9, centres, test);
    metriccore::LmnnOptions lo;
    lo.k = 3;
    lo.max_iterations = o.lmnn_iterations;
    lo.threads = o.threads;
    const auto t0 = Clock::now();
    const auto r = metriccore::lmnn(train.view(dim), lo);
    const double secs = seconds_since(t0);
    metriccore::Transform id;
    id.in_dim = id.out_dim = dim;
    id.G = metriccore::identity(dim);
    const double before = metriccore::knn_accuracy(train.view(dim), test.view(dim), id, 3, o.threads);
    const double after = metriccore::knn_accuracy(train.view(dim), test.view(dim), r.transform, 3, o.threads);
    std::printf("# LMNN k=3, %lld x %d, %d classes, at most %d iterations\n", static_cast<long long>(o.lmnn_rows), dim, classes,
                o.lmnn_iterations);
    std::printf("lmnn_s %.3f\nlmnn_iterations %d\nlmnn_objective_before %.6g\nlmnn_objective_after %.6g\n", secs,
                r.iterations, r.objective.front(), r.objective.back());
    std::printf("lmnn_active_before %lld\nlmnn_active_after %lld\n", static_cast<long long>(r.active_triplets.front()),
                static_cast<long long>(r.active_triplets.back()));
    std::printf("lmnn_knn3_accuracy_before %.4f\nlmnn_knn3_accuracy_after %.4f\n", before, after);
    ok = ok && r.objective.back() < r.objective.front() && after > before;
  }
  return ok ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_retrieval: %s\n", e.what());
  return 2;
}
