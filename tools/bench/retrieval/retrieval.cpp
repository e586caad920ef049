// Benchmark: exact retrieval evaluation through the eval core, against faiss and numpy in the
// same run, on three shapes, and LMNN on 3k x 64-d.
//
// Shapes (--shapes, comma-separated; default all three):
//   reid     --queries x --gallery x --dim (10k x 100k x 128) seeded synthetic re-id data:
//            --gallery/10 identities (5 images per camera, 2 cameras, centre ~ N(0, I) plus
//            N(0, noise^2 I) per image), one query per identity on a random camera; Euclidean,
//            same identity AND camera removed. Sparse positives (about 5 per query).
//   fashion  the 5000 Fashion-MNIST test images of classes 5-9 as raw pixels (784-d, /255),
//            cosine self-retrieval (the query itself removed): about 1000 positives per query,
//            the dense case.
//   wide     1000 x 1000 x 2048 synthetic re-id data (100 identities, 10 images each).
// Per shape and per round, interleaved: ours (BlockScorer + evaluate_retrieval: CMC, exact
// full-gallery mAP, P@1, R-precision, MAP@R), then the peer (retrieval_peer.py, a child process
// that loads the same raw arrays outside its timing) twice: faiss (IndexFlatL2, or IndexFlatIP on
// unit rows for cosine, top-k search: k = 100 for re-id, k = R = the largest positive count for
// fashion, so P@1, R-precision and MAP@R are exact there) with numpy metrics over the lists, and
// numpy alone (a float32 distance matrix by query blocks, a full argsort per row and full AP;
// left out of reid, where it takes minutes, unless --numpy-reid). Each side reports its best round
// and the spread; the ratio is ours / the faster peer, best against best. The peer also checks
// ours: first ranks against faiss's lists and the full-gallery AP of 200 random queries by a
// float64 numpy stable sort.
//
//   build/bin/bench_retrieval [--shapes reid,fashion,wide] [--rounds 3] [--threads 2]
//                             [--queries 10000] [--gallery 100000] [--dim 128] [--k 100]
//                             [--noise 1.3] [--fashion-dir /usr/share/datasets/fashion-mnist]
//                             [--numpy-reid] [--ours-only] [--lmnn-rows 3000] [--lmnn-dim 64]
//                             [--lmnn-iterations 100] [--skip-lmnn]
//
// Targets: ours <= 1.0x the faster peer on every shape; the memory ours adds to the features
// stays within the block buffers and per-query state (printed as peak RSS, features and the
// difference). Prints "key value" lines; exit code 0 when the targets are met and the
// cross-checks agree, 1 otherwise.
#include <cblas.h>
#include <sys/resource.h>
#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <random>
#include <thread>
#include <unistd.h>
#include <string>
#include <map>
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
  std::vector<std::string> shapes{"reid", "fashion", "wide"};
  std::int64_t queries = 10000, gallery = 100000;
  int dim = 128, threads = 2, k = 100, rounds = 3;
  double noise = 1.3;
  std::string fashion_dir = "/usr/share/datasets/fashion-mnist";
  bool numpy_reid = false;
  bool ours_only = false;  // profiling: skip the peers and the checks
  std::int64_t lmnn_rows = 3000;
  int lmnn_dim = 64, lmnn_iterations = 100;
  bool skip_lmnn = false;
};

[[noreturn]] void usage(const std::string& error) {
  std::fprintf(stderr,
               "bench_retrieval: %s\n"
               "usage: bench_retrieval [--shapes reid,fashion,wide] [--rounds 3] [--threads 2] [--queries 10000]\n"
               "         [--gallery 100000] [--dim 128] [--k 100] [--noise 1.3] [--fashion-dir DIR] [--numpy-reid] [--ours-only]\n"
               "         [--lmnn-rows 3000] [--lmnn-dim 64] [--lmnn-iterations 100] [--skip-lmnn]\n",
               error.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto text = [&]() -> std::string {
      if (i + 1 >= argc) usage("missing value after " + a);
      return argv[++i];
    };
    auto value = [&]() -> long long {
      const std::string t = text();
      char* end = nullptr;
      const long long v = std::strtoll(t.c_str(), &end, 10);
      if (*end || v < 1) usage(a + " needs a positive integer, got '" + t + "'");
      return v;
    };
    if (a == "--queries") o.queries = value();
    else if (a == "--gallery") o.gallery = value();
    else if (a == "--dim") o.dim = static_cast<int>(value());
    else if (a == "--threads") o.threads = static_cast<int>(value());
    else if (a == "--k") o.k = static_cast<int>(value());
    else if (a == "--rounds" || a == "--repeats") o.rounds = static_cast<int>(value());
    else if (a == "--lmnn-rows") o.lmnn_rows = value();
    else if (a == "--lmnn-dim") o.lmnn_dim = static_cast<int>(value());
    else if (a == "--lmnn-iterations") o.lmnn_iterations = static_cast<int>(value());
    else if (a == "--fashion-dir") o.fashion_dir = text();
    else if (a == "--numpy-reid") o.numpy_reid = true;
    else if (a == "--ours-only") o.ours_only = true;
    else if (a == "--shapes") {
      o.shapes.clear();
      std::stringstream list(text());
      for (std::string shape; std::getline(list, shape, ',');) {
        if (shape != "reid" && shape != "fashion" && shape != "wide")
          usage("unknown shape '" + shape + "'; expected reid, fashion or wide");
        o.shapes.push_back(shape);
      }
    } else if (a == "--noise") {
      o.noise = std::strtod(text().c_str(), nullptr);
      if (!(o.noise > 0)) usage("--noise needs a positive number");
    } else if (a == "--skip-lmnn") o.skip_lmnn = true;
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

struct Dataset {
  std::string shape;
  evalcore::DistanceKind distance = evalcore::DistanceKind::euclidean;
  bool self = false, cameras = true;
  std::int64_t nq = 0, ng = 0;
  int dim = 0, k = 100;
  std::vector<float> query, gallery;
  std::vector<std::int64_t> query_label, gallery_label, query_camera, gallery_camera;
};

Dataset make_reid(const std::string& shape, std::int64_t queries, std::int64_t gallery, int dim, double noise_level, int k) {
  std::mt19937_64 rng(42);
  std::normal_distribution<float> normal(0, 1);
  const std::int64_t ids = std::max<std::int64_t>(1, gallery / 10);
  const auto noise = static_cast<float>(noise_level);
  std::vector<float> centre(static_cast<std::size_t>(ids * dim));
  for (auto& c : centre) c = normal(rng);
  Dataset r;
  r.shape = shape, r.nq = queries, r.ng = gallery, r.dim = dim, r.k = k;
  r.gallery.reserve(static_cast<std::size_t>(gallery * dim));
  for (std::int64_t g = 0; g < gallery; ++g) {
    const std::int64_t id = g / 10 % ids;
    for (int d = 0; d < dim; ++d) r.gallery.push_back(centre[static_cast<std::size_t>(id * dim + d)] + noise * normal(rng));
    r.gallery_label.push_back(id);
    r.gallery_camera.push_back(g % 10 < 5 ? 0 : 1);
  }
  for (std::int64_t q = 0; q < queries; ++q) {
    const std::int64_t id = q % ids;
    for (int d = 0; d < dim; ++d) r.query.push_back(centre[static_cast<std::size_t>(id * dim + d)] + noise * normal(rng));
    r.query_label.push_back(id);
    r.query_camera.push_back(static_cast<std::int64_t>(rng() % 2));
  }
  return r;
}

std::vector<unsigned char> gunzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw Error(cat("cannot open ", path, " (Debian package dataset-fashion-mnist, or --fashion-dir)"));
  std::vector<unsigned char> out;
  unsigned char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.insert(out.end(), buf, buf + n);
  gzclose(f);
  if (n < 0) throw Error(cat("cannot decompress ", path));
  return out;
}

// The Fashion-MNIST test images of classes 5-9, raw pixels / 255, in file order.
Dataset make_fashion(const std::string& dir) {
  const auto images = gunzip(dir + "/t10k-images-idx3-ubyte.gz");
  const auto labels = gunzip(dir + "/t10k-labels-idx1-ubyte.gz");
  if (images.size() != 16 + 10000 * 784 || labels.size() != 8 + 10000)
    throw Error(cat("unexpected Fashion-MNIST test files in ", dir));
  Dataset r;
  r.shape = "fashion", r.distance = evalcore::DistanceKind::cosine, r.self = true, r.cameras = false, r.dim = 784;
  for (std::size_t i = 0; i < 10000; ++i) {
    const int y = labels[8 + i];
    if (y < 5) continue;
    for (std::size_t d = 0; d < 784; ++d) r.query.push_back(static_cast<float>(images[16 + i * 784 + d]) / 255.0f);
    r.query_label.push_back(y);
  }
  r.nq = r.ng = static_cast<std::int64_t>(r.query_label.size());
  std::map<std::int64_t, std::int64_t> per_class;
  for (auto y : r.query_label) per_class[y]++;
  r.k = 0;  // R: the largest number of positives of a query
  for (const auto& kv : per_class) r.k = std::max(r.k, static_cast<int>(kv.second - 1));
  return r;
}

struct Spread {
  std::vector<double> v;
  double best() const { return *std::min_element(v.begin(), v.end()); }
  double worst() const { return *std::max_element(v.begin(), v.end()); }
  std::string str() const {
    std::string s;
    for (double x : v) s += cat(s.empty() ? "" : ",", x);
    return s;
  }
};

// Runs one shape; returns whether its targets are met and its checks agree.
bool run_shape(const Dataset& data, const Options& o) {
  const MatrixView Q{data.query.data(), data.nq, data.dim};
  const MatrixView G{(data.self ? data.query : data.gallery).data(), data.ng, data.dim};
  const auto& gallery_label = data.self ? data.query_label : data.gallery_label;
  std::printf("# shape %s: %lld queries x %lld gallery x %d dims, %s%s, threads %d, load %s\n", data.shape.c_str(),
              static_cast<long long>(data.nq), static_cast<long long>(data.ng), data.dim,
              evalcore::distance_name(data.distance).c_str(), data.self ? ", self-retrieval" : ", re-id rule",
              o.threads, run_capture("cut -d' ' -f1-3 /proc/loadavg | tr -d '\\n'").c_str());

  const fs::path dir = fs::temp_directory_path() / cat("bench_retrieval_", ::getpid(), "_", data.shape);
  fs::create_directories(dir);
  write_raw(dir / "query.f32", data.query);
  write_raw(dir / "query_label.i64", data.query_label);
  if (!data.self) {
    write_raw(dir / "gallery.f32", data.gallery);
    write_raw(dir / "gallery_label.i64", data.gallery_label);
  }
  if (data.cameras) {
    write_raw(dir / "query_camera.i64", data.query_camera);
    write_raw(dir / "gallery_camera.i64", data.gallery_camera);
  }
  const bool numpy = data.shape != "reid" || o.numpy_reid;
  auto peer = [&](const std::string& mode, const std::string& check) {
    return run_capture(cat("OPENBLAS_NUM_THREADS=", o.threads, " OMP_NUM_THREADS=", o.threads, " /usr/bin/python3 ",
                           RETRIEVAL_PEER_PY, " ", dir.string(), " ", data.nq, " ", data.ng, " ", data.dim, " ", data.k, " ",
                           o.threads, " ", data.distance == evalcore::DistanceKind::cosine ? "cosine" : "l2", " ",
                           data.self ? 1 : 0, " ", data.cameras ? 1 : 0, " ", mode, " ", check));
  };

  evalcore::RetrievalOptions ro;
  ro.ranks = {1, 5, 10};
  ro.max_rank = 10;
  ro.threads = o.threads;
  ro.exclude_self = data.self;
  evalcore::RetrievalResult result;
  Spread ours, faiss_s, numpy_s;
  std::string faiss_json, numpy_json;
  try {
    for (int r = 0; r < o.rounds; ++r) {
      const auto t0 = Clock::now();
      evalcore::BlockScorer scorer({data.distance, 1.0}, Q, G);
      evalcore::RetrievalLabels labels{data.query_label.data(), gallery_label.data()};
      if (data.cameras) labels.query_camera = data.query_camera.data(), labels.gallery_camera = data.gallery_camera.data();
      result = evalcore::evaluate_retrieval(scorer, labels, ro);
      ours.v.push_back(seconds_since(t0));
      if (o.ours_only) continue;
      faiss_json = peer("faiss", "none");
      faiss_s.v.push_back(json_number(faiss_json, "peer_total_s"));
      if (numpy) {
        numpy_json = peer("numpy", "none");
        numpy_s.v.push_back(json_number(numpy_json, "peer_total_s"));
      }
    }
    if (o.ours_only) {
      fs::remove_all(dir);
      std::printf("%s_ours_s %.3f (rounds %s)\n%s_ours_map %.4f\n%s_ours_exact_positives %lld\n%s_ours_exact_negatives %lld\n",
                  data.shape.c_str(), ours.best(), ours.str().c_str(), data.shape.c_str(), result.summary.map,
                  data.shape.c_str(), static_cast<long long>(result.summary.exact_positives), data.shape.c_str(),
                  static_cast<long long>(result.summary.exact_negatives));
      return true;
    }
    std::vector<std::int64_t> first;
    std::vector<double> ap;
    for (const auto& q : result.queries) first.push_back(q.first_rank), ap.push_back(q.ap);
    write_raw(dir / "ours_first_rank.i64", first);
    write_raw(dir / "ours_ap.f64", ap);
    faiss_json = peer("faiss", "200");
  } catch (...) {
    fs::remove_all(dir);
    throw;
  }
  fs::remove_all(dir);

  const double rss = peak_rss_mb();
  const double features_mb =
      static_cast<double>((data.query.size() + data.gallery.size()) * sizeof(float)) / (1024.0 * 1024.0);
  const auto& s = result.summary;
  const std::string p = data.shape + "_";
  std::printf("%sours_s %.3f (rounds %s)\n", p.c_str(), ours.best(), ours.str().c_str());
  std::printf("%sours_rank1 %.4f\n%sours_map %.4f\n%sours_p_at_1 %.4f\n%sours_r_precision %.4f\n%sours_map_at_r %.4f\n",
              p.c_str(), s.cmc[0], p.c_str(), s.map, p.c_str(), s.p_at_1, p.c_str(), s.r_precision, p.c_str(), s.map_at_r);
  std::printf("%sours_evaluated %lld\n%stolerance_violations %lld\n", p.c_str(), static_cast<long long>(s.evaluated),
              p.c_str(), static_cast<long long>(s.tolerance_violations));
  std::printf("%sours_exact_positives %lld\n%sours_exact_negatives %lld\n%sours_exact_pass %s\n", p.c_str(),
              static_cast<long long>(s.exact_positives), p.c_str(), static_cast<long long>(s.exact_negatives), p.c_str(),
              s.dense_exact ? "dense" : "rescore");
  std::printf("%sfaiss_s %.3f (rounds %s; search %.3f)\n", p.c_str(), faiss_s.best(), faiss_s.str().c_str(),
              json_number(faiss_json, "peer_search_s"));
  for (const char* key : {"peer_rank1", "peer_p_at_1", "peer_r_precision", "peer_map_at_r", "peer_map_at_k"})
    std::printf("%sfaiss_%s %.4f\n", p.c_str(), key + 5, json_number(faiss_json, key));
  double faster = faiss_s.best();
  std::string faster_name = "faiss";
  if (numpy) {
    std::printf("%snumpy_s %.3f (rounds %s)\n%snumpy_map %.4f\n", p.c_str(), numpy_s.best(), numpy_s.str().c_str(), p.c_str(),
                json_number(numpy_json, "peer_map"));
    if (numpy_s.best() < faster) faster = numpy_s.best(), faster_name = "numpy";
  }
  std::printf("%speak_rss_mb %.1f\n%sfeatures_mb %.1f\n", p.c_str(), rss, p.c_str(), features_mb);
  for (const char* key : {"first_rank_mismatches", "first_rank_compared", "exact_ap_max_abs_diff"})
    std::printf("%s%s %.6g\n", p.c_str(), key, json_number(faiss_json, key));
  const double ratio = ours.best() / faster;
  std::printf("%sratio_ours_over_%s %.2f\n", p.c_str(), faster_name.c_str(), ratio);
  std::printf("%starget_ratio_le_1.0 %s\n", p.c_str(), ratio <= 1.0 ? "yes" : "no");
  const bool agree = json_number(faiss_json, "exact_ap_max_abs_diff") < 1e-9 &&
                     json_number(faiss_json, "first_rank_mismatches") <= 1e-3 * json_number(faiss_json, "first_rank_compared");
  std::printf("%schecks_agree %s\n", p.c_str(), agree ? "yes" : "no");
  std::fflush(stdout);
  return ratio <= 1.0 && agree;
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
  std::printf("# %u cores, %d rounds interleaved (ours, faiss, numpy)\n", std::thread::hardware_concurrency(), o.rounds);
  for (const auto& shape : o.shapes) {
    Dataset data = shape == "reid"      ? make_reid("reid", o.queries, o.gallery, o.dim, o.noise, o.k)
                   : shape == "fashion" ? make_fashion(o.fashion_dir)
                                        : make_reid("wide", 1000, 1000, 2048, o.noise, o.k);
    ok = run_shape(data, o) && ok;
  }
  std::printf("peak_rss_mb %.1f\n", peak_rss_mb());

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
