// Readers in graphs run in the test's process: image.idx_reader against gzip + numpy parsing of
// the same files, truncated / corrupt IDX files, image.files_reader on PNG and JPEG files written
// with OpenCV (directory tree and CSV), corrupt and missing files in error and skip modes; both
// readers sharded over ranks against their own unsharded runs (`[shard]`).
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <set>

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
  std::vector<std::vector<std::int64_t>> labels;      // per record
  std::vector<std::vector<std::uint8_t>> first_pixels;  // per record: all of its image bytes
};

Emitted emitted(const GraphRun& r) {
  Emitted e;
  for (const auto& rec : r.records("read.out")) {
    const embedflow::Array& id = rec->get("id");
    e.ids.emplace_back(id.data<std::int64_t>(), id.data<std::int64_t>() + id.numel());
    e.epochs.push_back(rec->get("epoch").data<std::int64_t>()[0]);
    const embedflow::Array& label = rec->get("label");
    e.labels.emplace_back(label.data<std::int64_t>(), label.data<std::int64_t>() + label.numel());
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

namespace {

// One image row of an emitted record: id, label and its bytes.
struct Row {
  std::int64_t id, label;
  std::vector<std::uint8_t> pixels;
  bool operator==(const Row& o) const { return id == o.id && label == o.label && pixels == o.pixels; }
};

// The rows of records [from, to) of e, in order.
std::vector<Row> rows_of(const Emitted& e, std::size_t from, std::size_t to) {
  std::vector<Row> rows;
  for (std::size_t i = from; i < to; ++i) {
    const std::size_t n = e.ids[i].size(), bytes = e.first_pixels[i].size() / n;
    for (std::size_t j = 0; j < n; ++j)
      rows.push_back(Row{e.ids[i][j], e.labels[i][j],
                         std::vector<std::uint8_t>(e.first_pixels[i].begin() + static_cast<std::ptrdiff_t>(j * bytes),
                                                   e.first_pixels[i].begin() + static_cast<std::ptrdiff_t>((j + 1) * bytes))});
  }
  return rows;
}

// The records of epoch `epoch`, as the range [from, to).
std::pair<std::size_t, std::size_t> epoch_records(const Emitted& e, std::int64_t epoch) {
  std::size_t from = 0;
  while (from < e.epochs.size() && e.epochs[from] < epoch) ++from;
  std::size_t to = from;
  while (to < e.epochs.size() && e.epochs[to] == epoch) ++to;
  return {from, to};
}

// rank_rows by hand: rank r of w takes [n r / w, n (r+1) / w).
std::size_t share(std::size_t n, int rank, int world) {
  const auto r = static_cast<std::size_t>(rank), w = static_cast<std::size_t>(world);
  return n * (r + 1) / w - n * r / w;
}

std::string sets_note(const std::vector<std::string>& sets) {
  std::string s;
  for (const auto& x : sets) s += x + " ";
  return s;
}

}  // namespace

TEST_CASE("files_reader sharded over W = 2, 3, 4 ranks: the ranks' rows in rank order are the unsharded reader's "
          "batches (ids, labels, pixels), from a CSV list and a directory tree, shuffled or not, over two epochs", "[shard]") {
  const fs::path dir = scratch_dir("image_files_shard");
  write_tree(dir / "tree", {"0", "1", "2"}, 9);  // 27 PNG and JPEG files
  std::vector<std::string> names;
  const auto entries = embedflow::image::list_directory((dir / "tree").string(), names);
  REQUIRE(entries.size() == 27);
  // The same files listed by a CSV in reverse order, with ids of their own.
  std::string csv = "path,id,label\n";
  for (std::size_t i = entries.size(); i-- > 0;)
    csv += entries[i].path + "," + std::to_string(500 + i) + "," + std::to_string(entries[i].label) + "\n";
  write_file(dir / "list.csv", csv);
  for (const std::string source : {"dir: " + (dir / "tree").string(), "csv: " + (dir / "list.csv").string()}) {
    // 27 = 3 x 7 + 6 (a last batch every world can share), 3 x 9, 5 x 5 + 2 dropped; per image; one table.
    for (const std::string batching : {"batch_size: 7", "batch_size: 9", "batch_size: 5, drop_last: true", "batch_size: 0",
                                       "batch_size: -1"}) {
      const bool table = batching == "batch_size: -1", per_image = batching == "batch_size: 0";
      const std::int64_t batch = table ? 27 : per_image ? 0 : std::stoi(batching.substr(12));
      const int epochs = table ? 1 : 2;
      GraphRunner runner(plugins(), "seed: 5\nnodes:\n  read: {type: image.files_reader, params: {" + source +
                                        ", mode: color, chunk: 4, epochs: " + std::to_string(epochs) + ", " + batching + "}}\n",
                         "files_shard.yaml");
      runner.collect("read.out");
      for (const std::string shuffle : {"false", "true"}) {
        INFO(source << ", " << batching << ", shuffle " << shuffle);
        const GraphRun whole_run = runner.run({"read.shuffle=" + shuffle});
        INFO(whole_run.message());
        REQUIRE(whole_run.exit_code == 0);
        const Emitted whole = emitted(whole_run);
        const std::size_t per_epoch = batching.find("drop_last") != std::string::npos ? 25 : 27;
        for (int epoch = 0; epoch < epochs; ++epoch) {
          const auto [from, to] = epoch_records(whole, epoch);
          REQUIRE(rows_of(whole, from, to).size() == per_epoch);
        }
        const std::size_t half = whole.ids.size() / 2;
        if (shuffle == "true" && epochs == 2) CHECK(rows_of(whole, 0, half) != rows_of(whole, half, whole.ids.size()));
        for (int world : {2, 3, 4}) {
          INFO("world " << world);
          std::vector<Emitted> ranks;
          for (int rank = 0; rank < world; ++rank) {
            const GraphRun r = runner.run({"read.shuffle=" + shuffle, "read.shard_world_size=" + std::to_string(world),
                                           "read.shard_rank=" + std::to_string(rank)});
            INFO(r.message());
            REQUIRE(r.exit_code == 0);
            ranks.push_back(emitted(r));
          }
          if (batch > 0 && !table) {
            // Every rank emits every batch (equal step counts); its rows are rank_rows(B) of the batch.
            for (const Emitted& e : ranks) REQUIRE(e.ids.size() == whole.ids.size());
            for (std::size_t b = 0; b < whole.ids.size(); ++b) {
              std::vector<Row> joined;
              for (int rank = 0; rank < world; ++rank) {
                const Emitted& e = ranks[static_cast<std::size_t>(rank)];
                CHECK(e.ids[b].size() == share(whole.ids[b].size(), rank, world));
                CHECK(e.epochs[b] == whole.epochs[b]);
                REQUIRE(e.unsharded.size() == e.ids.size());
                CHECK(e.unsharded[b] == static_cast<std::int64_t>(whole.ids[b].size()));
                for (Row& row : rows_of(e, b, b + 1)) joined.push_back(std::move(row));
              }
              CHECK(joined == rows_of(whole, b, b + 1));
            }
          } else {
            // Per epoch, rank r's records are positions rank_rows(N) of the epoch's; in rank order, all of them.
            for (int epoch = 0; epoch < epochs; ++epoch) {
              const auto [wf, wt] = epoch_records(whole, epoch);
              std::vector<Row> joined;
              for (int rank = 0; rank < world; ++rank) {
                const Emitted& e = ranks[static_cast<std::size_t>(rank)];
                CHECK(e.unsharded.empty());
                const auto [from, to] = epoch_records(e, epoch);
                std::vector<Row> mine = rows_of(e, from, to);
                CHECK(mine.size() == share(27, rank, world));
                if (table) CHECK(to - from == 1);
                joined.insert(joined.end(), mine.begin(), mine.end());
              }
              CHECK(joined == rows_of(whole, wf, wt));
            }
          }
        }
      }
    }
  }
}

TEST_CASE("files_reader sharded: WORLD_SIZE / RANK give the parameters' share; a bad place, a batch smaller than "
          "the world and a short last batch are located errors", "[shard]") {
  const fs::path dir = scratch_dir("image_files_shard_place");
  write_tree(dir / "tree", {"4", "5"}, 8);  // 16 files
  GraphRunner runner(plugins(), "seed: 2\nnodes:\n  read: {type: image.files_reader, params: {dir: " + (dir / "tree").string() +
                                    ", shuffle: true, epochs: 2, batch_size: 5, drop_last: true}}\n", "place.yaml");
  runner.collect("read.out");
  const GraphRun explicit_run = runner.run({"read.shard_world_size=3", "read.shard_rank=2"});
  INFO(explicit_run.message());
  REQUIRE(explicit_run.exit_code == 0);
  const Emitted explicit_rows = emitted(explicit_run);
  REQUIRE(explicit_rows.ids.size() == 6);  // 3 batches of 5 per epoch, the 16th image dropped
  {
    ScopedEnv world("WORLD_SIZE", "3"), rank("RANK", "2");
    const GraphRun env_run = runner.run({"read.shard_world_size=0"});
    INFO(env_run.message());
    REQUIRE(env_run.exit_code == 0);
    const Emitted env_rows = emitted(env_run);
    CHECK(env_rows.ids == explicit_rows.ids);
    CHECK(env_rows.first_pixels == explicit_rows.first_pixels);
    CHECK(env_rows.unsharded == explicit_rows.unsharded);
    // A batch smaller than a world known only at run time stops at the first batch.
    ScopedEnv big("WORLD_SIZE", "6");
    const GraphRun small = runner.run({"read.shard_world_size=0"});
    CHECK(small.exit_code == 1);
    CHECK_THAT(small.error, Catch::Contains("node 'read'") &&
                                Catch::Contains("epoch 0, batch 0: a batch of 5 images is fewer than the 6 ranks sharing it; raise batch_size"));
  }
  const GraphRun outside = runner.run({"read.shard_world_size=3", "read.shard_rank=3"});
  CHECK(outside.exit_code != 0);
  CHECK_THAT(outside.error, Catch::Contains("'read'") && Catch::Contains("shard_world_size / shard_rank: rank 3 is outside [0, 3)"));
  // Known at validation: a batch smaller than an explicit world.
  const GraphRun narrow = runner.run({"read.shard_world_size=6", "read.shard_rank=0"});
  CHECK(narrow.exit_code == 2);
  CHECK_THAT(narrow.problem_text(), Catch::Contains("read") && Catch::Contains("batch_size 5 is smaller than shard_world_size 6"));
  // 16 = 3 x 5 + 1: the last batch's one image cannot be shared by 2 ranks.
  const GraphRun last = runner.run({"read.drop_last=false", "read.shard_world_size=2", "read.shard_rank=1"});
  CHECK(last.exit_code == 1);
  CHECK_THAT(last.error, Catch::Contains("node 'read'") &&
                             Catch::Contains("epoch 0, batch 3: a batch of 1 images (the last of 16) is fewer than the 2 ranks sharing it; set drop_last: true"));
}

namespace {

// tree/<0|1>/<n>.png|.jpg, 12 files listed by list.csv with ids 0..11 (row i on CSV line i + 2),
// except the rows in `bad`, which name a corrupt PNG (bad<i>.png) instead; the same list with
// the good files is good.csv.
void write_shard_list(const fs::path& dir, const std::set<int>& bad) {
  write_tree(dir / "tree", {"0", "1"}, 6);
  std::vector<std::string> names;
  const auto entries = embedflow::image::list_directory((dir / "tree").string(), names);
  REQUIRE(entries.size() == 12);
  std::string csv = "path,id,label\n", good = csv;
  for (int i = 0; i < 12; ++i) {
    const auto& e = entries[static_cast<std::size_t>(i)];
    const std::string tail = "," + std::to_string(i) + "," + std::to_string(e.label) + "\n";
    good += e.path + tail;
    if (bad.count(i)) {
      const fs::path corrupt = dir / ("bad" + std::to_string(i) + ".png");
      write_file(corrupt, std::string("\x89PNG\r\n\x1a\n", 8) + std::string(300, 'x'));
      csv += corrupt.string() + tail;
    } else {
      csv += e.path + tail;
    }
  }
  write_file(dir / "list.csv", csv);
  write_file(dir / "good.csv", good);
}

}  // namespace

TEST_CASE("files_reader sharded decodes only its rank's files: a corrupt file stops the rank that owns it, "
          "naming it, and no other", "[shard]") {
  const fs::path dir = scratch_dir("image_files_shard_own");
  write_shard_list(dir, {7});  // row 7, CSV line 9
  GraphRunner runner(plugins(), "nodes:\n  read: {type: image.files_reader, params: {csv: " + (dir / "list.csv").string() +
                                    ", mode: color}}\n", "own.yaml");
  runner.collect("read.out");
  auto names_bad = [](const std::string& error) {
    return error.find("bad7.png (") != std::string::npos && error.find("list.csv:9, id 7): not a decodable image") != std::string::npos;
  };
  // Owners of row 7: with batches of 6 over 3 ranks, rank 0 (rows 6-7 of batch 6-11); per image
  // over 3 ranks, rank 1 (rows 4-7); as a table over 2 ranks, rank 1 (rows 6-11). The default
  // chunk (256) would decode the whole list ahead in one go.
  struct Case {
    std::string batching;
    int world, owner;
  };
  for (const Case& c : {Case{"read.batch_size=6", 3, 0}, Case{"read.batch_size=0", 3, 1}, Case{"read.batch_size=-1", 2, 1}}) {
    INFO(c.batching);
    const GraphRun whole = runner.run({c.batching});
    INFO(whole.error);
    CHECK(whole.exit_code == 1);
    CHECK(names_bad(whole.error));
    for (int rank = 0; rank < c.world; ++rank) {
      const std::vector<std::string> sets{c.batching, "read.shard_world_size=" + std::to_string(c.world), "read.shard_rank=" + std::to_string(rank)};
      INFO(sets_note(sets));
      const GraphRun r = runner.run(sets);
      if (rank == c.owner) {
        INFO(r.error);
        CHECK(r.exit_code == 1);
        CHECK(r.error.find("node 'read'") != std::string::npos);
        CHECK(names_bad(r.error));
      } else {
        INFO(r.message());
        CHECK(r.exit_code == 0);
        const Emitted e = emitted(r);
        std::size_t rows = 0;
        for (const auto& ids : e.ids) rows += ids.size();
        CHECK(rows == (c.batching == "read.batch_size=6" ? 2 * share(6, rank, 3) : share(12, rank, c.world)));
        CHECK_THAT(r.log, Catch::Contains("decoded " + std::to_string(rows) + " images"));
      }
    }
  }
}

TEST_CASE("files_reader sharded with on_bad_image: skip: a rank leaves out its bad files, the batch keeps "
          "unsharded_rows B, and the ranks' rows are the unsharded rows less the bad files", "[shard]") {
  const fs::path dir = scratch_dir("image_files_shard_skip");
  write_shard_list(dir, {2, 7});  // batch 0 row 2 (rank 1's rows 2-3), batch 1 row 7 (rank 0's rows 6-7)
  const std::string yaml = "nodes:\n  read: {type: image.files_reader, params: {csv: LIST, mode: color, batch_size: 6, "
                           "epochs: 2, chunk: 5, on_bad_image: skip}}\n";
  auto runner = [&](const std::string& list) {
    std::string y = yaml;
    y.replace(y.find("LIST"), 4, (dir / list).string());
    GraphRunner g(plugins(), y, "skip.yaml");
    g.collect("read.out");
    return g;
  };
  // The oracle: the unsharded reader on the same list with good files in the bad rows' places.
  const GraphRun good_run = runner("good.csv").run();
  INFO(good_run.message());
  REQUIRE(good_run.exit_code == 0);
  const Emitted good = emitted(good_run);
  REQUIRE(good.ids.size() == 4);  // two batches of 6, two epochs
  std::vector<Emitted> ranks;
  for (int rank = 0; rank < 3; ++rank) {
    const GraphRun r = runner("list.csv").run({"read.shard_world_size=3", "read.shard_rank=" + std::to_string(rank)});
    INFO(r.message());
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.log, Catch::Contains(rank == 2 ? "skipped 0 unreadable files" : "skipped 1 unreadable files"));
    ranks.push_back(emitted(r));
    REQUIRE(ranks.back().ids.size() == 4);  // every batch, the one with a skipped file too
  }
  CHECK(ranks[1].ids[0] == std::vector<std::int64_t>{3});
  CHECK(ranks[0].ids[1] == std::vector<std::int64_t>{6});
  std::vector<Row> all;
  for (std::size_t b = 0; b < 4; ++b) {
    std::vector<Row> joined, want;
    for (const Emitted& e : ranks) {
      CHECK(e.unsharded[b] == 6);  // the planned global batch, whatever was skipped
      for (Row& row : rows_of(e, b, b + 1)) joined.push_back(std::move(row));
    }
    for (Row& row : rows_of(good, b, b + 1))
      if (row.id != 2 && row.id != 7) want.push_back(std::move(row));
    CHECK(joined == want);
    if (b < 2) all.insert(all.end(), joined.begin(), joined.end());
  }
  // Over the first epoch, the rows are the unsharded skipping reader's (which fills its batches
  // from the next files instead).
  const GraphRun skip_run = runner("list.csv").run();
  REQUIRE(skip_run.exit_code == 0);
  const Emitted skipped = emitted(skip_run);
  const auto [from, to] = epoch_records(skipped, 0);
  CHECK(rows_of(skipped, from, to) == all);
  CHECK(all.size() == 10);

  // A rank whose whole share of a batch is unreadable has no rows for a step the others take.
  write_shard_list(dir / "worse", {2, 3});
  const GraphRunner worse(plugins(), "nodes:\n  read: {type: image.files_reader, params: {csv: " + (dir / "worse/list.csv").string() +
                                     ", batch_size: 6, on_bad_image: skip, shard_world_size: 3}}\n", "worse.yaml");
  const GraphRun stuck = worse.run({"read.shard_rank=1"});
  CHECK(stuck.exit_code == 1);
  CHECK_THAT(stuck.error, Catch::Contains("node 'read'") &&
                              Catch::Contains("epoch 0, batch 0: every file of rank 1's 2 of the batch's 6 images is unreadable") &&
                              Catch::Contains("bad3.png"));
  CHECK(worse.run({"read.shard_rank=0"}).exit_code == 0);
  CHECK(worse.run({"read.shard_rank=2"}).exit_code == 0);
}
