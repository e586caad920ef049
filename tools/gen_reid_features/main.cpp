// gen_reid_features — synthetic person re-identification features, written to HDF5, standing in
// for the CUHK03 ResNet-50 features of the re-identification report (which cannot be shipped).
//
// Each identity has a mean in a low-dimensional "identity" subspace; each camera adds one shift
// shared by every identity (the camera-dependent shift that makes cross-camera matching hard);
// each image adds anisotropic nuisance noise that is large in a few directions that carry no
// identity information (so plain Euclidean distance is distracted and a learned metric helps)
// and small isotropic noise. A softplus keeps features non-negative like post-ReLU CNN
// features, so the chi-square measures apply.
//
// Splits (CUHK03-like, identities disjoint between all of them): train = every image of the
// training identities; validation = every image of --val-identities further identities (the
// report held out ~100 training identities for its learning-rate schedule); for each test
// identity, query = one image per camera and gallery = the rest. Groups /train, /validation,
// /query, /gallery each hold embedding f32[N,D], label i64[N], camera i64[N], id i64[N]
// (unique image id).
//
// The defaults put plain Euclidean kNN near the report's CUHK03 baseline (about half the
// queries matched at rank 1) while leaving room for a learned metric: the nuisance directions
// and the cross-camera shift are what it has to learn to ignore.
//
// Optional CSVs of human-style judgements over gallery ids: --triplets (query,positive,negative)
// and --pairs / --val-pairs (a,b,similar).
//
//   gen_reid_features --out data/reid_128.h5 --dim 128
//   gen_reid_features --out data/reid_2048.h5 --dim 2048
#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct Options {
  std::string out, triplets, pairs, val_pairs;
  int dim = 128, identities = 300, val_identities = 50, test_identities = 200, per_camera = 5, cameras = 2;
  int identity_rank = 0;   // 0: dim / 8, at most 16
  int nuisance_rank = 0;   // 0: dim / 16, at most 8
  double identity_scale = 1.0, camera_shift = 1.25, nuisance_scale = 0.8;
  double noise = -1;       // < 0: 0.35 * (128 / dim)^(1/4) above 128 dims, else 0.35
  std::uint64_t seed = 1;
  int judgements = 2000;
};

[[noreturn]] void usage(const std::string& error) {
  std::fprintf(stderr,
               "gen_reid_features: %s\n"
               "usage: gen_reid_features --out FILE.h5 [--dim 128] [--identities 300] [--val-identities 50]\n"
               "         [--test-identities 200] [--per-camera 5] [--cameras 2] [--camera-shift 1.25]\n"
               "         [--nuisance 0.8] [--noise 0.35*(128/D)^0.25]\n"
               "         [--identity-rank min(16,D/8)] [--nuisance-rank min(8,D/16)] [--seed 1]\n"
               "         [--triplets FILE.csv] [--pairs FILE.csv] [--val-pairs FILE.csv] [--judgements 2000]\n",
               error.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage("missing value after " + a);
      return argv[++i];
    };
    auto integer = [&](int lo) {
      std::string v = next();
      char* end = nullptr;
      long x = std::strtol(v.c_str(), &end, 10);
      if (*end || x < lo) usage(a + " needs an integer >= " + std::to_string(lo) + ", got '" + v + "'");
      return static_cast<int>(x);
    };
    auto number = [&]() {
      std::string v = next();
      char* end = nullptr;
      double x = std::strtod(v.c_str(), &end);
      if (*end || !(x >= 0)) usage(a + " needs a number >= 0, got '" + v + "'");
      return x;
    };
    if (a == "--out") o.out = next();
    else if (a == "--dim") o.dim = integer(2);
    else if (a == "--identities") o.identities = integer(1);
    else if (a == "--val-identities") o.val_identities = integer(0);
    else if (a == "--test-identities") o.test_identities = integer(2);
    else if (a == "--per-camera") o.per_camera = integer(1);
    else if (a == "--cameras") o.cameras = integer(2);
    else if (a == "--identity-rank") o.identity_rank = integer(1);
    else if (a == "--nuisance-rank") o.nuisance_rank = integer(0);
    else if (a == "--camera-shift") o.camera_shift = number();
    else if (a == "--nuisance") o.nuisance_scale = number();
    else if (a == "--noise") o.noise = number();
    else if (a == "--seed") o.seed = static_cast<std::uint64_t>(integer(0));
    else if (a == "--triplets") o.triplets = next();
    else if (a == "--pairs") o.pairs = next();
    else if (a == "--val-pairs") o.val_pairs = next();
    else if (a == "--judgements") o.judgements = integer(1);
    else if (a == "--help" || a == "-h") usage("help");
    else usage("unknown option '" + a + "'");
  }
  if (o.out.empty()) usage("--out is required");
  // The identity and nuisance subspaces stop growing at 128 dims and the isotropic noise per
  // dim shrinks as dim^(-1/4): the noise part of a squared distance then fluctuates as much at
  // 2048 dims as at 128, so both variants are about as hard (the report's 2048-d CUHK03
  // features were no easier than a 128-d embedding).
  if (o.identity_rank == 0) o.identity_rank = std::max(2, std::min(16, o.dim / 8));
  if (o.nuisance_rank == 0) o.nuisance_rank = std::max(1, std::min(8, o.dim / 16));
  if (o.noise < 0) o.noise = 0.35 * std::pow(128.0 / std::max(128, o.dim), 0.25);
  if (o.identity_rank + o.nuisance_rank > o.dim) usage("identity rank + nuisance rank exceed --dim");
  return o;
}

struct Split {
  std::vector<float> x;
  std::vector<std::int64_t> label, camera, id;
};

// Random orthonormal-ish directions: Gaussian rows, Gram-Schmidt.
std::vector<std::vector<double>> directions(int count, int dim, std::mt19937_64& rng) {
  std::normal_distribution<double> n(0, 1);
  std::vector<std::vector<double>> out;
  while (static_cast<int>(out.size()) < count) {
    std::vector<double> v(static_cast<std::size_t>(dim));
    for (auto& x : v) x = n(rng);
    for (const auto& u : out) {
      double d = 0;
      for (int i = 0; i < dim; ++i) d += v[static_cast<std::size_t>(i)] * u[static_cast<std::size_t>(i)];
      for (int i = 0; i < dim; ++i) v[static_cast<std::size_t>(i)] -= d * u[static_cast<std::size_t>(i)];
    }
    double norm = 0;
    for (double x : v) norm += x * x;
    norm = std::sqrt(norm);
    if (norm < 1e-8) continue;
    for (auto& x : v) x /= norm;
    out.push_back(std::move(v));
  }
  return out;
}

void check(herr_t status, const std::string& what) {
  if (status < 0) throw std::runtime_error("HDF5 error while " + what);
}

template <class T>
void write_dataset(hid_t group, const char* name, hid_t type, const std::vector<T>& data, std::vector<hsize_t> dims) {
  hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  // Chunked and compressed like the engine's caches, so h5py / readers see the usual layout.
  std::vector<hsize_t> chunk = dims;
  chunk[0] = std::max<hsize_t>(1, std::min<hsize_t>(dims[0], 1024));
  if (dims[0] > 0) {
    check(H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data()), "setting chunks");
    check(H5Pset_deflate(dcpl, 4), "setting compression");
  }
  hid_t ds = H5Dcreate2(group, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  if (ds < 0) throw std::runtime_error(std::string("cannot create dataset ") + name);
  if (!data.empty()) check(H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()), "writing data");
  H5Dclose(ds);
  H5Pclose(dcpl);
  H5Sclose(space);
}

void write_attr(hid_t obj, const char* name, double v) {
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(obj, name, H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, H5P_DEFAULT);
  check(H5Awrite(a, H5T_NATIVE_DOUBLE, &v), "writing an attribute");
  H5Aclose(a);
  H5Sclose(space);
}

void write_split(hid_t file, const char* name, const Split& s, int dim) {
  hid_t g = H5Gcreate2(file, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (g < 0) throw std::runtime_error(std::string("cannot create group ") + name);
  const hsize_t n = s.label.size();
  write_dataset(g, "embedding", H5T_NATIVE_FLOAT, s.x, {n, static_cast<hsize_t>(dim)});
  write_dataset(g, "label", H5T_NATIVE_INT64, s.label, {n});
  write_dataset(g, "camera", H5T_NATIVE_INT64, s.camera, {n});
  write_dataset(g, "id", H5T_NATIVE_INT64, s.id, {n});
  H5Gclose(g);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  std::mt19937_64 rng(o.seed);
  std::normal_distribution<double> normal(0, 1);
  const int D = o.dim;
  const auto id_dirs = directions(o.identity_rank + o.nuisance_rank + o.cameras, D, rng);
  // Directions: [0, r) identity subspace, [r, r + q) nuisance, then one shift per camera.
  std::vector<double> base(static_cast<std::size_t>(D));
  for (auto& b : base) b = 0.5 * normal(rng);  // overall offset, so softplus is not centred at 0

  Split train, validation, query, gallery;
  std::int64_t next_id = 0;
  auto image = [&](const std::vector<double>& mean, int camera, Split& dst, std::int64_t label) {
    std::vector<double> z = mean;
    const auto& shift = id_dirs[static_cast<std::size_t>(o.identity_rank + o.nuisance_rank + camera)];
    for (int d = 0; d < D; ++d) z[static_cast<std::size_t>(d)] += o.camera_shift * shift[static_cast<std::size_t>(d)];
    for (int k = 0; k < o.nuisance_rank; ++k) {
      const double a = o.nuisance_scale * normal(rng);
      const auto& u = id_dirs[static_cast<std::size_t>(o.identity_rank + k)];
      for (int d = 0; d < D; ++d) z[static_cast<std::size_t>(d)] += a * u[static_cast<std::size_t>(d)];
    }
    for (int d = 0; d < D; ++d) {
      const double v = z[static_cast<std::size_t>(d)] + o.noise * normal(rng);
      dst.x.push_back(static_cast<float>(v > 30 ? v : std::log1p(std::exp(v))));  // softplus
    }
    dst.label.push_back(label);
    dst.camera.push_back(camera);
    dst.id.push_back(next_id++);
  };
  auto identity_mean = [&]() {
    std::vector<double> m = base;
    for (int k = 0; k < o.identity_rank; ++k) {
      const double a = o.identity_scale * normal(rng);
      const auto& u = id_dirs[static_cast<std::size_t>(k)];
      for (int d = 0; d < D; ++d) m[static_cast<std::size_t>(d)] += a * u[static_cast<std::size_t>(d)];
    }
    return m;
  };
  for (int p = 0; p < o.identities; ++p) {
    const auto mean = identity_mean();
    for (int c = 0; c < o.cameras; ++c)
      for (int k = 0; k < o.per_camera; ++k) image(mean, c, train, p);
  }
  for (int p = 0; p < o.test_identities; ++p) {
    const auto mean = identity_mean();
    const std::int64_t label = o.identities + p;  // disjoint from training identities
    for (int c = 0; c < o.cameras; ++c)
      for (int k = 0; k < o.per_camera; ++k) image(mean, c, k == 0 ? query : gallery, label);
  }
  // Drawn after the test identities so that adding validation identities leaves the other
  // splits of a seed unchanged.
  for (int p = 0; p < o.val_identities; ++p) {
    const auto mean = identity_mean();
    const std::int64_t label = o.identities + o.test_identities + p;
    for (int c = 0; c < o.cameras; ++c)
      for (int k = 0; k < o.per_camera; ++k) image(mean, c, validation, label);
  }

  const std::string tmp = o.out + ".tmp";
  // The documented command writes into data/, which a fresh checkout does not have.
  std::error_code mkdir_error;
  const auto parent = std::filesystem::path(o.out).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, mkdir_error);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // our message below says what failed, without HDF5's stack dump
  hid_t file = H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file < 0) {
    std::fprintf(stderr, "gen_reid_features: cannot create '%s'%s%s\n", tmp.c_str(), mkdir_error ? ": " : "",
                 mkdir_error ? mkdir_error.message().c_str() : "");
    return 1;
  }
  try {
    write_split(file, "train", train, D);
    if (o.val_identities > 0) write_split(file, "validation", validation, D);
    write_split(file, "query", query, D);
    write_split(file, "gallery", gallery, D);
    hid_t root = H5Gopen2(file, "/", H5P_DEFAULT);
    write_attr(root, "dim", D);
    write_attr(root, "seed", static_cast<double>(o.seed));
    write_attr(root, "camera_shift", o.camera_shift);
    write_attr(root, "nuisance_scale", o.nuisance_scale);
    write_attr(root, "noise", o.noise);
    write_attr(root, "identity_rank", o.identity_rank);
    write_attr(root, "nuisance_rank", o.nuisance_rank);
    H5Gclose(root);
  } catch (const std::exception& e) {
    H5Fclose(file);
    std::remove(tmp.c_str());
    std::fprintf(stderr, "gen_reid_features: %s\n", e.what());
    return 1;
  }
  H5Fclose(file);
  if (std::rename(tmp.c_str(), o.out.c_str()) != 0) {
    std::fprintf(stderr, "gen_reid_features: cannot rename '%s' to '%s'\n", tmp.c_str(), o.out.c_str());
    return 1;
  }

  // Human-style judgements over gallery ids: a triplet's positive shares the query's identity.
  auto write_csv = [&](const std::string& path, const std::string& header, auto&& row) {
    if (path.empty()) return;
    std::ofstream out(path);
    if (!out) {
      std::fprintf(stderr, "gen_reid_features: cannot write '%s'\n", path.c_str());
      std::exit(1);
    }
    out << header << "\n";
    for (int i = 0; i < o.judgements; ++i) out << row() << "\n";
  };
  std::uniform_int_distribution<std::size_t> any(0, gallery.id.size() - 1);
  auto same_identity = [&](std::size_t a) {
    for (int tries = 0; tries < 1000; ++tries) {
      const std::size_t b = any(rng);
      if (b != a && gallery.label[b] == gallery.label[a]) return b;
    }
    return a;
  };
  auto other_identity = [&](std::size_t a) {
    for (;;) {
      const std::size_t b = any(rng);
      if (gallery.label[b] != gallery.label[a]) return b;
    }
  };
  write_csv(o.triplets, "query,positive,negative", [&] {
    const std::size_t q = any(rng);
    return std::to_string(gallery.id[q]) + "," + std::to_string(gallery.id[same_identity(q)]) + "," +
           std::to_string(gallery.id[other_identity(q)]);
  });
  auto pair_row = [&] {
    const std::size_t a = any(rng);
    const bool similar = rng() % 2 == 0;
    const std::size_t b = similar ? same_identity(a) : other_identity(a);
    return std::to_string(gallery.id[a]) + "," + std::to_string(gallery.id[b]) + "," + (similar ? "1" : "0");
  };
  write_csv(o.pairs, "a,b,similar", pair_row);
  write_csv(o.val_pairs, "a,b,similar", pair_row);
  std::printf("gen_reid_features: wrote %s: train %zu, validation %zu, query %zu, gallery %zu rows of %d dims\n",
              o.out.c_str(), train.label.size(), validation.label.size(), query.label.size(), gallery.label.size(), D);
  return 0;
}
