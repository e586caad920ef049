// io.hdf5_reader and io.hdf5_writer through whole graphs run in process (GraphRunner): write,
// copy (rebatched and shuffled), append, read h5py files, and clear load-time errors; through the
// CLI where its own behaviour is under test (a signal mid-stream).
#include <signal.h>
#include <sys/resource.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <numeric>
#include <set>
#include <thread>

#include "embedflow/hdf5/stream_file.hpp"
#include "harness.hpp"

using namespace embedflow;
namespace fs = std::filesystem;
using namespace embedflow::test;

namespace {

std::string write_graph(const fs::path& out, const std::string& mode = "overwrite") {
  return "# Writes 1000 numbers in batches of 100.\n"
         "seed: 3\n"
         "nodes:\n"
         "  numbers: {type: core.range, params: {count: 1000}}\n"
         "  batches: {type: core.batch, params: {size: 100}}\n"
         "  save:    {type: io.hdf5_writer, params: {path: " + out.string() + ", group: numbers, compression: 4, mode: " + mode + "}}\n"
         "edges: [numbers.out -> batches.in, batches.out -> save.in]\n";
}

std::vector<std::int64_t> column(const fs::path& file, const std::string& port, const std::string& field) {
  hdf5::StreamFileReader r(file);
  const hdf5::Table& t = r.port(port);
  Record all = t.read_rows(0, t.rows(), {field});
  std::vector<std::int64_t> v;
  for (std::int64_t i = 0; i < all.get(field).numel(); ++i) v.push_back(all.get(field).as_int(i));
  return v;
}

}  // namespace

TEST_CASE("io.hdf5_writer stores a stream; io.hdf5_reader copies it rebatched and shuffled", "[io]") {
  fs::path dir = scratch_dir("io-graph");
  fs::path numbers = dir / "out" / "numbers.h5";
  GraphRun res = GraphRunner(plugins(), write_graph(numbers), "write.yaml").run();
  INFO(res.message());
  REQUIRE(res.exit_code == 0);
  {
    hdf5::StreamFileReader r(numbers);
    REQUIRE(r.ports() == std::vector<std::string>{"numbers"});
    REQUIRE(r.attribute("node") == std::optional<std::string>("save"));
    const hdf5::Table& t = r.port("numbers");
    REQUIRE(t.layout() == hdf5::Layout::batches);
    REQUIRE(t.records() == 10);
    REQUIRE(t.rows() == 1000);
    auto values = column(numbers, "numbers", "index");
    for (std::int64_t i = 0; i < 1000; ++i) REQUIRE(values[static_cast<std::size_t>(i)] == i);
  }

  auto copy_graph = [&](const fs::path& out, int seed) {
    return "# Copies the numbers rebatched by 64 and shuffled.\n"
           "seed: " + std::to_string(seed) + "\n"
           "nodes:\n"
           "  read: {type: io.hdf5_reader, params: {path: " + numbers.string() +
           ", batch_size: 64, shuffle: true, shuffle_window: 300, fields: [index, value]}}\n"
           "  save: {type: io.hdf5_writer, params: {path: " + out.string() + ", group: copy}}\n"
           "edges: [read.out -> save.in]\n";
  };
  fs::path copy1 = dir / "copy1.h5", copy2 = dir / "copy2.h5", copy3 = dir / "copy3.h5";
  const std::pair<fs::path, int> copies[] = {{copy1, 5}, {copy2, 5}, {copy3, 6}};
  for (const auto& [copy, seed] : copies) {
    GraphRun r = GraphRunner(plugins(), copy_graph(copy, seed), copy.stem().string() + ".yaml").run();
    INFO(copy << ": " << r.message());
    REQUIRE(r.exit_code == 0);
  }
  hdf5::StreamFileReader c1(copy1);
  REQUIRE(c1.port("copy").records() == 16);  // 15 x 64 + 40
  REQUIRE(c1.port("copy").record_end(15) - c1.port("copy").record_begin(15) == 40);
  REQUIRE(c1.port("copy").fields()[0].name == "index");
  auto a = column(copy1, "copy", "index"), b = column(copy2, "copy", "index"), c = column(copy3, "copy", "index");
  REQUIRE(a == b);  // same graph seed, same order
  REQUIRE(a != c);
  REQUIRE(std::set<std::int64_t>(a.begin(), a.end()).size() == 1000);
  REQUIRE(*std::max_element(a.begin(), a.end()) == 999);
  std::vector<std::int64_t> identity(1000);
  std::iota(identity.begin(), identity.end(), 0);
  REQUIRE(a != identity);
}

TEST_CASE("io.hdf5_writer mode append adds records; overwrite replaces", "[io]") {
  fs::path dir = scratch_dir("io-append");
  fs::path file = dir / "numbers.h5";
  const GraphRunner append(plugins(), write_graph(file, "append"), "append.yaml");
  for (int i = 0; i < 2; ++i) REQUIRE(append.run().exit_code == 0);
  REQUIRE(hdf5::StreamFileReader(file).port("numbers").rows() == 2000);
  REQUIRE(GraphRunner(plugins(), write_graph(file, "overwrite"), "overwrite.yaml").run().exit_code == 0);
  REQUIRE(hdf5::StreamFileReader(file).port("numbers").rows() == 1000);
  // No temporaries left behind by clean runs.
  for (const auto& e : fs::directory_iterator(dir)) REQUIRE_FALSE(hdf5::StreamFileWriter::temp_owner_pid(e.path()));
}

TEST_CASE("io.hdf5_reader streams an h5py file and declares its schema at load", "[io][python]") {
  fs::path dir = scratch_dir("io-h5py");
  fs::path file = dir / "features.h5";
  auto py = run_python(R"PY(
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f["train/feature"] = np.arange(500 * 8, dtype=np.float32).reshape(500, 8)
    f["train/label"] = np.arange(500, dtype=np.int64) % 10
print("ok")
)PY",
                       {file.string()});
  REQUIRE(py.exit_code == 0);
  GraphRun res = GraphRunner(plugins(),
                             "# Reads h5py-written features in batches of 128 and counts them.\n"
                             "nodes:\n"
                             "  read: {type: io.hdf5_reader, params: {path: " + file.string() +
                                 ", object: train, batch_size: 128, start: 10, stop: 490}}\n"
                             "  save: {type: io.hdf5_writer, params: {path: " + (dir / "copy.h5").string() + "}}\n"
                             "edges: [read.out -> save.in]\n",
                             "read.yaml")
                     .run();
  INFO(res.message());
  REQUIRE(res.exit_code == 0);
  hdf5::StreamFileReader r(dir / "copy.h5");
  const hdf5::Table& t = r.port("data");
  REQUIRE(t.rows() == 480);
  REQUIRE(t.records() == 4);  // 128 + 128 + 128 + 96
  REQUIRE(t.field("feature").inner == Shape{8});
  REQUIRE(column(dir / "copy.h5", "data", "label")[0] == 0);  // row 10 -> 10 % 10

  // A consumer that needs a field the file lacks fails at load, not at the first record.
  GraphRun bad = GraphRunner(plugins(),
                             "# Asks for a dataset that is not there.\n"
                             "nodes:\n"
                             "  read: {type: io.hdf5_reader, params: {path: " + file.string() +
                                 ", object: train, fields: [feature, colour]}}\n"
                             "  show: {type: core.sink}\n"
                             "edges: [read.out -> show.in]\n",
                             "bad_field.yaml")
                     .validate();
  REQUIRE(bad.exit_code == 2);
  REQUIRE_THAT(bad.problem_text(), Catch::Contains("no dataset 'colour'") && Catch::Contains("features.h5"));
}

TEST_CASE("io.hdf5_reader names a missing file at load", "[io]") {
  fs::path dir = scratch_dir("io-missing");
  GraphRun res = GraphRunner(plugins(),
                             "# Reads a file that does not exist.\n"
                             "nodes:\n"
                             "  read: {type: io.hdf5_reader, params: {path: " + (dir / "nowhere.h5").string() + "}}\n"
                             "  show: {type: core.sink}\n"
                             "edges: [read.out -> show.in]\n",
                             "missing.yaml")
                     .validate();
  REQUIRE(res.exit_code == 2);
  REQUIRE_THAT(res.problem_text(), Catch::Contains("missing.yaml:") && Catch::Contains("node 'read'") &&
                                      Catch::Contains("nowhere.h5: no such file"));
}

TEST_CASE("io.hdf5_reader refuses a dataset that declares rows it does not store", "[io][python]") {
  // 2^40 rows of 8 floats declared, one chunk written: ~1.7 KB on disk. Sized from the declared
  // shape, the reader would ask for gigabytes; read as declared, it would stream zeros.
  fs::path dir = scratch_dir("io-declared");
  fs::path file = dir / "huge.h5";
  auto py = run_python(R"PY(
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    d = f.create_dataset("x", shape=(2**40, 8), maxshape=(None, 8), chunks=(64, 8), dtype=np.float32)
    d[:64] = 1.0
    f["label"] = np.zeros(4, dtype=np.int64)
print("ok")
)PY",
                       {file.string()});
  REQUIRE(py.exit_code == 0);
  GraphRun res = GraphRunner(plugins(),
                             "nodes:\n"
                             "  read: {type: io.hdf5_reader, params: {path: " + file.string() + ", fields: [x], batch_size: 64}}\n"
                             "  show: {type: core.sink}\n"
                             "edges: [read.out -> show.in]\n",
                             "read.yaml")
                     .run();
  INFO(res.message());
  CHECK(res.exit_code != 0);  // and no crash: a segfault would have ended this test process
  CHECK_THAT(res.error, Catch::Contains("huge.h5") && Catch::Contains("declares 1099511627776 rows") &&
                            Catch::Contains("truncated or damaged"));
  // The run happened in this process: its peak resident set bounds the reader's.
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  CHECK(usage.ru_maxrss < 500 * 1024);
}

namespace {

// A complete file written by a clean run, to be left untouched by the runs that follow; the
// graph stays in dir/write.yaml for a later clean run.
std::string complete_file(const fs::path& dir, const fs::path& file) {
  write_file(dir / "write.yaml", write_graph(file));
  GraphRun res = GraphRunner::from_file(plugins(), (dir / "write.yaml").string()).run();
  INFO(res.message());
  REQUIRE(res.exit_code == 0);
  return read_file(file);
}

}  // namespace

TEST_CASE("io.hdf5_writer interrupted mid-stream leaves the earlier complete file byte-identical", "[io][cli]") {
  const int signals[] = {SIGINT, SIGTERM};
  for (int sig : signals) {
    DYNAMIC_SECTION("signal " << sig) {
      fs::path dir = scratch_dir(cat("io-interrupt-", sig));
      fs::path file = dir / "out" / "numbers.h5";
      const std::string before = complete_file(dir, file);
      // Far more records than the run gets through before the signal.
      write_file(dir / "long.yaml",
                 "nodes:\n"
                 "  numbers: {type: core.range, params: {count: 200000000}}\n"
                 "  batches: {type: core.batch, params: {size: 100}}\n"
                 "  save:    {type: io.hdf5_writer, params: {path: " + file.string() + ", group: numbers}}\n"
                 "edges: [numbers.out -> batches.in, batches.out -> save.in]\n");
      Child child = spawn_cli({"run", (dir / "long.yaml").string(), "-q"});
      // Signal once the writer's temporary holds data (records flow, the handler is installed).
      bool flowing = false;
      for (int i = 0; i < 300 && !flowing; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        std::error_code ec;
        for (const auto& e : fs::directory_iterator(dir / "out", ec))
          if (hdf5::StreamFileWriter::temp_owner_pid(e.path()) && fs::file_size(e.path(), ec) > (1u << 20)) flowing = true;
      }
      REQUIRE(flowing);
      kill(child.pid, sig);
      auto res = wait_child(child);
      INFO(res.out << res.err);
      CHECK(res.exit_code == (sig == SIGINT ? 130 : 143));
      CHECK(read_file(file) == before);
      CHECK_THAT(res.err, Catch::Contains("interrupted: kept") && Catch::Contains("numbers.h5.partial"));
      // What the interrupted run saw is kept under a name that says so, marked incomplete
      // (complete = 0): a reader refuses it unless asked for a partial file.
      CHECK_THROWS_WITH(hdf5::StreamFileReader(dir / "out" / "numbers.h5.partial"),
                        Catch::Contains("a partial stream (complete = 0)"));
      hdf5::StreamFileReader partial(dir / "out" / "numbers.h5.partial", /*allow_partial=*/true);
      CHECK(partial.partial());
      std::int64_t rows = partial.port("numbers").rows();
      CHECK(rows > 0);
      CHECK(rows < 200000000);
      for (const auto& e : fs::directory_iterator(dir / "out")) CHECK_FALSE(hdf5::StreamFileWriter::temp_owner_pid(e.path()));
      // A later clean run replaces the file and removes the stale partial.
      REQUIRE(run_cli({"run", (dir / "write.yaml").string(), "-q"}).exit_code == 0);
      CHECK_FALSE(fs::exists(dir / "out" / "numbers.h5.partial"));
    }
  }
}

TEST_CASE("io.hdf5_writer failing mid-stream leaves the earlier complete file byte-identical", "[io]") {
  fs::path dir = scratch_dir("io-error");
  fs::path file = dir / "out" / "numbers.h5";
  const std::string before = complete_file(dir, file);
  GraphRun res = GraphRunner(plugins_and_testing(),
                             "nodes:\n"
                             "  numbers: {type: core.range, params: {count: 100000}}\n"
                             "  poison:  {type: testing.explode, params: {at: 60000}}\n"
                             "  batches: {type: core.batch, params: {size: 100}}\n"
                             "  save:    {type: io.hdf5_writer, params: {path: " + file.string() + ", group: numbers}}\n"
                             "edges: [numbers.out -> poison.in, poison.out -> batches.in, batches.out -> save.in]\n",
                             "fail.yaml")
                     .run();
  INFO(res.message());
  CHECK(res.exit_code == 1);
  CHECK_THAT(res.error, Catch::Contains("record 60000 is poisoned"));
  CHECK(read_file(file) == before);
  for (const auto& e : fs::directory_iterator(dir / "out")) {
    CHECK_FALSE(hdf5::StreamFileWriter::temp_owner_pid(e.path()));
    CHECK(e.path().filename() == "numbers.h5");
  }
}
