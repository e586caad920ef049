// gen_crowd: a crowd simulator over images with known attributes, for Context Embedding Networks
// (docs/crowd.md). It renders an attribute dataset (or takes Fashion-MNIST), samples
// grids of S = rows x cols images, lets simulated workers with prior attribute biases, context
// sway, varying granularity and noise cluster them (crowd.hpp), and writes:
//
//   images.h5         embedflow stream file, port "images", one record per image:
//                     id i64, label i64, image u8[H,W,C] (RGB for colour), one i64 per attribute
//                     (io.hdf5_reader; image.collect turns it into a join table)
//   images.csv        id,path,label,<attributes>; paths images/<id>.png relative to the CSV
//   images/<id>.png   (image.files_reader csv: images.csv, mode color|grey)
//   attributes.json   dataset, image size, attribute names and value names
//   annotations.csv   worker,grid,image,cluster (one row per image of each submission)
//   annotations.json  {"grid_size": S, "annotations": [{worker, grid, images, clusters}]}
//   truth.csv         per submission: worker,grid,attribute,attribute_name,clusters,lapse,p_<attr>...
//                     (attribute -1 "none" for random clusterings; p = P(k | w, g) it was drawn from)
//   workers.csv       worker,noisy,open,coarseness,annotations,bias_<attr>...  (the true bias vectors)
//   grids.csv         grid,salience_<attr>...,allowed_<attr>...
//   truth.json        the same ground truth in one JSON document
//   summary.json      options, counts and the attribute-retrieval ceilings (see docs/crowd.md)
//
// Deterministic by --seed: every random stream is derived from (seed, purpose, index), and the
// run is single-threaded. Usage: gen_crowd --out DIR [options]; gen_crowd --help lists them.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <string>

#include <embedflow/hdf5/stream_file.hpp>
#include <embedflow/report_files.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "crowd.hpp"
#include "dataset.hpp"

namespace fs = std::filesystem;
using namespace gen_crowd;

namespace {

const char* kUsage = R"(gen_crowd --out DIR [options]

  --dataset shapes|fashion-mnist   image source (default shapes)
  --images N                       images (default 5000); fashion-mnist: the first N of the split
  --image-size PX                  shapes: side in pixels, 16..256 (default 32)
  --fmnist-dir DIR                 default /usr/share/datasets/fashion-mnist
  --fmnist-split train|test        default train
  --workers N                      simulated workers (default 200)
  --grids N                        grids (default 2000)
  --workers-per-grid N             submissions per grid by distinct workers (default 1)
  --rows R --cols C                grid layout, S = R*C (default 4 x 6 = 24)
  --noisy-fraction F               workers who cluster at random (default 0.1)
  --bias-concentration A           Dirichlet concentration of worker biases; small = peaked (default 0.05)
  --open-fraction F                open-minded workers: careful, with nearly flat biases (default 0)
  --open-concentration A           their Dirichlet concentration (default 5)
  --context-strength T             weight of in-grid salience: P(k) ~ bias_k * exp(T s_k) (default 6)
  --focus-fix P                    per grid and attribute: held to one value (default 0.4)
  --focus-pair P                   ... held to two values (default 0.2)
  --lapse P                        a careful worker's random submission (default 0.03)
  --slip P                         per image: put in a random cluster (default 0.02)
  --coarsen-max C                  worker coarseness ~ U(0, C): merge probability (default 0.5)
  --max-clusters M                 random clusterings use 1..M clusters (default 10)
  --min-grids-per-worker N         default 10
  --seed N                         default 1
  --no-png                         skip images/*.png and images.csv
  --no-h5                          skip images.h5
)";

struct Args {
  std::string out, dataset = "shapes", fmnist_dir = "/usr/share/datasets/fashion-mnist", fmnist_split = "train";
  std::int64_t images = 5000;
  int image_size = 32;
  bool png = true, h5 = true;
  CrowdOptions crowd;
};

[[noreturn]] void usage_error(const std::string& msg) {
  std::cerr << "gen_crowd: " << msg << "\n\n" << kUsage;
  std::exit(2);
}

Args parse_args(int argc, char** argv) {
  Args a;
  std::map<std::string, std::function<void(const std::string&)>> opts;
  auto integer = [](std::int64_t& dst) {
    return [&dst](const std::string& v) {
      std::size_t used = 0;
      dst = std::stoll(v, &used);
      if (used != v.size()) throw std::invalid_argument(v);
    };
  };
  auto number = [](double& dst) {
    return [&dst](const std::string& v) {
      std::size_t used = 0;
      dst = std::stod(v, &used);
      if (used != v.size()) throw std::invalid_argument(v);
    };
  };
  std::int64_t image_size = a.image_size, rows = a.crowd.rows, cols = a.crowd.cols, max_clusters = a.crowd.max_clusters, seed = 1;
  opts["--out"] = [&](const std::string& v) { a.out = v; };
  opts["--dataset"] = [&](const std::string& v) { a.dataset = v; };
  opts["--images"] = integer(a.images);
  opts["--image-size"] = integer(image_size);
  opts["--fmnist-dir"] = [&](const std::string& v) { a.fmnist_dir = v; };
  opts["--fmnist-split"] = [&](const std::string& v) { a.fmnist_split = v; };
  opts["--workers"] = integer(a.crowd.workers);
  opts["--grids"] = integer(a.crowd.grids);
  opts["--workers-per-grid"] = integer(a.crowd.workers_per_grid);
  opts["--rows"] = integer(rows);
  opts["--cols"] = integer(cols);
  opts["--noisy-fraction"] = number(a.crowd.noisy_fraction);
  opts["--bias-concentration"] = number(a.crowd.bias_concentration);
  opts["--open-fraction"] = number(a.crowd.open_fraction);
  opts["--open-concentration"] = number(a.crowd.open_concentration);
  opts["--context-strength"] = number(a.crowd.context_strength);
  opts["--focus-fix"] = number(a.crowd.focus_fix);
  opts["--focus-pair"] = number(a.crowd.focus_pair);
  opts["--lapse"] = number(a.crowd.lapse);
  opts["--slip"] = number(a.crowd.slip);
  opts["--coarsen-max"] = number(a.crowd.coarsen_max);
  opts["--max-clusters"] = integer(max_clusters);
  opts["--min-grids-per-worker"] = integer(a.crowd.min_grids_per_worker);
  opts["--seed"] = integer(seed);
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    if (key == "--help" || key == "-h") {
      std::cout << kUsage;
      std::exit(0);
    }
    if (key == "--no-png") {
      a.png = false;
      continue;
    }
    if (key == "--no-h5") {
      a.h5 = false;
      continue;
    }
    auto it = opts.find(key);
    if (it == opts.end()) usage_error("unknown option " + key);
    if (i + 1 >= argc) usage_error(key + " needs a value");
    try {
      it->second(argv[++i]);
    } catch (const std::exception&) {
      usage_error(key + ": bad value '" + argv[i] + "'");
    }
  }
  if (a.out.empty()) usage_error("--out DIR is required");
  if (a.dataset != "shapes" && a.dataset != "fashion-mnist") usage_error("--dataset must be shapes or fashion-mnist");
  if (a.fmnist_split != "train" && a.fmnist_split != "test") usage_error("--fmnist-split must be train or test");
  if (a.images < 1) usage_error("--images must be >= 1");
  if (image_size < 16 || image_size > 256) usage_error("--image-size must be in 16..256");
  if (rows < 1 || cols < 1 || rows * cols > 4096) usage_error("--rows and --cols must be >= 1, with at most 4096 images a grid");
  if (max_clusters < 1 || max_clusters > 1000) usage_error("--max-clusters must be in 1..1000");
  if (seed < 0) usage_error("--seed must be >= 0");
  for (auto [name, p] : {std::pair{"--noisy-fraction", a.crowd.noisy_fraction}, {"--focus-fix", a.crowd.focus_fix},
                         {"--focus-pair", a.crowd.focus_pair}, {"--lapse", a.crowd.lapse}, {"--slip", a.crowd.slip},
                         {"--coarsen-max", a.crowd.coarsen_max}, {"--open-fraction", a.crowd.open_fraction}})
    if (!(p >= 0 && p <= 1)) usage_error(std::string(name) + " must be in [0, 1]");
  if (a.crowd.focus_fix + a.crowd.focus_pair > 1) usage_error("--focus-fix + --focus-pair must be <= 1");
  if (!(a.crowd.bias_concentration > 0)) usage_error("--bias-concentration must be > 0");
  if (!(a.crowd.open_concentration > 0)) usage_error("--open-concentration must be > 0");
  if (a.crowd.noisy_fraction + a.crowd.open_fraction > 1) usage_error("--noisy-fraction + --open-fraction must be <= 1");
  if (!(a.crowd.context_strength >= 0)) usage_error("--context-strength must be >= 0");
  a.image_size = static_cast<int>(image_size);
  a.crowd.rows = static_cast<int>(rows);
  a.crowd.cols = static_cast<int>(cols);
  a.crowd.max_clusters = static_cast<int>(max_clusters);
  a.crowd.seed = static_cast<std::uint64_t>(seed);
  return a;
}

// Shortest text that reads back as the same double, so files are exact and still small.
std::string num(double x) {
  char buf[32];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, x);
    if (std::strtod(buf, nullptr) == x) break;
  }
  return buf;
}

std::ofstream open_out(const fs::path& p) {
  std::ofstream f(p, std::ios::binary);
  if (!f) throw std::runtime_error(p.string() + ": cannot write");
  return f;
}

void write_images_h5(const Dataset& d, const fs::path& path) {
  namespace h5 = embedflow::hdf5;
  h5::StreamFileWriter w(path, {{"generator", "gen_crowd"}, {"dataset", d.name}});
  w.add_port("images", h5::Layout::records);
  const std::size_t bytes = static_cast<std::size_t>(d.height * d.width * d.channels);
  for (std::size_t i = 0; i < d.size(); ++i) {
    embedflow::Record r;
    r.set("id", embedflow::Array::scalar<std::int64_t>(d.ids[i]));
    r.set("label", embedflow::Array::scalar<std::int64_t>(d.values[i][static_cast<std::size_t>(d.label_attribute)]));
    r.set("image", embedflow::Array::from_vector<std::uint8_t>({d.height, d.width, d.channels},
                                                               std::vector<std::uint8_t>(d.image(i), d.image(i) + bytes)));
    for (std::size_t k = 0; k < d.attributes.size(); ++k)
      r.set(d.attributes[k].name, embedflow::Array::scalar<std::int64_t>(d.values[i][k]));
    w.append("images", r);
  }
  w.commit();
}

void write_pngs(const Dataset& d, const fs::path& dir) {
  fs::create_directories(dir / "images");
  auto csv = open_out(dir / "images.csv");
  csv << "id,path,label";
  for (const Attribute& a : d.attributes) csv << "," << a.name;
  csv << "\n";
  char name[64];
  for (std::size_t i = 0; i < d.size(); ++i) {
    std::snprintf(name, sizeof name, "images/%06lld.png", static_cast<long long>(d.ids[i]));
    cv::Mat img(d.height, d.width, d.channels == 3 ? CV_8UC3 : CV_8UC1, const_cast<std::uint8_t*>(d.image(i)));
    cv::Mat out = img;
    if (d.channels == 3) cv::cvtColor(img, out, cv::COLOR_RGB2BGR);  // imwrite takes BGR
    if (!cv::imwrite((dir / name).string(), out)) throw std::runtime_error((dir / name).string() + ": cannot write PNG");
    csv << d.ids[i] << "," << name << "," << d.values[i][static_cast<std::size_t>(d.label_attribute)];
    for (int v : d.values[i]) csv << "," << v;
    csv << "\n";
  }
}

void write_attributes(const Dataset& d, const fs::path& p) {
  auto f = open_out(p);
  f << "{\"dataset\": " << embedflow::json_quote(d.name) << ", \"images\": " << d.size() << ", \"height\": " << d.height
    << ", \"width\": " << d.width << ", \"channels\": " << d.channels << ", \"label_attribute\": "
    << embedflow::json_quote(d.attributes[static_cast<std::size_t>(d.label_attribute)].name) << ",\n \"attributes\": [";
  for (std::size_t k = 0; k < d.attributes.size(); ++k) {
    f << (k ? ",\n  " : "\n  ") << "{\"name\": " << embedflow::json_quote(d.attributes[k].name) << ", \"values\": [";
    for (std::size_t v = 0; v < d.attributes[k].values.size(); ++v) f << (v ? ", " : "") << embedflow::json_quote(d.attributes[k].values[v]);
    f << "]}";
  }
  f << "]}\n";
}

void write_annotations(const Dataset& d, const Crowd& c, std::int64_t S, const fs::path& dir) {
  auto csv = open_out(dir / "annotations.csv");
  csv << "worker,grid,image,cluster\n";
  auto js = open_out(dir / "annotations.json");
  js << "{\"grid_size\": " << S << ", \"annotations\": [";
  bool first = true;
  for (const Submission& s : c.submissions) {
    const Grid& g = c.grids[static_cast<std::size_t>(s.grid)];
    js << (first ? "\n" : ",\n") << "{\"worker\": " << s.worker << ", \"grid\": " << s.grid << ", \"images\": [";
    first = false;
    for (std::size_t j = 0; j < g.images.size(); ++j) {
      const std::int64_t id = d.ids[g.images[j]];
      csv << s.worker << "," << s.grid << "," << id << "," << s.cluster[j] << "\n";
      js << (j ? ", " : "") << id;
    }
    js << "], \"clusters\": [";
    for (std::size_t j = 0; j < s.cluster.size(); ++j) js << (j ? ", " : "") << s.cluster[j];
    js << "]}";
  }
  js << "\n]}\n";
}

void write_truth(const Dataset& d, const Crowd& c, const fs::path& dir) {
  const std::size_t K = d.attributes.size();
  auto truth = open_out(dir / "truth.csv");
  truth << "worker,grid,attribute,attribute_name,clusters,lapse";
  for (const Attribute& a : d.attributes) truth << ",p_" << a.name;
  truth << "\n";
  for (const Submission& s : c.submissions) {
    truth << s.worker << "," << s.grid << "," << s.attribute << ","
          << (s.attribute < 0 ? "none" : d.attributes[static_cast<std::size_t>(s.attribute)].name) << "," << s.clusters << ","
          << (s.lapse ? 1 : 0);
    for (double p : s.p) truth << "," << num(p);
    truth << "\n";
  }
  auto workers = open_out(dir / "workers.csv");
  workers << "worker,noisy,open,coarseness,annotations";
  for (const Attribute& a : d.attributes) workers << ",bias_" << a.name;
  workers << "\n";
  for (std::size_t w = 0; w < c.workers.size(); ++w) {
    const Worker& x = c.workers[w];
    workers << w << "," << (x.noisy ? 1 : 0) << "," << (x.open ? 1 : 0) << "," << num(x.coarseness) << "," << x.annotations;
    for (double b : x.bias) workers << "," << num(b);
    workers << "\n";
  }
  auto grids = open_out(dir / "grids.csv");
  grids << "grid";
  for (const Attribute& a : d.attributes) grids << ",salience_" << a.name;
  for (const Attribute& a : d.attributes) grids << ",allowed_" << a.name;
  grids << "\n";
  for (std::size_t g = 0; g < c.grids.size(); ++g) {
    grids << g;
    for (double s : c.grids[g].salience) grids << "," << num(s);
    for (int n : c.grids[g].allowed) grids << "," << n;
    grids << "\n";
  }
  auto js = open_out(dir / "truth.json");
  js << "{\"attributes\": [";
  for (std::size_t k = 0; k < K; ++k) js << (k ? ", " : "") << embedflow::json_quote(d.attributes[k].name);
  js << "],\n \"workers\": [";
  for (std::size_t w = 0; w < c.workers.size(); ++w) {
    const Worker& x = c.workers[w];
    js << (w ? ",\n  " : "\n  ") << "{\"worker\": " << w << ", \"noisy\": " << (x.noisy ? "true" : "false")
       << ", \"open\": " << (x.open ? "true" : "false")
       << ", \"coarseness\": " << num(x.coarseness) << ", \"annotations\": " << x.annotations << ", \"bias\": [";
    for (std::size_t k = 0; k < K; ++k) js << (k ? ", " : "") << num(x.bias[k]);
    js << "]}";
  }
  js << "],\n \"submissions\": [";
  for (std::size_t i = 0; i < c.submissions.size(); ++i) {
    const Submission& s = c.submissions[i];
    js << (i ? ",\n  " : "\n  ") << "{\"worker\": " << s.worker << ", \"grid\": " << s.grid << ", \"attribute\": " << s.attribute
       << ", \"clusters\": " << s.clusters << ", \"lapse\": " << (s.lapse ? "true" : "false") << ", \"p\": [";
    for (std::size_t k = 0; k < K; ++k) js << (k ? ", " : "") << num(s.p[k]);
    js << "]}";
  }
  js << "]}\n";
}

void write_summary(const Args& a, const Dataset& d, const Crowd& c, const Ceilings& ce, const std::map<std::string, double>& seconds,
                   const fs::path& p) {
  std::int64_t noisy = 0, positives = 0, pairs = 0, lapses = 0;
  for (const Worker& w : c.workers) noisy += w.noisy ? 1 : 0;
  std::vector<std::int64_t> used(d.attributes.size(), 0);
  double clusters = 0;
  for (const Submission& s : c.submissions) {
    if (s.attribute >= 0) ++used[static_cast<std::size_t>(s.attribute)];
    lapses += s.lapse ? 1 : 0;
    clusters += s.clusters;
    for (std::size_t i = 0; i < s.cluster.size(); ++i)
      for (std::size_t j = i + 1; j < s.cluster.size(); ++j) {
        ++pairs;
        positives += s.cluster[i] == s.cluster[j] ? 1 : 0;
      }
  }
  const CrowdOptions& o = a.crowd;
  auto f = open_out(p);
  f << "{\"generator\": \"gen_crowd\", \"dataset\": " << embedflow::json_quote(d.name) << ", \"seed\": " << o.seed
    << ",\n \"options\": {\"images\": " << d.size() << ", \"workers\": " << o.workers << ", \"grids\": " << o.grids
    << ", \"workers_per_grid\": " << o.workers_per_grid << ", \"rows\": " << o.rows << ", \"cols\": " << o.cols
    << ", \"noisy_fraction\": " << num(o.noisy_fraction) << ", \"bias_concentration\": " << num(o.bias_concentration)
    << ", \"open_fraction\": " << num(o.open_fraction) << ", \"open_concentration\": " << num(o.open_concentration)
    << ", \"context_strength\": " << num(o.context_strength) << ", \"focus_fix\": " << num(o.focus_fix)
    << ", \"focus_pair\": " << num(o.focus_pair) << ", \"lapse\": " << num(o.lapse) << ", \"slip\": " << num(o.slip)
    << ", \"coarsen_max\": " << num(o.coarsen_max) << ", \"max_clusters\": " << o.max_clusters
    << ", \"min_grids_per_worker\": " << o.min_grids_per_worker << "},\n \"submissions\": " << c.submissions.size()
    << ", \"noisy_workers\": " << noisy << ", \"lapses\": " << lapses << ", \"attributed_submissions\": " << ce.attributed
    << ", \"pairs\": " << pairs << ", \"positive_fraction\": " << num(pairs ? static_cast<double>(positives) / static_cast<double>(pairs) : 0)
    << ", \"mean_clusters\": " << num(c.submissions.empty() ? 0 : clusters / static_cast<double>(c.submissions.size()))
    << ",\n \"attribute_use\": {";
  for (std::size_t k = 0; k < used.size(); ++k) f << (k ? ", " : "") << embedflow::json_quote(d.attributes[k].name) << ": " << used[k];
  f << "},\n \"retrieval_ceiling\": {\"mixture\": " << num(ce.mixture) << ", \"worker_only\": " << num(ce.worker_only)
    << ", \"context_only\": " << num(ce.context_only) << "},\n \"seconds\": {";
  bool first = true;
  for (const auto& [k, v] : seconds) {
    f << (first ? "" : ", ") << embedflow::json_quote(k) << ": " << num(std::round(v * 1000) / 1000);
    first = false;
  }
  f << "}}\n";
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse_args(argc, argv);
  std::map<std::string, double> seconds;
  auto t = std::chrono::steady_clock::now();
  auto lap = [&](const char* what) {
    const auto now = std::chrono::steady_clock::now();
    seconds[what] = std::chrono::duration<double>(now - t).count();
    t = now;
  };
  const auto start = t;
  try {
    const fs::path dir(a.out);
    fs::create_directories(dir);
    const Dataset d = a.dataset == "shapes" ? render_shapes(a.images, a.image_size, a.crowd.seed)
                                            : load_fashion_mnist(a.fmnist_dir, a.fmnist_split, a.images);
    lap(a.dataset == "shapes" ? "render" : "load");
    const Crowd c = simulate(d, a.crowd);
    lap("simulate");
    if (a.h5) write_images_h5(d, dir / "images.h5");
    lap("write_h5");
    if (a.png) write_pngs(d, dir);
    lap("write_png");
    write_attributes(d, dir / "attributes.json");
    write_annotations(d, c, static_cast<std::int64_t>(a.crowd.rows) * a.crowd.cols, dir);
    write_truth(d, c, dir);
    lap("write_annotations");
    const Ceilings ce = retrieval_ceilings(c, a.crowd.context_strength);
    lap("ceilings");
    seconds["total"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    write_summary(a, d, c, ce, seconds, dir / "summary.json");
    std::fprintf(stderr,
                 "gen_crowd: %zu %s images, %zu workers, %zu grids, %zu submissions -> %s in %.2f s "
                 "(retrieval ceiling: mixture %.3f, worker only %.3f, context only %.3f)\n",
                 d.size(), d.name.c_str(), c.workers.size(), c.grids.size(), c.submissions.size(), dir.string().c_str(),
                 seconds["total"], ce.mixture, ce.worker_only, ce.context_only);
  } catch (const std::invalid_argument& e) {
    usage_error(e.what());
  } catch (const std::exception& e) {
    std::cerr << "gen_crowd: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
