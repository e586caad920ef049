// torch.train behind a reader sharded at the source (image.files_reader's shard_world_size /
// shard_rank) with on_bad_image: skip: the ranks' rows of a batch fall short of its planned size
// by the files skipped, which the batches say (skipped_rows); two ranks train as one process on
// the rows they hold.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>

#include "cli.hpp"
#include "torch_test_util.hpp"

using namespace embedflow;
using namespace embedflow::test;
namespace fs = std::filesystem;

namespace {

// A 16x16 grey PGM: a smooth gradient whose direction and offset vary with i.
void write_pgm(const fs::path& path, int i) {
  std::ofstream f(path, std::ios::binary);
  f << "P5\n16 16\n255\n";
  for (int y = 0; y < 16; ++y)
    for (int x = 0; x < 16; ++x) f.put(static_cast<char>((x * (i % 4 + 1) * 3 + y * (i % 3 + 1) * 4 + 11 * i) % 256));
}

}  // namespace

TEST_CASE("two ranks behind sharded readers that skip an unreadable file train as one process on the rows they hold",
          "[torch][train][shard]") {
  fs::path dir = scratch_dir("torch-shard-skip");
  // 16 files, the last a PGM cut inside its pixels: batches of 8 are files 0-7 and 8-14 once it is
  // skipped. Two ranks hold rows 0-3 / 4-7 and 8-11 / 12-14 (rank 1 skipped one).
  std::string csv = "path,id,label\n";
  for (int i = 0; i < 16; ++i) {
    const fs::path file = dir / ("img" + std::to_string(i) + ".pgm");
    write_pgm(file, i);
    csv += file.filename().string() + "," + std::to_string(i) + "," + std::to_string(i % 2) + "\n";
  }
  fs::resize_file(dir / "img15.pgm", 40);
  write_file(dir / "list.csv", csv);
  auto graph = [&](const std::string& run) {
    return "# sharded reader, skipped file\nseed: 3\nnodes:\n"
           "  data:  {type: image.files_reader, params: {csv: " + (dir / "list.csv").string() + ", mode: grey, "
           "batch_size: 8, on_bad_image: skip}}\n"
           "  train: {type: torch.train, params: {model: {type: torch.conv_ae, channels: [4, 8], latent_dim: 4, image_size: 16}, "
           "loss: {type: torch.reconstruction}, optimizer: {type: torch.sgd, lr: 0.5}, epochs: 2, log_every: 1, "
           "threads: 1, gather_embeddings: off, rendezvous_timeout: 20, log_dir: " + (dir / run).string() + "}}\n"
           "edges: [data.out -> train.in]\n";
  };
  write_file(dir / "single.yaml", graph("single"));
  auto single = run_cli({"run", (dir / "single.yaml").string(), "--quiet"});
  INFO(single.err);
  REQUIRE(single.exit_code == 0);

  const std::string store = "file://" + (dir / "store").string();
  auto rank_args = [&](int rank) {
    const std::string name = "rank" + std::to_string(rank);
    write_file(dir / (name + ".yaml"), graph(name));
    return std::vector<std::string>{"run", (dir / (name + ".yaml")).string(), "--quiet",
                                    "--set", "data.shard_world_size=2", "--set", "data.shard_rank=" + std::to_string(rank),
                                    "--set", "train.world_size=2", "--set", "train.rank=" + std::to_string(rank),
                                    "--set", "train.rendezvous=" + store};
  };
  auto child = spawn_cli(rank_args(1));
  auto rank0 = run_cli(rank_args(0));
  auto rank1 = wait_child(child);
  INFO(rank0.err << rank1.err);
  REQUIRE(rank0.exit_code == 0);
  REQUIRE(rank1.exit_code == 0);

  auto a = read_metrics(dir / "single" / "metrics.csv"), b = read_metrics(dir / "rank0" / "metrics.csv");
  REQUIRE(a.size() == 4);
  REQUIRE(b.size() == 4);
  for (std::size_t i = 0; i < a.size(); ++i) {
    // The logged loss is the mean over the batch's readable rows (7 of 8 in the second batch), and
    // each step's weights follow from the previous steps' gradients.
    INFO("step " << a[i].step << ": one process " << a[i].loss << ", two ranks " << b[i].loss);
    CHECK(std::abs(std::stod(a[i].loss) - std::stod(b[i].loss)) <= 1e-5 * std::max(1.0, std::stod(a[i].loss)));
  }
}
