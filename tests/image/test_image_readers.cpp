// Readers in graphs run in the test's process: image.idx_reader against gzip + numpy parsing of
// the same files, truncated / corrupt IDX files, image.files_reader on PNG and JPEG files written
// with OpenCV (directory tree and CSV), corrupt and missing files in error and skip modes.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "core/arrays.hpp"
#include "core/idx.hpp"
#include "core/image_files.hpp"
#include "image_test_util.hpp"

using namespace embedflow::test;
namespace fs = std::filesystem;

TEST_CASE("idx_reader streams the test split exactly as gzip + numpy parse it") {
  const fs::path dir = scratch_dir("image_idx");
  const std::string out = (dir / "test.h5").string();
  run_graph_ok("g.yaml", R"(
nodes:
  read: {type: image.idx_reader, params: {split: test, batch_size: 1000}}
  save: {type: io.hdf5_writer, params: {path: )" + out + R"(}}
edges: [read.out -> save.in]
)");
  Result py = run_numpy_oracle(R"PY(
images, labels = fashion("test")
f = h5py.File(sys.argv[1], "r")["data"]
check(f["image"].shape == (10000, 28, 28, 1), f["image"].shape)
check(np.array_equal(f["image"][:, :, :, 0], images), "images differ")
check(np.array_equal(f["label"][:], labels), "labels differ")
check(np.array_equal(f["id"][:], np.arange(10000)), "ids")
check(list(f["record_sizes"][:]) == [1000] * 10, "batch sizes")
counts = np.bincount(labels, minlength=10)
print(" ".join(str(c) for c in counts))
)PY", {out});
  CHECK(py.out == "1000 1000 1000 1000 1000 1000 1000 1000 1000 1000\n");
}

TEST_CASE("idx_reader: train split per record with a class filter, limit and shuffle, against numpy") {
  const fs::path dir = scratch_dir("image_idx_train");
  const std::string out = (dir / "train.h5").string();
  run_graph_ok("g.yaml", R"(
seed: 3
nodes:
  read: {type: image.idx_reader, params: {split: train, classes: "5-9", limit: 3000, shuffle: true, id_offset: 100}}
  save: {type: io.hdf5_writer, params: {path: )" + out + R"(}}
edges: [read.out -> save.in]
)");
  run_numpy_oracle(R"PY(
images, labels = fashion("train")
f = h5py.File(sys.argv[1], "r")["data"]
ids = f["id"][:] - 100
keep = np.nonzero(labels >= 5)[0][:3000]
check(sorted(ids.tolist()) == keep.tolist(), "selected ids differ")
check(ids.tolist() != keep.tolist(), "not shuffled")
check(np.array_equal(f["image"][:, :, :, 0], images[ids]), "images differ")
check(np.array_equal(f["label"][:], labels[ids]), "labels differ")
print(np.bincount(f["label"][:], minlength=10).tolist())
)PY", {out});
}

TEST_CASE("idx_reader: truncated, cut and non-IDX files are DataErrors naming the file and record") {
  const fs::path dir = scratch_dir("image_idx_bad");
  // Well-formed gzip holding a short payload; a gzip cut mid-stream; a file with a wrong magic.
  Result py = run_python(R"PY(
import gzip, sys
d = sys.argv[1]
src = gzip.open("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz").read()
gzip.open(d + "/short.gz", "wb").write(src[:16 + 784 * 250 + 100])
raw = open("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz", "rb").read()
open(d + "/cut.gz", "wb").write(raw[:len(raw) // 2])
gzip.open(d + "/magic.gz", "wb").write(b"\x00\x00\x08\x01" + src[4:])
)PY", {dir.string()});
  REQUIRE(py.exit_code == 0);
  using embedflow::image::read_idx;
  CHECK_THROWS_WITH(read_idx((dir / "short.gz").string(), 3), Catch::Contains("short.gz") && Catch::Contains("truncated at record 250 of 10000"));
  CHECK_THROWS_WITH(read_idx((dir / "cut.gz").string(), 3), Catch::Contains("cut.gz") && Catch::Contains("truncated at record"));
  CHECK_THROWS_WITH(read_idx((dir / "magic.gz").string(), 3), Catch::Contains("magic.gz") && Catch::Contains("bad IDX magic"));
  // The first 200 records of the short file are intact: limit reads only those.
  CHECK(read_idx((dir / "short.gz").string(), 3, 200).data.dim(0) == 200);
  // Through the CLI: exit 1, the message names the node, the file and the record.
  const std::string labels = std::string(kFashion) + "/t10k-labels-idx1-ubyte.gz";
  // A graph counting the images of `images`, with the test split's labels.
  auto count_images = [&](const std::string& name, const fs::path& images) {
    return run_graph(name, R"(
nodes:
  read: {type: image.idx_reader, params: {images: )" + images.string() + ", labels: " + labels + R"(}}
  count: {type: core.sink, params: {mode: count}}
edges: [read.out -> count.in]
)");
  };
  GraphRun r = count_images("g.yaml", dir / "short.gz");
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.error, Catch::Contains("node 'read'") && Catch::Contains("short.gz: truncated at record 250"));
  // A wrong magic is caught at validation, before anything runs (exit 2).
  GraphRun v = count_images("v.yaml", dir / "magic.gz");
  CHECK(v.exit_code == 2);
  CHECK_THAT(v.error, Catch::Contains("bad IDX magic"));
}

namespace {

// dir/<class>/<n>.png|.jpg: random BGR images of one size (even n: PNG, odd: JPEG).
void write_tree(const fs::path& root, const std::vector<std::string>& classes, int per_class, int h = 20, int w = 24) {
  cv::RNG rng(7);
  for (const auto& c : classes) {
    fs::create_directories(root / c);
    for (int i = 0; i < per_class; ++i) {
      cv::Mat bgr(h, w, CV_8UC3);
      rng.fill(bgr, cv::RNG::UNIFORM, 0, 256);
      const std::string name = c + "/" + std::to_string(i) + (i % 2 ? ".jpg" : ".png");
      REQUIRE(cv::imwrite((root / name).string(), bgr));
    }
  }
}

cv::Mat as_mat(const embedflow::Array& a) { return embedflow::image::image_view(a).clone(); }

bool same(const cv::Mat& a, const cv::Mat& b) {
  if (a.size() != b.size() || a.type() != b.type()) return false;
  cv::Mat d = a != b;
  return cv::countNonZero(d.reshape(1)) == 0;
}

}  // namespace

TEST_CASE("files_reader: directory tree, labels from class names, ids from the sorted list, RGB pixels") {
  const fs::path dir = scratch_dir("image_files_dir");
  const fs::path tree = dir / "tree";
  write_tree(tree, {"3", "7"}, 5);
  GraphRun r = GraphRunner(plugins(), R"(
nodes:
  read: {type: image.files_reader, params: {dir: )" + tree.string() + R"(, mode: color}}
)").collect("read").threads(2).run();
  INFO(r.message());
  REQUIRE(r.exit_code == 0);
  std::vector<std::string> names;
  const auto entries = embedflow::image::list_directory(tree.string(), names);
  REQUIRE(entries.size() == 10);
  CHECK(names == std::vector<std::string>{"3", "7"});
  const auto& records = r.records("read");
  REQUIRE(records.size() == 10);
  for (std::size_t i = 0; i < records.size(); ++i) {
    const auto& rec = *records[i];
    const std::int64_t id = rec.get("id").item<std::int64_t>();
    CHECK(id == static_cast<std::int64_t>(i));  // list order, ids = sorted positions
    const auto& e = entries[static_cast<std::size_t>(id)];
    CHECK(rec.get("label").item<std::int64_t>() == (e.path.find("/3/") != std::string::npos ? 3 : 7));
    cv::Mat want;
    cv::cvtColor(cv::imread(e.path, cv::IMREAD_COLOR), want, cv::COLOR_BGR2RGB);
    INFO(e.path);
    CHECK(same(as_mat(rec.get("image")), want));
  }
  // PNG is lossless: pixels equal what OpenCV wrote (checked above through imread); a JPEG
  // decodes to the same pixels as cv::imread because both use the same decoder.

  // Class directories with names get sorted positions as labels.
  const fs::path named = dir / "named";
  write_tree(named, {"dog", "cat"}, 2);
  auto e2 = embedflow::image::list_directory(named.string(), names);
  CHECK(names == std::vector<std::string>{"cat", "dog"});
  CHECK(e2.front().label == 0);
  CHECK(e2.back().label == 1);
}

TEST_CASE("files_reader: CSV list, grey + resize, classes; corrupt and missing files error or skip-and-count") {
  const fs::path dir = scratch_dir("image_files_csv");
  write_tree(dir / "img", {"0", "1", "2"}, 4, 40, 36);
  // A corrupt PNG (random bytes after a real PNG signature) and a missing file.
  {
    std::ofstream bad(dir / "img/0/bad.png", std::ios::binary);
    bad << "\x89PNG\r\n\x1a\n" << std::string(300, 'x');
  }
  std::string csv = "path,id,label\n";
  int id = 100;
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < 4; ++i) csv += "img/" + std::to_string(c) + "/" + std::to_string(i) + (i % 2 ? ".jpg" : ".png") + "," + std::to_string(id++) + "," + std::to_string(c) + "\n";
  const std::string good_csv = csv;
  csv += "img/0/bad.png,200,0\n";    // line 14
  csv += "img/1/missing.png,201,1\n";  // line 15
  write_file(dir / "good.csv", good_csv);
  write_file(dir / "list.csv", csv);

  auto graph = [&](const std::string& name, const std::string& list, const std::string& extra) {
    return GraphRunner(plugins(), "nodes:\n  read: {type: image.files_reader, params: {csv: " + (dir / list).string() +
                                      ", height: 28, width: 28" + extra + "}}\n", name)
        .collect("read");
  };
  GraphRun r = graph("good.yaml", "good.csv", ", classes: \"1-2\", batch_size: 3").run();
  INFO(r.message());
  REQUIRE(r.exit_code == 0);
  const auto& batches = r.records("read");
  REQUIRE(batches.size() == 3);  // 8 images of classes 1 and 2 in batches of 3
  int seen = 0;
  for (const auto& b : batches) {
    const auto& ids = b->get("id");
    for (std::int64_t i = 0; i < ids.numel(); ++i, ++seen) {
      const std::int64_t k = ids.data<std::int64_t>()[i];
      CHECK(k == 104 + seen);
      CHECK(b->get("label").data<std::int64_t>()[i] == (k - 100) / 4);
      const int c = static_cast<int>((k - 100) / 4), n = static_cast<int>((k - 100) % 4);
      const std::string path = (dir / "img" / std::to_string(c) / (std::to_string(n) + (n % 2 ? ".jpg" : ".png"))).string();
      cv::Mat want;
      cv::resize(cv::imread(path, cv::IMREAD_GRAYSCALE), want, cv::Size(28, 28), 0, 0, cv::INTER_AREA);
      cv::Mat got = embedflow::image::image_view(b->get("image"), i).clone();
      INFO(path);
      CHECK(same(got, want));
    }
  }
  CHECK(seen == 8);

  // Error mode: the corrupt file stops the run naming it and its CSV line.
  GraphRun bad = graph("bad.yaml", "list.csv", "").run();
  CHECK(bad.exit_code == 1);
  CHECK_THAT(bad.error, Catch::Contains("img/0/bad.png") && Catch::Contains("list.csv:14") && Catch::Contains("not a decodable image"));
  // Only the missing file left: it is named too.
  GraphRun missing = graph("missing.yaml", "list.csv", ", classes: [1]").run();
  CHECK(missing.exit_code == 1);
  CHECK_THAT(missing.error, Catch::Contains("img/1/missing.png") && Catch::Contains("list.csv:15") && Catch::Contains("cannot open"));
  // Skip mode: both are skipped and counted; the 12 good images arrive.
  GraphRun skip = graph("bad.yaml", "list.csv", "").run({"read.on_bad_image=skip"});
  INFO(skip.message());
  CHECK(skip.exit_code == 0);
  CHECK_THAT(skip.log, Catch::Contains("skipped 2 unreadable files") && Catch::Contains("bad.png"));
  CHECK(skip.records("read").size() == 12);
}

TEST_CASE("files_reader: images of different sizes cannot share a batch; the error names both files") {
  const fs::path dir = scratch_dir("image_files_sizes");
  write_tree(dir / "a", {"0"}, 2, 20, 24);
  write_tree(dir / "b", {"0"}, 1, 30, 24);
  fs::rename(dir / "b/0/0.png", dir / "a/0/9.png");
  GraphRun r = run_graph("g.yaml", "nodes:\n  read: {type: image.files_reader, params: {dir: " + (dir / "a").string() +
                                          ", batch_size: 4}}\n  count: {type: core.sink, params: {mode: count}}\nedges: [read.out -> count.in]\n");
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.error, Catch::Contains("9.png is [30,24,1]") && Catch::Contains("0.png in the same batch is [20,24,1]"));
}

TEST_CASE("idx_reader: a header declaring more than the file can hold is refused before any allocation") {
  const fs::path dir = scratch_dir("image_idx_declared");
  // 2^31 images of 65536 x 65536 declared by a 16-byte header (2^63 bytes), plain and gzipped.
  Result py = run_python(R"PY(
import gzip, struct, sys
d = sys.argv[1]
header = struct.pack(">IIII", 0x803, 2**31, 65536, 65536)
open(d + "/huge.idx", "wb").write(header + b"\0" * 64)
gzip.open(d + "/huge.gz", "wb").write(header + b"\0" * 64)
)PY", {dir.string()});
  REQUIRE(py.exit_code == 0);
  using embedflow::image::read_idx;
  CHECK_THROWS_WITH(read_idx((dir / "huge.idx").string(), 3),
                    Catch::Contains("huge.idx: header declares 2147483648 records of 4294967296 bytes") &&
                        Catch::Contains("truncated or damaged"));
  CHECK_THROWS_WITH(read_idx((dir / "huge.gz").string(), 3),
                    Catch::Contains("huge.gz: header declares") && Catch::Contains("compressed"));
}

namespace {

// (id, epoch) of every row a run's collected `read.out` emitted, with per-record batch sizes and
// unsharded_rows when present.
struct Emitted {
  std::vector<std::vector<std::int64_t>> ids;  // per record
  std::vector<std::int64_t> epochs, unsharded;
  std::vector<std::vector<std::uint8_t>> first_pixels;
};

Emitted emitted(const GraphRun& r) {
  Emitted e;
  for (const auto& rec : r.records("read.out")) {
    const embedflow::Array& id = rec->get("id");
    e.ids.emplace_back(id.data<std::int64_t>(), id.data<std::int64_t>() + id.numel());
    e.epochs.push_back(rec->get("epoch").data<std::int64_t>()[0]);
    const embedflow::Array& img = rec->get("image");
    e.first_pixels.emplace_back(img.data<std::uint8_t>(), img.data<std::uint8_t>() + img.numel());
    if (const embedflow::Array* u = rec->find("unsharded_rows")) e.unsharded.push_back(u->data<std::int64_t>()[0]);
  }
  return e;
}

}  // namespace

TEST_CASE("idx_reader sharded over W ranks: each batch splits into disjoint rank slices whose union is the batch, "
          "shuffled, over two epochs", "[shard]") {
  for (const char* batching : {"batch_size: 10", "batch_size: 0", "batch_size: -1"}) {
    const std::string yaml = std::string("seed: 9\nnodes:\n  read: {type: image.idx_reader, params: {split: test, limit: 103, "
                                         "shuffle: true, ") + batching + "}}\n  sink: {type: core.sink, params: {mode: count}}\n"
                                         "edges: [read.out -> sink.in]\n";
    GraphRunner runner(plugins(), yaml, "shard.yaml");
    runner.collect("read.out");
    INFO(batching);
    const GraphRun whole_run = runner.run({"read.epochs=" + std::string(std::strstr(batching, "-1") ? "1" : "2")});
    INFO(whole_run.message());
    REQUIRE(whole_run.exit_code == 0);
    const Emitted whole = emitted(whole_run);
    const bool batched = std::strstr(batching, "batch_size: 10") != nullptr;
    const bool per_record = std::strstr(batching, "batch_size: 0") != nullptr;
    for (int world : {2, 3}) {
      INFO("world " << world);
      std::vector<Emitted> ranks;
      for (int rank = 0; rank < world; ++rank) {
        const GraphRun r = runner.run({"read.epochs=" + std::string(std::strstr(batching, "-1") ? "1" : "2"),
                                       "read.shard_world_size=" + std::to_string(world), "read.shard_rank=" + std::to_string(rank)});
        INFO(r.message());
        REQUIRE(r.exit_code == 0);
        ranks.push_back(emitted(r));
      }
      if (batched) {
        // Every rank emits every batch (same step count); rank slices concatenate to the batch.
        for (const Emitted& e : ranks) REQUIRE(e.ids.size() == whole.ids.size());
        for (std::size_t b = 0; b < whole.ids.size(); ++b) {
          std::vector<std::int64_t> joined;
          std::vector<std::uint8_t> pixels;
          for (const Emitted& e : ranks) {
            joined.insert(joined.end(), e.ids[b].begin(), e.ids[b].end());
            pixels.insert(pixels.end(), e.first_pixels[b].begin(), e.first_pixels[b].end());
            CHECK(e.epochs[b] == whole.epochs[b]);
            CHECK(e.unsharded[b] == static_cast<std::int64_t>(whole.ids[b].size()));
          }
          CHECK(joined == whole.ids[b]);
          CHECK(pixels == whole.first_pixels[b]);
        }
      } else {
        // Per epoch, the ranks' records in rank order are the epoch's records.
        for (std::int64_t epoch : {0, 1}) {
          std::vector<std::int64_t> want, joined;
          for (std::size_t i = 0; i < whole.ids.size(); ++i)
            if (whole.epochs[i] == epoch) want.insert(want.end(), whole.ids[i].begin(), whole.ids[i].end());
          for (const Emitted& e : ranks) {
            std::vector<std::int64_t> mine;
            for (std::size_t i = 0; i < e.ids.size(); ++i)
              if (e.epochs[i] == epoch) mine.insert(mine.end(), e.ids[i].begin(), e.ids[i].end());
            if (!want.empty()) CHECK(std::abs(static_cast<double>(mine.size()) - static_cast<double>(want.size()) / world) < 1.0);
            joined.insert(joined.end(), mine.begin(), mine.end());
          }
          CHECK(joined == want);
          if (per_record) CHECK(want.size() == 103);
        }
      }
    }
  }
  // The shuffle differs between epochs (so the shares above were checked on two orders).
  GraphRunner runner(plugins(), "seed: 9\nnodes:\n  read: {type: image.idx_reader, params: {split: test, limit: 103, shuffle: true, "
                                "epochs: 2, batch_size: 103}}\n  sink: {type: core.sink, params: {mode: count}}\nedges: [read.out -> sink.in]\n",
                     "shard2.yaml");
  runner.collect("read.out");
  const Emitted two = emitted(runner.run());
  REQUIRE(two.ids.size() == 2);
  CHECK(two.ids[0] != two.ids[1]);
  // A last batch smaller than the world, and a rank outside it, are located errors.
  const GraphRun small = runner.run({"read.batch_size=34", "read.shard_world_size=2", "read.shard_rank=0"});
  // 103 = 3 x 34 + 1: the last batch's one row cannot be shared by 2 ranks.
  CHECK(small.exit_code != 0);
  CHECK(small.error.find("'read'") != std::string::npos);
  CHECK(small.error.find("a batch of 1 images (the last of 103) is fewer than the 2 ranks") != std::string::npos);
  const GraphRun dropped = runner.run({"read.batch_size=34", "read.drop_last=true", "read.shard_world_size=2", "read.shard_rank=0"});
  CHECK(dropped.exit_code == 0);
  const GraphRun bad = runner.run({"read.shard_world_size=2", "read.shard_rank=2"});
  CHECK(bad.exit_code != 0);
  CHECK(bad.error.find("'read'") != std::string::npos);
  CHECK(bad.error.find("shard_world_size / shard_rank: rank 2 is outside [0, 2)") != std::string::npos);
}
