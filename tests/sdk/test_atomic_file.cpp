// The SDK's all-or-nothing output files (embedflow/atomic_file.hpp): a commit replaces the file,
// an abandoned or failed write leaves the earlier file byte for byte, an interrupted run's commit
// lands beside it as <name>.partial, and no temporary survives.
#include <catch2/catch.hpp>

#include <embedflow/atomic_file.hpp>
#include <embedflow/error.hpp>
#include <embedflow/report_files.hpp>

#include <algorithm>
#include <atomic>
#include <filesystem>

#include "cli.hpp"

using namespace embedflow;
using namespace embedflow::test;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("atomic output: commit replaces, abandon and destruction keep the earlier file") {
  const fs::path dir = scratch_dir("sdk_atomic");
  const fs::path file = dir / "sub" / "table.csv";
  write_file_atomic(file, "a,b\n1,2\n");
  CHECK(read_file(file) == "a,b\n1,2\n");
  {
    AtomicOutputFile f(file);
    f << "x,y\n";
    CHECK(fs::exists(f.temp_path()));
    CHECK(f.temp_path().parent_path() == file.parent_path());  // same directory: rename is atomic
    CHECK(read_file(file) == "a,b\n1,2\n");                      // nothing visible before commit
  }  // destroyed without commit, as when a node throws
  CHECK(read_file(file) == "a,b\n1,2\n");
  {
    AtomicOutputFile f(file);
    f.stream() << "half";
    f.abandon();
  }
  CHECK(read_file(file) == "a,b\n1,2\n");
  CHECK(names_in(file.parent_path()) == std::vector<std::string>{"table.csv"});
  AtomicOutputFile f(file);
  f << "c,d\n" << 3 << ",4\n";
  CHECK(f.commit() == file);
  CHECK(f.committed());
  CHECK(read_file(file) == "c,d\n3,4\n");
  CHECK_THROWS_AS(f.commit(), Error);
  CHECK(names_in(file.parent_path()) == std::vector<std::string>{"table.csv"});
}

TEST_CASE("atomic output: an interrupted run's commit goes to <name>.partial; a clean one removes it") {
  const fs::path dir = scratch_dir("sdk_atomic_interrupt");
  const fs::path file = dir / "summary.json";
  write_text_atomic(file.string(), "{\"complete\": true}\n");
  std::atomic<bool> stop{false};
  set_output_interrupt_flag(&stop);
  stop = true;
  CHECK(outputs_interrupted());
  CHECK(write_file_atomic(file, "{\"complete\": false}\n") == partial_path(file));
  CHECK(read_file(file) == "{\"complete\": true}\n");
  CHECK(read_file(dir / "summary.json.partial") == "{\"complete\": false}\n");
  stop = false;
  CHECK(write_file_atomic(file, "{\"run\": 2}\n") == file);
  CHECK(read_file(file) == "{\"run\": 2}\n");
  CHECK(names_in(dir) == std::vector<std::string>{"summary.json"});
  set_output_interrupt_flag(nullptr);
  CHECK_FALSE(outputs_interrupted());
}

TEST_CASE("atomic output: a path that cannot be written is an Error naming it, and the old file stays") {
  const fs::path dir = scratch_dir("sdk_atomic_fail");
  write_file(dir / "blocker", "a file where a directory should be\n");
  CHECK_THROWS_WITH(AtomicOutputFile(dir / "blocker" / "x.csv"), Catch::Contains("blocker"));
  // A directory in the way of the rename: the write fails and the temporary is removed.
  fs::create_directories(dir / "taken" / "inner");
  CHECK_THROWS_WITH(write_file_atomic(dir / "taken", "data"), Catch::Contains("taken"));
  CHECK(fs::is_directory(dir / "taken" / "inner"));
  CHECK(names_in(dir) == std::vector<std::string>{"blocker", "taken"});
}
