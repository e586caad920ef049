// torch.train and torch.embed in whole graphs run in process (GraphRunner), on Fashion-MNIST
// subsets that h5py writes from Debian's IDX files (the image family is not needed); through the
// CLI where a test reads the run folder's run.json or runs data-parallel ranks as processes. The
// loss falls over two
// epochs, a resumed run repeats the uninterrupted run's losses exactly, a NaN in the data stops
// the run naming step and batch, a TorchScript module scripted by python3-torch embeds as in
// Python and stays unchanged when frozen, and snapshots/checkpoints export embeddings to HDF5.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "harness.hpp"
#include "torch_test_util.hpp"

namespace fs = std::filesystem;
using namespace embedflow::test;

namespace {

// A graph run in process; `name` names it in located messages ("name:5:3: node 'train': ...").
GraphRun run_graph(const std::string& name, const std::string& yaml, const std::vector<std::string>& sets = {}) {
  return GraphRunner(plugins(), yaml, name).run(sets);
}
// run_graph for a graph that must succeed: a failed run fails the test with its message.
GraphRun run_graph_ok(const std::string& name, const std::string& yaml) {
  GraphRun r = run_graph(name, yaml);
  INFO(r.message());
  REQUIRE(r.exit_code == 0);
  return r;
}
GraphRun validate_graph(const std::string& name, const std::string& yaml) { return GraphRunner(plugins(), yaml, name).validate(); }

// The process-wide log level for one scope (--verbose: debug lines too).
class ScopedLogLevel {
 public:
  explicit ScopedLogLevel(embedflow::LogLevel level) : old_(embedflow::log_level()) { embedflow::set_log_level(level); }
  ~ScopedLogLevel() { embedflow::set_log_level(old_); }
  ScopedLogLevel(const ScopedLogLevel&) = delete;
  ScopedLogLevel& operator=(const ScopedLogLevel&) = delete;

 private:
  embedflow::LogLevel old_;
};

// A training graph over train.h5 with the given torch.train params (YAML flow map entries).
std::string train_graph(const std::string& data, const std::string& train_params, const std::string& extra_nodes = "",
                        const std::string& extra_edges = "") {
  return "# torch.train test graph.\n"
         "seed: 3\n"
         "nodes:\n"
         "  data:  {type: io.hdf5_reader, params: {path: " + data + ", fields: [id, label, image], batch_size: 64, shuffle: true}}\n"
         "  train: {type: torch.train, params: {" + train_params + "}}\n" + extra_nodes +
         "edges:\n"
         "  - data.out -> train.in\n" + extra_edges;
}

const std::string kSmallCnn = "model: {type: torch.small_cnn, channels: [8, 16], hidden: 32, embedding_dim: 16}";

// Embeds test.h5 with the final checkpoint a run left in dir/run/ckpt; returns the HDF5 file.
std::string embed_test_images(const fs::path& dir, const std::string& run) {
  const std::string h5 = (dir / (run + ".h5")).string();
  run_graph_ok(run + "_embed.yaml",
               "# embed\nseed: 1\nnodes:\n"
               "  test:  {type: io.hdf5_reader, params: {path: " + torch_data("test.h5") + ", batch_size: 128}}\n"
               "  embed: {type: torch.embed, params: {checkpoint: " + (dir / run / "ckpt").string() + "}}\n"
               "  save:  {type: io.hdf5_writer, params: {path: " + h5 + ", group: embeddings}}\n"
               "edges: [test.out -> embed.in, embed.out -> save.in]\n");
  return h5;
}

// h5py reads both files' 128 x 8 embeddings; they agree within `relative` of the largest value.
void check_same_embeddings(const std::string& a, const std::string& b, double relative) {
  check_python(R"PY(
import sys, h5py, numpy as np
a, b = (h5py.File(p)['embeddings']['embedding'][:] for p in sys.argv[1:3])
assert a.shape == (128, 8), a.shape
d = np.abs(a - b).max()
assert d < float(sys.argv[3]) * np.abs(a).max(), d
print('ok', d)
)PY",
               {a, b, std::to_string(relative)});
}

}  // namespace

TEST_CASE("two epochs on a Fashion-MNIST subset lower the loss; metrics files and stream", "[torch][train]") {
  fs::path dir = scratch_dir("torch-two-epochs");
  std::string g = train_graph(torch_data("train.h5"),
                              kSmallCnn + ", loss: {type: torch.batch_hard_triplet, margin: 0.2}, "
                                          "optimizer: {type: torch.adam, lr: 0.002}, epochs: 2, log_every: 1, threads: 2, "
                                          "log_dir: " + (dir / "log").string(),
                              "  show:  {type: core.sink, params: {mode: print}}\n"
                              "  pick:  {type: core.select, params: {fields: [source, step, loss]}}\n"
                              "  snap:  {type: core.sink, params: {mode: print}}\n",
                              "  - train.metrics -> show.in\n  - train.model -> pick.in\n  - pick.out -> snap.in\n");
  auto r = run_graph("train.yaml", g);
  INFO(r.out << r.message());
  REQUIRE(r.exit_code == 0);
  auto rows = read_metrics(dir / "log" / "metrics.csv");
  REQUIRE(rows.size() == 16);  // 512 images / 64 per batch * 2 epochs
  double first = 0, second = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    CHECK(rows[i].step == std::to_string(i + 1));
    CHECK(rows[i].epoch == (i < 8 ? "0" : "1"));
    (i < 8 ? first : second) += std::stod(rows[i].loss);
  }
  INFO("mean loss epoch 0: " << first / 8 << ", epoch 1: " << second / 8);
  CHECK(second < 0.85 * first);
  // The final snapshot names its trainer and carries the mean loss of its epoch (the second):
  // what core.keep_best compares when it keeps the best of several restarts.
  const std::string snapshot = "{source: [\"train\"], step: [16], loss: [";
  const std::size_t at = r.out.find(snapshot);
  REQUIRE(at != std::string::npos);
  const double snapshot_loss = std::stod(r.out.substr(at + snapshot.size()));
  CHECK(std::abs(snapshot_loss - second / 8) < 1e-4 * second / 8);
  // The metrics stream carries the same rows; the JSON lines and the PNG exist.
  std::size_t printed = 0;
  for (std::size_t p = r.out.find("samples_per_s"); p != std::string::npos; p = r.out.find("samples_per_s", p + 1)) ++printed;
  CHECK(printed == 16);
  std::ifstream jsonl(dir / "log" / "metrics.jsonl");
  std::string line;
  std::size_t lines = 0;
  while (std::getline(jsonl, line)) lines += line.rfind("{\"step\": ", 0) == 0;
  CHECK(lines == 16);
  std::ifstream png(dir / "log" / "loss.png", std::ios::binary);
  char magic[4] = {};
  png.read(magic, 4);
  CHECK(std::string(magic + 1, 3) == "PNG");
}

TEST_CASE("a resumed run repeats the uninterrupted run's losses exactly", "[torch][train]") {
  fs::path dir = scratch_dir("torch-resume");
  auto graph = [&](const std::string& run, int max_steps) {
    return train_graph(torch_data("train.h5"),
                       kSmallCnn + ", loss: {type: torch.all_pairs_contrastive, mu: 0.5, margin: 1.0}, "
                                   "optimizer: {type: torch.sgd, lr: 0.05, momentum: 0.9, nesterov: true, weight_decay: 0.0001}, "
                                   "schedule: {type: torch.warmup, steps: 3, then: {type: torch.cosine, steps: 13}}, "
                                   "epochs: 2, log_every: 1, threads: 2, checkpoint_every: 5, keep_checkpoints: 0, resume: auto, "
                                   "max_steps: " + std::to_string(max_steps) + ", log_dir: " + (dir / run).string() +
                                   ", checkpoint_dir: " + (dir / run / "ckpt").string(),
                       "  pick:  {type: core.select, params: {fields: [step, loss]}}\n"
                       "  snap:  {type: core.sink, params: {mode: print}}\n",
                       "  - train.model -> pick.in\n  - pick.out -> snap.in\n");
  };
  auto full = run_graph_ok("full.yaml", graph("full", 0));
  // Interrupted after 12 steps (checkpoints at 5, 10 and 12), then resumed from step 12: the
  // resumed part crosses from the streamed first epoch into the replayed second.
  auto part = run_graph_ok("part.yaml", graph("part", 12));
  CHECK(fs::exists(dir / "part" / "ckpt" / "step-00000010.pt"));
  CHECK(fs::exists(dir / "part" / "ckpt" / "step-00000012.pt"));
  // A copy whose newest checkpoint was cut short (a full disk): resume: auto takes step 10 with a
  // warning naming the damaged file, and the result is still the uninterrupted run's.
  fs::copy(dir / "part", dir / "cut", fs::copy_options::recursive);
  const fs::path cut = dir / "cut" / "ckpt" / "step-00000012.pt";
  fs::resize_file(cut, fs::file_size(cut) / 2);
  auto resumed = run_graph_ok("resumed.yaml", graph("part", 0));
  auto a = read_metrics(dir / "full" / "metrics.csv"), b = read_metrics(dir / "part" / "metrics.csv");
  REQUIRE(a.size() == 16);
  REQUIRE(b.size() == 16);
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO("row " << i);
    CHECK(a[i].step == b[i].step);
    CHECK(a[i].epoch == b[i].epoch);
    CHECK(a[i].loss == b[i].loss);  // printed with 9 significant digits: bitwise-equal floats
    CHECK(a[i].lr == b[i].lr);
  }
  // The final snapshot's epoch loss covers steps 9-16, four of them trained before the resume.
  CHECK_THAT(full.out, Catch::Contains("{step: [16], loss: ["));
  CHECK(resumed.out == full.out);
  // Not --quiet: the info line says where the run resumed.
  auto cut_resumed = run_graph("cut.yaml", graph("cut", 0));
  INFO(cut_resumed.message());
  REQUIRE(cut_resumed.exit_code == 0);
  CHECK_THAT(cut_resumed.message(), Catch::Contains("resume: auto skips the damaged checkpoint " + cut.string()));
  CHECK_THAT(cut_resumed.message(), Catch::Contains("at step 10"));
  CHECK(cut_resumed.out == full.out);
  auto c = read_metrics(dir / "cut" / "metrics.csv");
  REQUIRE(c.size() == 16);
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i].loss == c[i].loss);
  // The lr follows the warmup then the cosine: 0, 1/3 and 2/3 of the base lr, then 0.05.
  CHECK(std::stod(a[0].lr) == Approx(0.0));
  CHECK(std::stod(a[1].lr) == Approx(0.05 / 3));
  CHECK(std::stod(a[3].lr) == Approx(0.05));
  CHECK(std::stod(a[15].lr) < 0.05 * 0.1);
}

TEST_CASE("a 100-epoch reader into a 10-step trainer stops when the trainer does; a branch still listening gets its "
          "records", "[torch][train][cli]") {
  const fs::path dir = scratch_dir("torch-early-stop");
  // 100 epochs of 8 batches. The trainer stops consuming at step 10; the limit at 300 batches.
  // The reader runs on for the limit, then stops: at most max_in_flight (64) batches, the one in
  // the trainer's prefetch queue and the one being read past the limit's 300, not 800.
  auto graph = [&](const std::string& out, const std::string& nodes, const std::string& edges) {
    return "# early stop\nseed: 3\nvars: {out: " + out + "}\nnodes:\n"
           "  data:  {type: io.hdf5_reader, params: {path: " + torch_data("train.h5") +
           ", fields: [id, label, image], batch_size: 64, shuffle: true, epochs: 100}}\n"
           "  train: {type: torch.train, params: {" + kSmallCnn +
           ", loss: {type: torch.all_pairs_contrastive, mu: 0.5, margin: 1.0}, "
           "optimizer: {type: torch.sgd, lr: 0.05}, max_steps: 10, threads: 1}}\n" + nodes +
           "edges: [data.out -> train.in" + edges + "]\n";
  };
  write_file(dir / "g.yaml", graph("out/early",
                                   "  first: {type: core.limit, params: {count: 300}}\n"
                                   "  seen:  {type: core.sink, params: {expect: 300}}\n",
                                   ", data.out -> first.in, first.out -> seen.in"));
  auto r = run_cli_in(dir, {"run", "g.yaml", "--no-report"}, plugin_dir());
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("data: every consumer is done: stopping after"));
  // run.json's nodes, read with Python's json module.
  auto nodes = run_python(R"PY(
import json, sys
r = json.load(open(sys.argv[1]))
for n in r['nodes']:
    print(n['id'], n['records_in'], n['records_out'], n['stopped_early'])
print('seconds', r['seconds'], file=sys.stderr)
)PY",
                          {(dir / "out/early/run.json").string()});
  INFO(nodes.out << nodes.err);
  REQUIRE(nodes.exit_code == 0);
  std::map<std::string, std::vector<std::string>> by_id;
  std::istringstream lines(nodes.out);
  for (std::string id, a, b, c; lines >> id >> a >> b >> c;) by_id[id] = {a, b, c};
  REQUIRE(by_id.count("data"));
  const long made = std::stol(by_id["data"][1]);
  CHECK(made >= 300);
  CHECK(made <= 300 + 64 + 2);
  CHECK(by_id["data"][2] == "True");
  CHECK(by_id["seen"][0] == "300");
  CHECK(by_id["train"][2] == "False");
  CHECK(std::stol(by_id["train"][0]) < 300);  // batches past step 10 were not sent to it
  CHECK_THAT(r.err, Catch::Contains("trained 10 steps"));

  // Without the branch, the reader stops right after the trainer's 10th step.
  write_file(dir / "alone.yaml", graph("out/alone", "", ""));
  auto alone = run_cli_in(dir, {"run", "alone.yaml", "--no-report"}, plugin_dir());
  INFO(alone.err);
  REQUIRE(alone.exit_code == 0);
  auto counts = run_python("import json, sys\nprint(*[n['records_out'] for n in json.load(open(sys.argv[1]))['nodes'] "
                           "if n['id'] == 'data'])",
                           {(dir / "out/alone/run.json").string()});
  REQUIRE(counts.exit_code == 0);
  CHECK(std::stol(counts.out) <= 10 + 64 + 2);
}

TEST_CASE("two data-parallel ranks over Gloo take the steps of one process on the whole batch", "[torch][train][cli]") {
  fs::path dir = scratch_dir("torch-data-parallel");
  // A per-pair loss and no batch norm: the ranks' weighted slice means are the batch mean exactly.
  // sharded: core.shard gives each rank its rows before the trainer (which then slices nothing).
  auto graph = [&](const std::string& run, bool sharded = false) {
    return "# data parallel\nseed: 3\nnodes:\n"
           "  data:  {type: io.hdf5_reader, params: {path: " + torch_data("pairs.h5") + ", batch_size: 64}}\n" +
           (sharded ? "  shard: {type: core.shard}\n" : "") +
           "  train: {type: torch.train, params: {model: {type: torch.mlp, hidden: [32], embedding_dim: 8}, "
           "loss: {type: torch.contrastive, margin: 1.0}, optimizer: {type: torch.sgd, lr: 0.05, momentum: 0.9}, epochs: 2, "
           "log_every: 1, threads: 1, log_dir: " + (dir / run).string() + ", checkpoint_dir: " + (dir / run / "ckpt").string() + "}}\n" +
           (sharded ? "edges: [data.out -> shard.in, shard.out -> train.in]\n" : "edges: [data.out -> train.in]\n");
  };
  write_file(dir / "single.yaml", graph("single"));
  write_file(dir / "dp.yaml", graph("dp"));
  write_file(dir / "dp1.yaml", graph("dp1"));
  write_file(dir / "sharded.yaml", graph("sharded", true));
  write_file(dir / "sharded1.yaml", graph("sharded1", true));
  // world_size 1 (the default) is one process whatever RANK says.
  auto single = run_cli({"run", (dir / "single.yaml").string(), "--quiet"}, {"RANK=3"});
  INFO(single.err);
  REQUIRE(single.exit_code == 0);
  const std::string store = "file://" + (dir / "store").string();
  auto rank1 = embedflow::test::spawn_cli({"run", (dir / "dp1.yaml").string(), "--quiet", "--set", "train.world_size=2",
                                           "--set", "train.rank=1", "--set", "train.rendezvous=" + store});
  // Rank 0 takes its rank and world size from the environment, as under torchrun.
  auto rank0 = run_cli({"run", (dir / "dp.yaml").string(), "--set", "train.world_size=0", "--set", "train.rendezvous=" + store},
                       {"RANK=0", "WORLD_SIZE=2"});
  auto one = embedflow::test::wait_child(rank1);
  INFO(rank0.err << one.err);
  REQUIRE(rank0.exit_code == 0);
  REQUIRE(one.exit_code == 0);
  CHECK_THAT(rank0.err, Catch::Contains("rank 0 of 2 joined the Gloo group at " + store));
  auto a = read_metrics(dir / "single" / "metrics.csv"), b = read_metrics(dir / "dp" / "metrics.csv");
  REQUIRE(a.size() == 16);
  REQUIRE(b.size() == 16);
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO("step " << a[i].step << ": " << a[i].loss << " vs " << b[i].loss);
    CHECK(std::abs(std::stod(a[i].loss) - std::stod(b[i].loss)) <= 1e-5 * std::stod(a[i].loss));
  }
  // Rank 0 alone writes files; its final checkpoint embeds as the single process's does.
  CHECK(!fs::exists(dir / "dp1"));

  // With core.shard upstream (both taking RANK and WORLD_SIZE from the environment) each rank
  // reads only its rows, and the steps are the unsharded ranks' steps.
  const std::string store2 = "file://" + (dir / "store2").string();
  auto shard1 = embedflow::test::spawn_cli({"run", (dir / "sharded1.yaml").string(), "--quiet", "--set", "train.world_size=0",
                                            "--set", "train.rendezvous=" + store2}, {"RANK=1", "WORLD_SIZE=2"});
  auto shard0 = run_cli({"run", (dir / "sharded.yaml").string(), "--quiet", "--set", "train.world_size=0",
                         "--set", "train.rendezvous=" + store2}, {"RANK=0", "WORLD_SIZE=2"});
  auto shard_one = embedflow::test::wait_child(shard1);
  INFO(shard0.err << shard_one.err);
  REQUIRE(shard0.exit_code == 0);
  REQUIRE(shard_one.exit_code == 0);
  auto c = read_metrics(dir / "sharded" / "metrics.csv");
  REQUIRE(c.size() == 16);
  for (std::size_t i = 0; i < b.size(); ++i) {
    INFO("step " << b[i].step << ": " << b[i].loss << " vs " << c[i].loss);
    CHECK(c[i].loss == b[i].loss);
  }
  // A shard for two ranks in front of a trainer that runs alone is a located error.
  auto mismatch = run_cli({"run", (dir / "sharded.yaml").string(), "--quiet", "--set", "shard.world_size=2", "--set", "shard.rank=0"});
  CHECK(mismatch.exit_code == 1);
  CHECK_THAT(mismatch.err, Catch::Contains("input batch 0 was sharded upstream from 64 rows, but the 1 rank(s) of this "
                                           "training hold 32: give the sharding node"));
  check_same_embeddings(embed_test_images(dir, "single"), embed_test_images(dir, "dp"), 1e-4);

  // A rank outside the world is a configuration error naming both numbers.
  auto bad = run_cli({"run", (dir / "dp.yaml").string(), "--quiet", "--set", "train.world_size=2", "--set", "train.rank=2"});
  CHECK(bad.exit_code != 0);
  CHECK_THAT(bad.err, Catch::Contains("rank 2 is outside [0, 2)"));
  auto scheme = run_cli({"run", (dir / "dp.yaml").string(), "--quiet", "--set", "train.world_size=2", "--set", "train.rank=0",
                         "--set", "train.rendezvous=ftp://host/x"});
  CHECK(scheme.exit_code != 0);
  CHECK_THAT(scheme.err, Catch::Contains("rendezvous 'ftp://host/x' is neither tcp://HOST:PORT nor file://PATH"));
  auto no_port = run_cli({"run", (dir / "dp.yaml").string(), "--quiet", "--set", "train.world_size=2", "--set", "train.rank=0",
                          "--set", "train.rendezvous=tcp://127.0.0.1"});
  CHECK(no_port.exit_code != 0);
  CHECK_THAT(no_port.err, Catch::Contains("rendezvous 'tcp://127.0.0.1' needs a port: tcp://HOST:PORT"));
  // A rank whose partners never come stops after rendezvous_timeout, saying where it waited.
  const std::string lonely = "file://" + (dir / "lonely").string();
  auto alone = run_cli({"run", (dir / "dp.yaml").string(), "--quiet", "--set", "train.world_size=2", "--set", "train.rank=0",
                        "--set", "train.rendezvous=" + lonely, "--set", "train.rendezvous_timeout=1"});
  CHECK(alone.exit_code == 1);
  CHECK_THAT(alone.err, Catch::Contains("node 'train'") &&
                            Catch::Contains("joining the data-parallel group at " + lonely + " as rank 0 of 2 failed"));
}

TEST_CASE("data parallel: gradients reduced in buckets during backward equal one reduction after it", "[torch][train][cli]") {
  fs::path dir = scratch_dir("torch-buckets");
  // Batch norm and a three-layer head: parameters of several sizes, state re-sent from rank 0,
  // and a per-pair loss. bucket_mb 0.001 (1 KiB) splits the model's gradients into four
  // buckets, each all-reduced while backward still runs; bucket_mb 0 reduces them in one piece.
  auto graph = [&](const std::string& run, double bucket_mb) {
    return "# buckets\nseed: 3\nnodes:\n"
           "  data:  {type: io.hdf5_reader, params: {path: " + torch_data("pairs.h5") + ", batch_size: 64, shuffle: true}}\n"
           "  train: {type: torch.train, params: {model: {type: torch.small_cnn, channels: [8, 16], hidden: 32, embedding_dim: 8}, "
           "loss: {type: torch.contrastive, margin: 1.0}, optimizer: {type: torch.adam, lr: 0.01}, epochs: 2, "
           "log_every: 1, threads: 1, world_size: 2, bucket_mb: " + std::to_string(bucket_mb) + ", "
           "log_dir: " + (dir / run).string() + ", checkpoint_dir: " + (dir / run / "ckpt").string() + "}}\n"
           "edges: [data.out -> train.in]\n";
  };
  // Two ranks on this machine: a FileStore to meet, then Gloo's TCP pairs through the local stack.
  auto two_ranks = [&](const std::string& run, double bucket_mb) {
    write_file(dir / (run + ".yaml"), graph(run, bucket_mb));
    write_file(dir / (run + "1.yaml"), graph(run + "1", bucket_mb));
    const std::string store = "file://" + (dir / (run + "-store")).string();
    auto rank1 = embedflow::test::spawn_cli({"run", (dir / (run + "1.yaml")).string(), "--quiet", "--set", "train.rank=1",
                                             "--set", "train.rendezvous=" + store});
    auto rank0 = run_cli({"run", (dir / (run + ".yaml")).string(), "--set", "train.rank=0", "--set", "train.rendezvous=" + store});
    auto one = embedflow::test::wait_child(rank1);
    INFO(rank0.err << one.err);
    REQUIRE(rank0.exit_code == 0);
    REQUIRE(one.exit_code == 0);
    return rank0.err;
  };
  const std::string bucketed = two_ranks("bucketed", 0.001), whole = two_ranks("whole", 0);
  CHECK_THAT(bucketed, Catch::Contains("gradients all-reduced in 4 bucket(s) while the backward pass runs"));
  CHECK_THAT(whole, Catch::Contains("gradients all-reduced in one piece after the backward pass"));
  auto a = read_metrics(dir / "bucketed" / "metrics.csv"), b = read_metrics(dir / "whole" / "metrics.csv");
  REQUIRE(a.size() == 16);
  REQUIRE(b.size() == 16);
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO("step " << a[i].step << ": " << a[i].loss << " vs " << b[i].loss);
    CHECK(std::abs(std::stod(a[i].loss) - std::stod(b[i].loss)) <= 1e-6 * std::stod(b[i].loss));
  }
  // After 16 Adam steps rank 0's final checkpoint embeds the test images as the unbucketed one's.
  check_same_embeddings(embed_test_images(dir, "bucketed"), embed_test_images(dir, "whole"), 1e-5);
}

// h5py reads both files' embeddings; their largest difference relative to the largest value.
static double relative_embedding_difference(const std::string& a, const std::string& b) {
  const Result r = run_python(R"PY(
import sys, h5py, numpy as np
a, b = (h5py.File(p)['embeddings']['embedding'][:] for p in sys.argv[1:3])
assert a.shape == b.shape == (128, 8), (a.shape, b.shape)
print(np.abs(a - b).max() / np.abs(a).max())
)PY",
                              {a, b});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  return std::stod(r.out);
}

TEST_CASE("cross-rank mining: two ranks that gather embeddings train as one process on the global batch",
          "[torch][train][cli][gather]") {
  fs::path dir = scratch_dir("torch-gather");
  // Losses whose every anchor looks at the whole batch (hardest positive and negative, semi-hard
  // negatives, multi-similarity's weights, a multi-similarity miner's pairs): on a slice they see a different batch, gathered they see the
  // global one. An MLP (no batch norm) so that a slice's forward pass is the whole batch's rows;
  // batches of 63 rows, so the ranks hold 32 and 31 and the gather pads the shorter slice.
  auto graph = [&](const std::string& run, const std::string& loss) {
    return "# cross-rank mining\nseed: 3\nnodes:\n"
           "  data:  {type: io.hdf5_reader, params: {path: " + torch_data("train.h5") + ", fields: [label, image], batch_size: 63}}\n"
           "  train: {type: torch.train, params: {model: {type: torch.mlp, hidden: [32], embedding_dim: 8}, "
           "loss: " + loss + ", optimizer: {type: torch.sgd, lr: 0.05, momentum: 0.9}, max_steps: 6, "
           "log_every: 1, threads: 1, log_dir: " + (dir / run).string() + ", checkpoint_dir: " + (dir / run / "ckpt").string() + "}}\n"
           "edges: [data.out -> train.in]\n";
  };
  auto two_ranks = [&](const std::string& run, const std::string& loss, const std::string& gather) {
    write_file(dir / (run + ".yaml"), graph(run, loss));
    write_file(dir / (run + "1.yaml"), graph(run + "1", loss));
    const std::string store = "file://" + (dir / (run + "-store")).string();
    const std::vector<std::string> sets{"--set", "train.world_size=2", "--set", "train.rendezvous=" + store,
                                        "--set", "train.gather_embeddings=" + gather};
    std::vector<std::string> args1{"run", (dir / (run + "1.yaml")).string(), "--quiet", "--set", "train.rank=1"};
    std::vector<std::string> args0{"run", (dir / (run + ".yaml")).string(), "--quiet", "--set", "train.rank=0"};
    args1.insert(args1.end(), sets.begin(), sets.end());
    args0.insert(args0.end(), sets.begin(), sets.end());
    auto rank1 = embedflow::test::spawn_cli(args1);
    auto rank0 = run_cli(args0);
    auto one = embedflow::test::wait_child(rank1);
    INFO(rank0.err << one.err);
    REQUIRE(rank0.exit_code == 0);
    REQUIRE(one.exit_code == 0);
  };
  const std::vector<std::pair<std::string, std::string>> losses{
      {"batch_hard", "{type: torch.batch_hard_triplet, margin: 0.2}"},
      {"semi_hard", "{type: torch.semi_hard_triplet, margin: 0.2}"},
      {"multi_similarity", "{type: torch.multi_similarity}"},
      {"mined_contrastive", "{type: torch.batch_contrastive, miner: {type: torch.multi_similarity_miner, epsilon: 0.1}}"}};
  for (const auto& [name, loss] : losses) {
    SECTION(name) {
      write_file(dir / (name + "-single.yaml"), graph(name + "-single", loss));
      auto single = run_cli({"run", (dir / (name + "-single.yaml")).string(), "--quiet"});
      INFO(single.err);
      REQUIRE(single.exit_code == 0);
      two_ranks(name + "-on", loss, "auto");  // auto: on for a label batch with two ranks
      two_ranks(name + "-off", loss, "off");
      auto a = read_metrics(dir / (name + "-single") / "metrics.csv"), b = read_metrics(dir / (name + "-on") / "metrics.csv"),
           c = read_metrics(dir / (name + "-off") / "metrics.csv");
      REQUIRE(a.size() == 6);
      REQUIRE(b.size() == 6);
      REQUIRE(c.size() == 6);
      double off_gap = 0;
      for (std::size_t i = 0; i < a.size(); ++i) {
        // The logged loss is the global batch's, as the one process's.
        INFO("step " << a[i].step << ": " << a[i].loss << " vs gathered " << b[i].loss << ", sliced " << c[i].loss);
        CHECK(std::abs(std::stod(a[i].loss) - std::stod(b[i].loss)) <= 1e-4 * std::max(1.0, std::stod(a[i].loss)));
        off_gap = std::max(off_gap, std::abs(std::stod(a[i].loss) - std::stod(c[i].loss)));
      }
      // Without gathering each rank mines its own slice: other losses, other weights.
      CHECK(off_gap > 1e-3);
      const std::string e_single = embed_test_images(dir, name + "-single");
      const double on = relative_embedding_difference(e_single, embed_test_images(dir, name + "-on"));
      const double off = relative_embedding_difference(e_single, embed_test_images(dir, name + "-off"));
      INFO("final embeddings relative to one process: gathered " << on << ", sliced " << off);
      CHECK(on < 1e-4);
      CHECK(off > 1e-3);
    }
  }
}

TEST_CASE("cross-rank mining: gather_embeddings on with a batch it cannot gather names the batch", "[torch][train][cli][gather]") {
  fs::path dir = scratch_dir("torch-gather-on");
  // Images without labels (an autoencoder's batch): auto trains each rank on its slice, on stops.
  auto graph = [&](const std::string& run) {
    return "# gather on\nseed: 3\nnodes:\n"
           "  data:  {type: io.hdf5_reader, params: {path: " + torch_data("train.h5") + ", fields: [image], batch_size: 64}}\n"
           "  train: {type: torch.train, params: {model: {type: torch.conv_ae, channels: [8, 16], latent_dim: 8}, "
           "loss: {type: torch.reconstruction}, optimizer: {type: torch.adam, lr: 0.01}, max_steps: 2, threads: 1, "
           "world_size: 2, log_dir: " + (dir / run).string() + "}}\n"
           "edges: [data.out -> train.in]\n";
  };
  auto two_ranks = [&](const std::string& run, const std::string& gather) {
    write_file(dir / (run + ".yaml"), graph(run));
    write_file(dir / (run + "1.yaml"), graph(run + "1"));
    const std::string store = "file://" + (dir / (run + "-store")).string();
    auto rank1 = embedflow::test::spawn_cli({"run", (dir / (run + "1.yaml")).string(), "--quiet", "--set", "train.rank=1",
                                             "--set", "train.rendezvous=" + store, "--set", "train.gather_embeddings=" + gather,
                                             "--set", "train.rendezvous_timeout=20"});
    auto rank0 = run_cli({"run", (dir / (run + ".yaml")).string(), "--quiet", "--set", "train.rank=0", "--set",
                          "train.rendezvous=" + store, "--set", "train.gather_embeddings=" + gather, "--set",
                          "train.rendezvous_timeout=20"});
    auto one = embedflow::test::wait_child(rank1);
    return std::make_pair(rank0, one);
  };
  auto [auto0, auto1] = two_ranks("auto", "auto");
  INFO(auto0.err << auto1.err);
  CHECK(auto0.exit_code == 0);
  CHECK(auto1.exit_code == 0);
  auto [on0, on1] = two_ranks("on", "on");
  INFO(on0.err);
  CHECK(on0.exit_code == 1);
  CHECK_THAT(on0.err, Catch::Contains("node 'train'") &&
                          Catch::Contains("gather_embeddings: on needs a label batch (image, label) or a pair batch") &&
                          Catch::Contains("but input batch 0 is"));
}

TEST_CASE("prefetch trains on the same batches in the same order with the same draws", "[torch][train]") {
  fs::path dir = scratch_dir("torch-prefetch");
  // A shuffled reader, two epochs (the second replayed in a seeded order), semi-supervised label
  // masking by id and an lr schedule: every draw and every batch's place shows in the losses.
  auto graph = [&](const std::string& run, int prefetch) {
    return train_graph(torch_data("train.h5"),
                       kSmallCnn + ", loss: {type: torch.batch_hard_triplet, margin: 0.2}, "
                                   "optimizer: {type: torch.adam, lr: 0.002}, schedule: {type: torch.cosine, steps: 16}, "
                                   "epochs: 2, labelled_fraction: 0.7, log_every: 1, threads: 2, snapshot_every: 5, "
                                   "prefetch: " + std::to_string(prefetch) + ", log_dir: " + (dir / run).string(),
                       "  pick:  {type: core.select, params: {fields: [step, loss]}}\n"
                       "  snap:  {type: core.sink, params: {mode: print}}\n",
                       "  - train.model -> pick.in\n  - pick.out -> snap.in\n");
  };
  auto plain = run_graph_ok("plain.yaml", graph("plain", 0));
  auto ahead = run_graph_ok("ahead.yaml", graph("ahead", 3));
  auto a = read_metrics(dir / "plain" / "metrics.csv"), b = read_metrics(dir / "ahead" / "metrics.csv");
  REQUIRE(a.size() == 16);
  REQUIRE(b.size() == 16);
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO("row " << i);
    CHECK(a[i].step == b[i].step);
    CHECK(a[i].epoch == b[i].epoch);
    CHECK(a[i].loss == b[i].loss);  // 9 significant digits: the same floats
  }
  // The snapshots (steps 5, 10, 15 and the end) go out in order with the same epoch losses.
  CHECK_THAT(plain.out, Catch::Contains("{step: [15], loss: ["));
  CHECK(ahead.out == plain.out);
  // A failing step on the training thread stops the run with the trainer's located error.
  auto nan = run_graph("nan.yaml",
                     train_graph(torch_data("nan.h5"), kSmallCnn + ", loss: {type: torch.batch_hard_triplet}, threads: 1, prefetch: 2"));
  CHECK(nan.exit_code == 1);
  CHECK_THAT(nan.message(), Catch::Contains("node 'train'") && Catch::Contains("loss is NaN at step"));
}

TEST_CASE("channels-last kernels train as contiguous ones do, and auto avoids oneDNN's narrow 1x1 failure",
          "[torch][train]") {
  fs::path dir = scratch_dir("torch-memory-format");
  auto graph = [&](const std::string& run, const std::string& model) {
    // A loss without mining: a hardest example picked differently would change the steps.
    return train_graph(torch_data("train.h5"), model + ", loss: {type: torch.all_pairs_contrastive}, "
                                                       "optimizer: {type: torch.adam, lr: 0.001}, epochs: 1, log_every: 1, "
                                                       "threads: 2, log_dir: " + (dir / run).string() +
                                                       ", checkpoint_dir: " + (dir / run / "ckpt").string());
  };
  const std::string cnn = "model: {type: torch.small_cnn, channels: [8, 16], hidden: 32, embedding_dim: 8, memory_format: ";
  const ScopedLogLevel verbose(embedflow::LogLevel::debug);
  auto last = run_graph("last.yaml", graph("last", cnn + "auto}"));
  auto plain = run_graph("plain.yaml", graph("plain", cnn + "contiguous}"));
  INFO(last.message() << plain.message());
  REQUIRE(last.exit_code == 0);
  REQUIRE(plain.exit_code == 0);
  CHECK_THAT(last.message(), Catch::Contains("trainable parameters on cpu, channels-last ("));
  CHECK_THAT(plain.message(), !Catch::Contains("channels-last"));
  auto a = read_metrics(dir / "last" / "metrics.csv"), b = read_metrics(dir / "plain" / "metrics.csv");
  REQUIRE(a.size() == 8);
  REQUIRE(b.size() == 8);
  // Other kernels sum in another order: the first step's loss (the same weights) agrees to float
  // rounding; Adam's sign-like early updates let the differences grow a little over the steps.
  CHECK(std::abs(std::stod(a[0].loss) - std::stod(b[0].loss)) <= 1e-6 * std::stod(b[0].loss));
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO("step " << a[i].step << ": " << a[i].loss << " vs " << b[i].loss);
    CHECK(std::abs(std::stod(a[i].loss) - std::stod(b[i].loss)) <= 1e-3 * std::stod(b[i].loss));
  }
  // One checkpoint loads into either layout and embeds the same.
  auto embed_as = [&](const std::string& format) {
    const std::string h5 = (dir / (format + ".h5")).string();
    run_graph_ok(format + "_embed.yaml",
                 "# embed\nseed: 1\nnodes:\n"
                 "  test:  {type: io.hdf5_reader, params: {path: " + torch_data("test.h5") + ", batch_size: 128}}\n"
                 "  embed: {type: torch.embed, params: {" + cnn + format + ", weights: " +
                     (dir / "last" / "ckpt" / "step-00000008.pt").string() + "}}}\n"
                 "  save:  {type: io.hdf5_writer, params: {path: " + h5 + ", group: embeddings}}\n"
                 "edges: [test.out -> embed.in, embed.out -> save.in]\n");
    return h5;
  };
  check_same_embeddings(embed_as("channels_last"), embed_as("contiguous"), 1e-5);

  // A ResNet-18 of width 4 has 1x1 stride-2 shortcuts over 4 and 8 channels: auto keeps it
  // contiguous, and it trains.
  auto narrow = run_graph("narrow.yaml", graph("narrow", "model: {type: torch.resnet18, in_channels: 1, width: 4, stem: small, "
                                                         "embedding_dim: 8}"));
  INFO(narrow.message());
  REQUIRE(narrow.exit_code == 0);
  CHECK_THAT(narrow.message(), Catch::Contains("trainable parameters on cpu (") && !Catch::Contains("on cpu, channels-last") &&
                             Catch::Contains("is a 1x1 kernel over 4 channels"));
}

TEST_CASE("a NaN loss stops the run naming the step and the batch", "[torch][train]") {
  fs::path dir = scratch_dir("torch-nan");
  std::string g = "# NaN in the data.\nseed: 1\nnodes:\n"
                  "  data:  {type: io.hdf5_reader, params: {path: " + torch_data("nan.h5") + ", batch_size: 64}}\n"
                  "  train: {type: torch.train, params: {" + kSmallCnn +
                  ", loss: {type: torch.batch_hard_triplet}, threads: 1, checkpoint_dir: " + (dir / "ckpt").string() +
                  ", checkpoint_every: 1}}\n"
                  "edges: [data.out -> train.in]\n";
  auto r = run_graph("nan.yaml", g);
  INFO(r.message());
  CHECK(r.exit_code == 1);
  // Row 200 sits in the fourth batch of 64 (input batch 3, ids 192..255), trained as step 4.
  CHECK_THAT(r.message(), Catch::Contains("node 'train'") && Catch::Contains("loss is NaN at step 4") &&
                        Catch::Contains("input batch 3") && Catch::Contains("id 192..255") &&
                        Catch::Contains("last checkpoint: step 3"));
}

TEST_CASE("images that do not fit the model fail validation at the model parameter", "[torch][train]") {
  fs::path dir = scratch_dir("torch-bad-images");
  auto r = run_graph("rgb_model.yaml",
                     train_graph(torch_data("train.h5"), "model: {type: torch.small_cnn, in_channels: 3}, "
                                                      "loss: {type: torch.batch_hard_triplet}, threads: 1"));
  INFO(r.message());
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.message(), Catch::Contains("rgb_model.yaml:5:") && Catch::Contains("node 'train': param 'model': torch.small_cnn reads in: "
                                                                        "field 'image' dim 1: expects 3, upstream gives 1"));
}

TEST_CASE("component contracts: a trained model's size reaches its evaluator before any data flows", "[torch][validate]") {
  fs::path dir = scratch_dir("torch-contracts");
  // A 32-d trained model's embeddings against a pixel gallery (torch.identity: 1 x 28 x 28 = 784).
  auto graph = [&](const std::string& gallery_model, const std::string& loss = "{type: torch.batch_hard_triplet}") {
    return train_graph(torch_data("train.h5"),
                       "model: {type: torch.small_cnn, channels: [8], hidden: 0, embedding_dim: 32}, loss: " + loss +
                           ", max_steps: 2, threads: 1",
                       "  test:  {type: io.hdf5_reader, params: {path: " + torch_data("test.h5") + ", batch_size: 64}}\n"
                       "  query: {type: torch.embed, params: {keep: [label]}}\n"
                       "  pixels: {type: torch.embed, params: {model: " + gallery_model + ", keep: [label]}}\n"
                       "  eval:  {type: eval.retrieval, params: {out: " + (dir / "r").string() + "}}\n",
                       "  - train.model -> query.model\n  - test -> query.in\n  - test -> pixels.in\n"
                       "  - query -> eval.query\n  - pixels -> eval.gallery\n");
  };
  auto r = validate_graph("mismatch.yaml", graph("{type: torch.identity}"));
  INFO(r.message());
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.problem_text(), Catch::Contains("node 'eval': input 'gallery': field 'embedding' dim D: is 784 here but 32"));
  CHECK(r.problems.size() == 1);
  // The same size on both sides validates; a composite's size is the sum of its parts' (16 + 16).
  CHECK(validate_graph("same.yaml", graph("{type: torch.small_cnn, embedding_dim: 32}")).exit_code == 0);
  CHECK(validate_graph("concat.yaml", graph("{type: torch.concat, mode: both, backbone: {type: torch.small_cnn, embedding_dim: 16}, "
                                            "branch: {type: torch.mlp, embedding_dim: 16}}"))
            .exit_code == 0);
  auto c = validate_graph("concat_bad.yaml", graph("{type: torch.concat, mode: both, backbone: {type: torch.small_cnn, embedding_dim: 16}, "
                                                   "branch: {type: torch.mlp, embedding_dim: 8}}"));
  CHECK(c.exit_code == 2);
  CHECK_THAT(c.problem_text(), Catch::Contains("dim D: is 24 here but 32"));
  // A loss that reads model outputs this model does not give, and fields the batch lacks.
  auto kl = validate_graph("kl.yaml", graph("{type: torch.identity}", "{type: torch.sum, a: {type: torch.contrastive}, b: {type: torch.kl_divergence}}"));
  CHECK(kl.exit_code == 2);
  CHECK_THAT(kl.problem_text(), Catch::Contains("param 'loss': torch.sum param 'a' (torch.contrastive) reads batch: needs field 'a_image'"));
  CHECK_THAT(kl.problem_text(), Catch::Contains("param 'loss': torch.sum param 'b' (torch.kl_divergence) reads outputs: needs field 'mu'"));
  // torch.embed's named outputs must be outputs of its model.
  auto o = validate_graph("outputs.yaml",
                          "nodes:\n"
                          "  test: {type: io.hdf5_reader, params: {path: " + torch_data("test.h5") + ", batch_size: 64}}\n"
                          "  embed: {type: torch.embed, params: {model: {type: torch.conv_ae}, outputs: [reconstruction, logvar]}}\n"
                          "  show: {type: core.sink}\n"
                          "edges: [test -> embed.in, embed -> show]\n");
  CHECK(o.exit_code == 2);
  CHECK_THAT(o.problem_text(), Catch::Contains("outputs names 'logvar', which the model does not produce (it gives embedding, mu, latent, "
                                               "reconstruction)"));
  CHECK(o.problems.size() == 1);
}

TEST_CASE("TorchScript import: same embeddings as Python; freeze keeps the weights", "[torch][torchscript]") {
  fs::path dir = scratch_dir("torch-script");
  const std::string pt = (dir / "backbone.pt").string();
  // A small backbone with batch norm (whose statistics a frozen model must not update).
  auto made = run_python(R"PY(
import sys, torch, h5py, numpy as np
torch.manual_seed(0)
class Backbone(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3, stride=2)
        self.bn = torch.nn.BatchNorm2d(4)
        self.fc = torch.nn.Linear(4 * 13 * 13, 8)
    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).flatten(1))
m = torch.jit.script(Backbone())
m.save(sys.argv[1])
)PY",
                         {pt});
  INFO(made.err);
  REQUIRE(made.exit_code == 0);

  // 1. Embedding with the imported module alone matches Python's forward in eval mode.
  std::string embed_graph = "# Embeds with a TorchScript backbone.\nseed: 1\nnodes:\n"
                            "  test:  {type: io.hdf5_reader, params: {path: " + torch_data("test.h5") + ", batch_size: 50}}\n"
                            "  embed: {type: torch.embed, params: {model: {type: torch.torchscript, path: " + pt + "}, threads: 1}}\n"
                            "  save:  {type: io.hdf5_writer, params: {path: " + (dir / "script_emb.h5").string() + ", group: emb}}\n"
                            "edges: [test.out -> embed.in, embed.out -> save.in]\n";
  run_graph_ok("embed.yaml", embed_graph);
  // u8 [N,H,W,C] images (the image readers' form) are converted to f32 [N,C,H,W] / 255 on the way in.
  std::string u8_graph = embed_graph;
  u8_graph.replace(u8_graph.find("test.h5"), 7, "test_u8.h5");
  u8_graph.replace(u8_graph.find("script_emb.h5"), 13, "script_u8.h5");
  run_graph_ok("embed_u8.yaml", u8_graph);

  // 2. Frozen backbone in the seed's T_c^1 variant: only the branch trains.
  auto train = [&](const std::string& name, const std::string& model) {
    return run_graph(name + ".yaml",
                     train_graph(torch_data("train.h5"), model + ", loss: {type: torch.batch_hard_triplet}, "
                                                              "optimizer: {type: torch.sgd, lr: 0.1}, max_steps: 4, threads: 1, "
                                                              "checkpoint_dir: " + (dir / name).string()));
  };
  auto frozen = train("frozen", "model: {type: torch.concat, mode: frozen_backbone, backbone: {type: torch.torchscript, path: " + pt +
                                    "}, branch: {type: torch.mlp, hidden: [16], embedding_dim: 8}}");
  INFO(frozen.message());
  REQUIRE(frozen.exit_code == 0);
  // 3. The same module unfrozen trains.
  auto trained = train("trained", "model: {type: torch.torchscript, path: " + pt + ", freeze: false}");
  INFO(trained.message());
  REQUIRE(trained.exit_code == 0);
  // 4. freeze: true on the whole model leaves nothing to train: a clear error.
  auto nothing = train("nothing", "model: {type: torch.torchscript, path: " + pt + ", freeze: true}");
  CHECK(nothing.exit_code == 2);
  CHECK_THAT(nothing.message(), Catch::Contains("no trainable parameters"));

  check_python(R"PY(
import sys, torch, h5py, numpy as np
d, pt, test = sys.argv[1], sys.argv[2], sys.argv[3]
original = torch.jit.load(pt)
original.eval()
with h5py.File(test) as f:
    x = torch.from_numpy(f['image'][:])
    ids = f['id'][:]
with h5py.File(d + '/script_emb.h5') as f:
    emb, got_ids = f['emb']['embedding'][:], f['emb']['id'][:]
with torch.no_grad():
    want = original(x).numpy()
assert (got_ids == ids).all(), 'ids'
with h5py.File(d + '/script_u8.h5') as f:
    assert (f['emb']['embedding'][:] == emb).all(), 'u8 HWC input embeds differently from f32 CHW'
err = np.abs(emb - want).max()
assert err < 1e-5, f'embedding differs from Python by {err}'
state = {k: v for k, v in list(original.named_parameters()) + list(original.named_buffers())}
def checkpoint_state(path, prefix):
    c = torch.jit.load(path)
    names = c.model.names.split('\n')[:-1]
    return {n[len(prefix):]: getattr(c.model, f't{i}') for i, n in enumerate(names) if n.startswith(prefix)}
import glob
frozen = checkpoint_state(sorted(glob.glob(d + '/frozen/step-*.pt'))[-1], 'backbone.')
assert set(frozen) == set(state), (sorted(frozen), sorted(state))
for k in state:
    assert torch.equal(frozen[k], state[k]), f'frozen backbone changed: {k}'
trained = checkpoint_state(sorted(glob.glob(d + '/trained/step-*.pt'))[-1], '')
changed = [k for k in state if not torch.equal(trained[k], state[k])]
assert 'fc.weight' in changed and 'conv.weight' in changed and 'bn.running_mean' in changed, changed
print('ok', err, len(changed))
)PY",
               {dir.string(), pt, torch_data("test.h5")});
}

TEST_CASE("snapshots and checkpoints export the same embeddings to HDF5", "[torch][embed]") {
  fs::path dir = scratch_dir("torch-embed");
  const std::string snap_h5 = (dir / "snap.h5").string(), ckpt_h5 = (dir / "ckpt.h5").string(),
                    every_h5 = (dir / "every.h5").string(), final_h5 = (dir / "final.h5").string();
  // Training feeds its snapshots (every 4 steps and at the end) to two embedders of the test set.
  std::string g = train_graph(
      torch_data("train.h5"),
      kSmallCnn + ", loss: {type: torch.batch_hard_triplet}, max_steps: 8, snapshot_every: 4, threads: 2, checkpoint_dir: " +
          (dir / "ckpt").string(),
      "  test:  {type: io.hdf5_reader, params: {path: " + torch_data("test.h5") + ", fields: [id, label, image], batch_size: 32}}\n"
      "  test2: {type: io.hdf5_reader, params: {path: " + torch_data("test.h5") + ", fields: [id, label, image], batch_size: 32}}\n"
      "  embed: {type: torch.embed, params: {threads: 2}}\n"
      "  every: {type: torch.embed, params: {mode: every_snapshot, threads: 2}}\n"
      "  test3: {type: io.hdf5_reader, params: {path: " + torch_data("test.h5") + ", fields: [id, label, image], batch_size: 32}}\n"
      "  fin:   {type: torch.embed, params: {mode: final, threads: 2}}\n"
      "  save3: {type: io.hdf5_writer, params: {path: " + final_h5 + ", group: embeddings}}\n"
      "  save:  {type: io.hdf5_writer, params: {path: " + snap_h5 + ", group: embeddings}}\n"
      "  save2: {type: io.hdf5_writer, params: {path: " + every_h5 + ", group: embeddings}}\n",
      "  - train.model -> embed.model\n"
      "  - test.out -> embed.in\n"
      "  - embed.out -> save.in\n"
      "  - train.model -> every.model\n"
      "  - test2.out -> every.in\n"
      "  - every.out -> save2.in\n"
      "  - train.model -> fin.model\n"
      "  - test3.out -> fin.in\n"
      "  - fin.out -> save3.in\n");
  run_graph_ok("train.yaml", g);
  std::string from_ckpt = "# Embeds from the final checkpoint.\nseed: 1\nnodes:\n"
                          "  test:  {type: io.hdf5_reader, params: {path: " + torch_data("test.h5") + ", batch_size: 128}}\n"
                          "  embed: {type: torch.embed, params: {checkpoint: " + (dir / "ckpt").string() + "}}\n"
                          "  save:  {type: io.hdf5_writer, params: {path: " + ckpt_h5 + ", group: embeddings}}\n"
                          "edges: [test.out -> embed.in, embed.out -> save.in]\n";
  auto c = run_graph_ok("ckpt.yaml", from_ckpt);
  check_python(R"PY(
import sys, h5py, numpy as np
snap, ckpt, every, test, fin = sys.argv[1:6]
with h5py.File(test) as f:
    ids, labels = f['id'][:], f['label'][:]
def load(p):
    with h5py.File(p) as f:
        g = f['embeddings']
        return {k: g[k][:] for k in g.attrs['fields']}
s, c, e, f = load(snap), load(ckpt), load(every), load(fin)
# mode final: every batch embedded with the last snapshot (step 8), whenever it arrived.
assert 'step' not in f and (f['id'] == ids).all()
assert np.abs(f['embedding'] - c['embedding']).max() < 1e-5, 'mode final differs from the final checkpoint'
assert s['embedding'].shape == (128, 16) and s['embedding'].dtype == np.float32, s['embedding'].shape
assert (s['id'] == ids).all() and (s['label'] == labels).all() and (c['id'] == ids).all()
# The latest-snapshot embedder may have used the step-4 snapshot for early batches only if
# they arrived before the final one; the embeddings must match either step 4 or step 8.
steps = list(e['step'])
assert sorted(set(steps)) == [4, 8] and steps.count(4) == 128 and steps.count(8) == 128, set(steps)
final = e['embedding'][e['step'] == 8]
assert np.abs(final - c['embedding']).max() < 1e-5, 'every_snapshot step 8 differs from the checkpoint'
early = e['embedding'][e['step'] == 4]
assert np.abs(early - final).max() > 1e-4, 'step 4 and step 8 embeddings should differ'
for i in range(128):
    ok = np.abs(s['embedding'][i] - final[i]).max() < 1e-5 or np.abs(s['embedding'][i] - early[i]).max() < 1e-5
    assert ok, i
print('ok')
)PY",
               {snap_h5, ckpt_h5, every_h5, torch_data("test.h5"), final_h5});
}

TEST_CASE("ema_decay: snapshots and checkpoints carry the weight average; the live weights train and resume exactly",
          "[torch][train][ema]") {
  fs::path dir = scratch_dir("torch-ema");
  const std::string snap_h5 = (dir / "snap.h5").string(), ckpt_h5 = (dir / "ckpt.h5").string();
  // Six SGD steps with a checkpoint after each, with and without averaging; decay 0.3 is below
  // the warm-up bound (1+t)/(10+t) from step 3 on, so both branches of the decay are used.
  auto graph = [&](const std::string& run, const std::string& ema, int max_steps, bool embed) {
    return train_graph(torch_data("train.h5"),
                       kSmallCnn + ", loss: {type: torch.batch_hard_triplet}, optimizer: {type: torch.sgd, lr: 0.05, momentum: 0.9}, "
                                   "threads: 2, checkpoint_every: 1, keep_checkpoints: 0, resume: auto, " + ema +
                                   "max_steps: " + std::to_string(max_steps) + ", checkpoint_dir: " + (dir / run).string(),
                       embed ? "  test:  {type: io.hdf5_reader, params: {path: " + torch_data("test.h5") + ", fields: [id, image], batch_size: 64}}\n"
                               "  embed: {type: torch.embed, params: {mode: final, threads: 2}}\n"
                               "  save:  {type: io.hdf5_writer, params: {path: " + snap_h5 + ", group: embeddings}}\n"
                             : "",
                       embed ? "  - train.model -> embed.model\n  - test.out -> embed.in\n  - embed.out -> save.in\n" : "");
  };
  auto must_run = [&](const std::string& name, const std::string& yaml) {
    auto r = run_graph(name, yaml);
    INFO(name << ": " << r.message());
    REQUIRE(r.exit_code == 0);
  };
  must_run("plain.yaml", graph("plain", "", 6, false));
  must_run("ema.yaml", graph("ema", "ema_decay: 0.3, ", 6, true));
  // Interrupted after 3 steps, then resumed from the step-3 checkpoint to step 6.
  must_run("part.yaml", graph("part", "ema_decay: 0.3, ", 3, false));
  must_run("resumed.yaml", graph("part", "ema_decay: 0.3, ", 6, false));
  must_run("ckpt.yaml", "seed: 1\nnodes:\n"
                        "  test:  {type: io.hdf5_reader, params: {path: " + torch_data("test.h5") + ", fields: [id, image], batch_size: 128}}\n"
                        "  embed: {type: torch.embed, params: {checkpoint: " + (dir / "ema").string() + "}}\n"
                        "  save:  {type: io.hdf5_writer, params: {path: " + ckpt_h5 + ", group: embeddings}}\n"
                        "edges: [test.out -> embed.in, embed.out -> save.in]\n");
  // The average recomputed in Python from the live weights of every checkpoint.
  check_python(R"PY(
import sys, h5py, numpy as np, torch
d, snap, ckpt = sys.argv[1:4]
def state(path, key='model'):
    m = getattr(torch.jit.load(path), key)
    return {n: getattr(m, f't{i}') for i, n in enumerate(m.names.split('\n')[:-1])}
ck = lambda run, t: f'{d}/{run}/step-{t:08d}.pt'
for t in range(1, 7):
    live, plain = state(ck('ema', t), 'live_model'), state(ck('plain', t))
    for n in plain:  # averaging leaves training alone
        assert torch.equal(live[n], plain[n]), (t, n)
for t in range(2, 7):
    decay = min(0.3, (1 + t) / (10 + t))
    before, now, live = state(ck('ema', t - 1)), state(ck('ema', t)), state(ck('ema', t), 'live_model')
    for n in now:
        if now[n].is_floating_point():
            want = decay * before[n] + (1 - decay) * live[n]
            assert torch.allclose(now[n], want, rtol=1e-5, atol=1e-7), (t, n, (now[n] - want).abs().max())
        else:  # batch norm's step counter is the live one
            assert torch.equal(now[n], live[n]), (t, n)
avg, live = state(ck('ema', 6)), state(ck('ema', 6), 'live_model')
moved = max(float((avg[n] - live[n]).abs().max()) for n in avg if avg[n].is_floating_point())
assert moved > 1e-3, moved
# Resuming restores the average and the live weights: the same step-6 checkpoint, bit for bit.
for key in ('model', 'live_model'):
    a, b = state(ck('ema', 6), key), state(ck('part', 6), key)
    for n in a:
        assert torch.equal(a[n], b[n]), (key, n)
# The final snapshot is the average too: torch.embed gives the checkpoint's embeddings.
load = lambda p: h5py.File(p)['embeddings']['embedding'][:]
assert np.abs(load(snap) - load(ckpt)).max() < 1e-5
print('ok')
)PY",
               {dir.string(), snap_h5, ckpt_h5});

  // Resuming across a change of ema_decay says what happens to the average, and trains on.
  struct Switch {
    std::string run, ema, said;
  };
  for (const Switch& sw : {Switch{"ema", "", "was written with ema_decay; this run (ema_decay 0) continues without an average"},
                           Switch{"plain", "ema_decay: 0.3, ", "was written without ema_decay; the average starts from its weights"}}) {
    auto r = run_graph(sw.run + "_to7.yaml", graph(sw.run, sw.ema, 7, false));
    INFO(sw.run << ": " << r.message());
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.message(), Catch::Contains(sw.said));
    CHECK(fs::exists(dir / sw.run / "step-00000007.pt"));
  }

  auto bad = run_graph("bad.yaml", graph("bad", "ema_decay: 1.0, ", 2, false));
  CHECK(bad.exit_code == 2);  // a configuration error, found before anything runs
  CHECK_THAT(bad.message(), Catch::Contains("ema_decay must be below 1"));
  CHECK_FALSE(fs::exists(dir / "bad"));
}

TEST_CASE("validation: a loss's fields, resume and schedule settings", "[torch][validate]") {
  fs::path dir = scratch_dir("torch-validate");
  std::string g = train_graph(torch_data("train.h5"),
                              kSmallCnn + ", loss: {type: torch.contrastive}, resume: auto, "
                                          "schedule: {type: torch.cosine}");
  auto r = validate_graph("bad.yaml", g);
  INFO(r.message());
  CHECK(r.exit_code == 2);
  const std::string all = r.problem_text();
  CHECK_THAT(all, Catch::Contains("param 'loss': torch.contrastive reads batch: needs field 'a_image'"));
  CHECK_THAT(all, Catch::Contains("param 'loss': torch.contrastive reads batch: needs field 'pair_label'"));
  CHECK_THAT(all, Catch::Contains("resume: auto looks for checkpoints in checkpoint_dir"));
  CHECK_THAT(all, Catch::Contains("torch.cosine schedule without `steps`"));
  CHECK_THAT(all, Catch::Contains("bad.yaml:5:"));  // located at the train node's line
}

TEST_CASE("ResNet-18 and ResNet-50 have torchvision's parameter counts and train", "[torch][resnet]") {
  fs::path dir = scratch_dir("torch-resnet");
  // torchvision's resnet18() / resnet50() (3 input channels, 1000 outputs): 11,689,512 and 25,557,032.
  for (auto [type, count] : {std::pair<std::string, std::string>{"torch.resnet18", "11689512"}, {"torch.resnet50", "25557032"}}) {
    std::string g = "# One step of " + type + ".\nseed: 1\nnodes:\n"
                    "  data:  {type: io.hdf5_reader, params: {path: " + torch_data("rgb.h5") + ", batch_size: 4}}\n"
                    "  train: {type: torch.train, params: {model: {type: " + type + ", embedding_dim: 1000}, "
                    "loss: {type: torch.batch_hard_triplet}, optimizer: {type: torch.sgd}, max_steps: 1, threads: 2, "
                    "log_every: 1, log_dir: " + (dir / type).string() + "}}\n"
                    "edges: [data.out -> train.in]\n";
    auto r = run_graph(type + ".yaml", g);
    INFO(r.message());
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.message(), Catch::Contains("model: " + count + " trainable parameters"));
    auto rows = read_metrics(dir / type / "metrics.csv");
    REQUIRE(rows.size() == 1);
    CHECK(std::isfinite(std::stod(rows[0].loss)));
  }
  // The small stem on 28x28 grey images, narrow: a quick model for Fashion-MNIST.
  std::string g = train_graph(torch_data("train.h5"),
                              "model: {type: torch.resnet18, in_channels: 1, width: 8, stem: small, embedding_dim: 16}, "
                              "loss: {type: torch.batch_hard_triplet}, max_steps: 2, threads: 2");
  auto r = run_graph("small.yaml", g);
  INFO(r.message());
  CHECK(r.exit_code == 0);
}

TEST_CASE("torch.blend trains a head over a frozen model loaded from a checkpoint", "[torch][blend]") {
  fs::path dir = scratch_dir("torch-blend");
  auto first = run_graph_ok("first.yaml",
                          train_graph(torch_data("train.h5"), kSmallCnn + ", loss: {type: torch.batch_hard_triplet}, max_steps: 3, "
                                                                       "threads: 2, checkpoint_dir: " + (dir / "first").string()));
  const std::string weights = (dir / "first" / "step-00000003.pt").string();
  auto blend = run_graph(
      "blend.yaml",
      train_graph(torch_data("train.h5"),
                  "model: {type: torch.blend, backbone: {type: torch.small_cnn, channels: [8, 16], hidden: 32, embedding_dim: 16, "
                  "weights: " + weights + "}, head: {type: torch.mlp, hidden: [16], embedding_dim: 4, normalize: true}}, "
                  "loss: {type: torch.contrastive}, max_steps: 3, threads: 2, checkpoint_dir: " + (dir / "blend").string(),
                  "", ""));
  // contrastive needs pair fields, which a label batch lacks: validation says so before running.
  CHECK(blend.exit_code == 2);
  CHECK_THAT(blend.message(), Catch::Contains("param 'loss': torch.contrastive reads batch: needs field 'a_image'") &&
                            Catch::Contains("needs field 'pair_label'"));
  blend = run_graph(
      "blend.yaml",
      train_graph(torch_data("train.h5"),
                  "model: {type: torch.blend, backbone: {type: torch.small_cnn, channels: [8, 16], hidden: 32, embedding_dim: 16, "
                  "weights: " + weights + "}, head: {type: torch.mlp, hidden: [16], embedding_dim: 4, normalize: true}}, "
                  "loss: {type: torch.batch_hard_triplet}, max_steps: 3, threads: 2, checkpoint_dir: " + (dir / "blend").string()));
  INFO(blend.message());
  REQUIRE(blend.exit_code == 0);
  check_python(R"PY(
import sys, torch
def state(path):
    c = torch.jit.load(path)
    return {n: getattr(c.model, f't{i}') for i, n in enumerate(c.model.names.split('\n')[:-1])}
first, blend = state(sys.argv[1]), state(sys.argv[2])
backbone = {k[len('backbone.'):]: v for k, v in blend.items() if k.startswith('backbone.')}
assert set(backbone) == set(first), (sorted(backbone), sorted(first))
for k in first:
    assert torch.equal(backbone[k], first[k]), k
head = [k for k in blend if k.startswith('head.')]
assert head, sorted(blend)
print('ok')
)PY",
               {weights, (dir / "blend" / "step-00000003.pt").string()});
}

TEST_CASE("small_cnn's features output is exactly what its head reads", "[torch][embed]") {
  // hidden: 0 makes the head one linear layer, so embedding = W * features + b must hold exactly
  // for every test image; 98 features (2 channels x 7 x 7) over 128 images leave the least-squares
  // fit overdetermined, so a wrong tensor (or the right one with rows shuffled) cannot fit.
  fs::path dir = scratch_dir("torch-features");
  const std::string out_h5 = (dir / "features.h5").string();
  std::string g = train_graph(
      torch_data("train.h5"),
      "model: {type: torch.small_cnn, channels: [2, 2], hidden: 0, embedding_dim: 8}, loss: {type: torch.batch_hard_triplet}, "
      "max_steps: 4, threads: 2",
      "  test:  {type: io.hdf5_reader, params: {path: " + torch_data("test.h5") + ", fields: [id, label, image], batch_size: 128}}\n"
      "  embed: {type: torch.embed, params: {outputs: [features], threads: 2}}\n"
      "  save:  {type: io.hdf5_writer, params: {path: " + out_h5 + ", group: embeddings}}\n",
      "  - train.model -> embed.model\n"
      "  - test.out -> embed.in\n"
      "  - embed.out -> save.in\n");
  run_graph_ok("features.yaml", g);
  check_python(R"PY(
import sys, h5py, numpy as np
with h5py.File(sys.argv[1]) as f:
    g = f['embeddings']
    e, x = g['embedding'][:].astype(np.float64), g['features'][:].astype(np.float64)
assert x.shape == (128, 98) and e.shape == (128, 8), (x.shape, e.shape)
assert (x >= 0).all(), 'features come after ReLU and max pooling'
def residual(feats):
    a = np.hstack([feats, np.ones((len(feats), 1))])
    m, *_ = np.linalg.lstsq(a, e, rcond=None)
    return np.abs(a @ m - e).max() / np.abs(e).max()
fit, shuffled = residual(x), residual(x[np.random.default_rng(0).permutation(128)])
assert fit < 1e-4, fit
assert shuffled > 1e-2, shuffled
print('ok', fit, shuffled)
)PY",
               {out_h5});
}
