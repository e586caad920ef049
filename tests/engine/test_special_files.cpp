// Paths that name something other than a regular file: a FIFO or a device node given as an
// output is refused with its name and left as it was (an atomic rename would otherwise replace
// it: as root, `path: /dev/null` once replaced the machine's /dev/null); a FIFO given as an input
// is refused before it is opened (opening it would block until a writer came). The device
// nodes are made in the test's own scratch folder, never a system path.
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cli.hpp"

using namespace embedflow::test;
namespace fs = std::filesystem;

namespace {

bool fifo_at(const fs::path& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
}
bool char_device_at(const fs::path& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0 && S_ISCHR(st.st_mode);
}

std::string writer_graph(const fs::path& target) {
  return "nodes:\n  numbers: {type: core.range, params: {count: 5}}\n  save: {type: io.hdf5_writer, params: {path: " +
         target.string() + "}}\nedges: [numbers.out -> save.in]\n";
}

}  // namespace

TEST_CASE("outputs never replace a FIFO or a device node", "[special]") {
  const fs::path dir = scratch_dir("special_outputs");
  const fs::path fifo = dir / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  Result r = run_graph_file(dir, "w.yaml", writer_graph(fifo), {"--no-report"});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("cannot write '" + fifo.string() + "': it is a FIFO"));
  CHECK(fifo_at(fifo));

  // A run's report written over a FIFO: refused, the FIFO kept.
  r = run_graph_file(dir, "ok.yaml", writer_graph(dir / "ok.h5"), {"--out", (dir / "run").string(), "--no-report"});
  REQUIRE(r.exit_code == 0);
  r = run_cli({"report", (dir / "run").string(), "-o", fifo.string()});
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.err, Catch::Contains("it is a FIFO"));
  CHECK(fifo_at(fifo));

  // A device node (as root: mknod needs it): the same null device /dev/null is, made here.
  const fs::path null = dir / "null";
  if (::geteuid() != 0 || ::mknod(null.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) {
    WARN("not root: the device-node case is skipped (mknod needs CAP_MKNOD)");
    return;
  }
  r = run_graph_file(dir, "dev.yaml", writer_graph(null), {"--no-report"});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("it is a character device"));
  CHECK(char_device_at(null));
  r = run_cli({"report", (dir / "run").string(), "-o", null.string()});
  CHECK(r.exit_code != 0);
  CHECK(char_device_at(null));
}

TEST_CASE("inputs that are FIFOs are refused before they are opened, not waited on", "[special]") {
  const fs::path dir = scratch_dir("special_inputs");
  const fs::path fifo = dir / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  // A CSV reader, an HDF5 reader and an image decoder, each given the FIFO: each fails at once
  // (ctest's timeout would catch a hang) naming it.
  Result r = run_graph_file(dir, "csv.yaml",
                            "nodes:\n  photos: {type: geo.csv_photos, params: {path: " + fifo.string() +
                                "}}\n  show: {type: core.sink}\nedges: [photos.out -> show.in]\n",
                            {"--no-report"});
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.err, Catch::Contains(fifo.string()) && Catch::Contains("is a FIFO"));
  r = run_graph_file(dir, "h5.yaml",
                     "nodes:\n  read: {type: io.hdf5_reader, params: {path: " + fifo.string() +
                         "}}\n  show: {type: core.sink}\nedges: [read.out -> show.in]\n",
                     {"--no-report"});
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.err, Catch::Contains("is a FIFO"));
  write_file(dir / "list.csv", "path,label\nfifo,0\n");
  r = run_graph_file(dir, "img.yaml",
                     "nodes:\n  images: {type: image.files_reader, params: {csv: " + (dir / "list.csv").string() +
                         "}}\n  show: {type: core.sink}\nedges: [images.out -> show.in]\n",
                     {"--no-report"});
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.err, Catch::Contains("not a regular file"));
  CHECK(fifo_at(fifo));
}
