// torch.train's validation input and model selection through graph files and the CLI, on
// Fashion-MNIST subsets: the recorded retrieval metrics equal numpy's on the embeddings torch.embed
// makes with the selected snapshot (and best.pt gives the same ones), with weight averaging too,
// where evaluating leaves the training losses unchanged; early stopping stops where
// patience says on a run whose lr drops to 0, the validation loss selects in min mode (numpy's
// batch-hard triplet loss on the snapshot's embeddings), a resumed run keeps the best weights and
// the patience counter, and misconfigurations stop at `embedflow validate`.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <sstream>

#include "cli.hpp"
#include "torch_test_util.hpp"

namespace fs = std::filesystem;
using embedflow::test::read_file;
using embedflow::test::run_cli;
using embedflow::test::run_python;
using embedflow::test::scratch_dir;
using embedflow::test::write_file;

namespace {

// train.h5: the first 512 training images (f32 [N,1,28,28] in [0,1]), labels and ids; val.h5: the
// first 200 test images, their labels and ids from 100000.
const fs::path& data_dir() {
  static const fs::path dir = [] {
    fs::path d = scratch_dir("torch-validation-data");
    auto r = run_python(R"PY(
import gzip, sys, numpy as np, h5py
src = '/usr/share/datasets/fashion-mnist/'
def read(name, offset):
    with gzip.open(src + name) as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)
def write(path, images, labels, first_id):
    with h5py.File(path, 'w') as f:
        f['image'] = images.astype(np.float32) / 255
        f['label'] = labels.astype(np.int64)
        f['id'] = np.arange(first_id, first_id + len(labels), dtype=np.int64)
out = sys.argv[1]
write(out + '/train.h5', read('train-images-idx3-ubyte.gz', 16).reshape(-1, 1, 28, 28)[:512],
      read('train-labels-idx1-ubyte.gz', 8)[:512], 0)
write(out + '/val.h5', read('t10k-images-idx3-ubyte.gz', 16).reshape(-1, 1, 28, 28)[:200],
      read('t10k-labels-idx1-ubyte.gz', 8)[:200], 100000)
)PY",
                        {d.string()});
    if (r.exit_code != 0) throw std::runtime_error("making the Fashion-MNIST subsets failed: " + r.err);
    return d;
  }();
  return dir;
}

std::string path_of(const std::string& name) { return (data_dir() / name).string(); }

const std::string kModel =
    "model: {type: torch.small_cnn, channels: [8, 16], hidden: 32, embedding_dim: 16, batchnorm: false}, "
    "loss: {type: torch.batch_hard_triplet, margin: 0.2}, threads: 2";

// Training on train.h5 (8 batches of 64 per epoch) with validation batches of 50 from val.h5.
std::string graph(const std::string& train_params, const std::string& extra_nodes = "",
                  const std::string& extra_edges = "", const std::string& val_fields = "[id, label, image]") {
  return "# torch.train with a validation input.\n"
         "seed: 3\n"
         "nodes:\n"
         "  data:  {type: io.hdf5_reader, params: {path: " + path_of("train.h5") + ", fields: [id, label, image], batch_size: 64, shuffle: true}}\n"
         "  val:   {type: io.hdf5_reader, params: {path: " + path_of("val.h5") + ", fields: " + val_fields + ", batch_size: 50}}\n"
         "  train: {type: torch.train, params: {" + kModel + ", " + train_params + "}}\n" + extra_nodes +
         "edges:\n"
         "  - data.out -> train.in\n"
         "  - val.out -> train.validation\n" + extra_edges;
}

// The final snapshot embeds val.h5 into <dir>/<name>.h5; its step and validation value are printed.
std::string embed_nodes(const fs::path& dir, const std::string& name) {
  return "  vals:  {type: io.hdf5_reader, params: {path: " + path_of("val.h5") + ", fields: [id, label, image], batch_size: 64}}\n"
         "  embed: {type: torch.embed, params: {mode: final, threads: 2}}\n"
         "  save:  {type: io.hdf5_writer, params: {path: " + (dir / (name + ".h5")).string() + ", group: embeddings}}\n"
         "  pick:  {type: core.select, params: {fields: [step, validation, validation_metric]}}\n"
         "  show:  {type: core.sink, params: {mode: print}}\n";
}
const std::string kEmbedEdges =
    "  - train.model -> embed.model\n  - vals.out -> embed.in\n  - embed.out -> save.in\n"
    "  - train.model -> pick.in\n  - pick.out -> show.in\n";

embedflow::test::Result run_graph(const fs::path& dir, const std::string& name, const std::string& yaml,
                                  const std::string& verb = "run") {
  write_file(dir / name, yaml);
  return run_cli({verb, (dir / name).string()});
}

struct Row {
  std::int64_t step = 0, best_step = 0, since_best = 0;
  bool improved = false;
  std::string metric, value_text;
  double value = 0, best = 0;
};

std::vector<Row> read_validation(const fs::path& csv) {
  std::ifstream in(csv);
  INFO("reading " << csv);
  std::string line;
  std::getline(in, line);
  REQUIRE(line == "step,epoch,metric,value,improved,best,best_step,since_best,map_at_r,precision_at_1,r_precision,loss");
  std::vector<Row> rows;
  while (std::getline(in, line)) {
    std::vector<std::string> c;
    std::istringstream s(line);
    for (std::string cell; std::getline(s, cell, ',');) c.push_back(cell);
    REQUIRE(c.size() == 12);
    Row r;
    r.step = std::stoll(c[0]);
    r.metric = c[2];
    r.value_text = c[3];
    r.value = std::stod(c[3]);
    r.improved = c[4] == "1";
    r.best = std::stod(c[5]);
    r.best_step = std::stoll(c[6]);
    r.since_best = std::stoll(c[7]);
    rows.push_back(r);
  }
  return rows;
}

// The selection bookkeeping recomputed from the values alone: an evaluation improves when it beats
// the best so far by more than min_delta (the first always does).
void check_bookkeeping(const std::vector<Row>& rows, bool maximize, double min_delta = 0) {
  double best = 0;
  std::int64_t best_step = -1, since = 0;
  for (const Row& r : rows) {
    INFO("evaluation at step " << r.step);
    const bool better = best_step < 0 || (maximize ? r.value > best + min_delta : r.value < best - min_delta);
    if (better) {
      best = r.value;
      best_step = r.step;
      since = 0;
    } else {
      ++since;
    }
    CHECK(r.improved == better);
    CHECK(r.best == best);
    CHECK(r.best_step == best_step);
    CHECK(r.since_best == since);
  }
}

// "{step: [S], validation: [V], ..." as core.sink prints the final snapshot.
std::int64_t printed_snapshot_step(const std::string& out) {
  const std::string key = "{step: [";
  const std::size_t at = out.rfind(key);
  REQUIRE(at != std::string::npos);
  return std::stoll(out.substr(at + key.size()));
}

// The validation value the final snapshot carries, as printed (6 significant digits).
double printed_snapshot_validation(const std::string& out) {
  const std::string key = "validation: [";
  const std::size_t at = out.rfind(key);
  REQUIRE(at != std::string::npos);
  return std::stod(out.substr(at + key.size()));
}

// numpy's leave-one-out retrieval (L2, stable argsort, queries without another item of their
// label left out) on the embeddings of argv[1] must equal the selected evaluation's metrics in the
// validation.csv argv[2] to 1e-6; argv[3], when given, holds embeddings that must equal argv[1]'s.
const char* kRetrievalOracle = R"PY(
import csv, sys, h5py, numpy as np
f = h5py.File(sys.argv[1])['embeddings']
e, y = f['embedding'][:].astype(np.float64), f['label'][:]
if len(sys.argv) > 3:
    other = h5py.File(sys.argv[3])['embeddings']['embedding'][:]
    assert np.abs(other - f['embedding'][:]).max() < 1e-6, np.abs(other - f['embedding'][:]).max()
dist = np.sqrt(((e[:, None, :] - e[None, :, :]) ** 2).sum(-1))
np.fill_diagonal(dist, np.inf)
order = np.argsort(dist, axis=1, kind='stable')
maps, p1, rp = [], [], []
for q in range(len(y)):
    r = int((y == y[q]).sum()) - 1
    if r == 0:
        continue
    hit = (y[order[q, :r]] == y[q])
    prec = np.cumsum(hit) / np.arange(1, r + 1)
    maps.append((prec * hit).sum() / r)
    p1.append(float(hit[0]))
    rp.append(hit.sum() / r)
want = {'map_at_r': np.mean(maps), 'precision_at_1': np.mean(p1), 'r_precision': np.mean(rp)}
rows = list(csv.DictReader(open(sys.argv[2])))
sel = [r for r in rows if int(r['step']) == int(rows[-1]['best_step'])][0]
for k, v in want.items():
    assert abs(float(sel[k]) - v) < 1e-6, (k, sel[k], v)
assert float(sel['value']) == float(sel['map_at_r'])
# The evaluations differ, so the selection chose among distinct models.
assert len({r['map_at_r'] for r in rows}) > 2, rows
print(want)
)PY";

}  // namespace

TEST_CASE("validation: the recorded MAP@R, P@1 and R-precision are numpy's on the selected snapshot's embeddings",
          "[torch][train][select][cli]") {
  fs::path dir = scratch_dir("torch-select-retrieval");
  auto r = run_graph(dir, "train.yaml",
                     graph("optimizer: {type: torch.adam, lr: 0.003}, epochs: 2, validate_every: 3, "
                           "select_metric: map_at_r, log_dir: " + (dir / "log").string() +
                           ", checkpoint_dir: " + (dir / "ckpt").string(),
                           embed_nodes(dir, "snap") + "  rows:  {type: core.sink, params: {mode: print}}\n",
                           kEmbedEdges + "  - train.validation -> rows.in\n"));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const auto rows = read_validation(dir / "log" / "validation.csv");
  // Every 3 of the 16 steps and once at the end.
  std::vector<std::int64_t> steps;
  for (const Row& row : rows) steps.push_back(row.step);
  CHECK(steps == std::vector<std::int64_t>{3, 6, 9, 12, 15, 16});
  check_bookkeeping(rows, /*maximize=*/true);
  const Row& last = rows.back();
  CHECK(printed_snapshot_step(r.out) == last.best_step);
  CHECK(std::abs(printed_snapshot_validation(r.out) - last.best) < 1e-5);
  CHECK_THAT(r.out, Catch::Contains("validation_metric: [\"map_at_r\"]"));
  // One record per evaluation on the `validation` output.
  std::size_t records = 0;
  for (std::size_t p = r.out.find("since_best"); p != std::string::npos; p = r.out.find("since_best", p + 1)) ++records;
  CHECK(records == rows.size());
  // best.pt (a checkpoint of the best step) embeds like the snapshot.
  REQUIRE(fs::exists(dir / "ckpt" / "best.pt"));
  auto b = run_graph(dir, "best.yaml",
                     "seed: 1\nnodes:\n"
                     "  vals:  {type: io.hdf5_reader, params: {path: " + path_of("val.h5") + ", fields: [id, label, image], batch_size: 64}}\n"
                     "  embed: {type: torch.embed, params: {checkpoint: " + (dir / "ckpt" / "best.pt").string() + ", threads: 2}}\n"
                     "  save:  {type: io.hdf5_writer, params: {path: " + (dir / "best.h5").string() + ", group: embeddings}}\n"
                     "edges: [vals.out -> embed.in, embed.out -> save.in]\n");
  INFO(b.err);
  REQUIRE(b.exit_code == 0);
  auto check = run_python(kRetrievalOracle, {(dir / "snap.h5").string(), (dir / "log" / "validation.csv").string(),
                                             (dir / "best.h5").string()});
  INFO(check.out << check.err);
  CHECK(check.exit_code == 0);
}

TEST_CASE("validation: with ema_decay the evaluations score the average and leave training alone",
          "[torch][train][select][ema][cli]") {
  fs::path dir = scratch_dir("torch-select-ema");
  const std::string params = "optimizer: {type: torch.adam, lr: 0.003}, ema_decay: 0.5, epochs: 2, log_every: 1, ";
  auto validated = run_graph(dir, "validated.yaml",
                             graph(params + "validate_every: 4, log_dir: " + (dir / "log").string(),
                                   embed_nodes(dir, "snap"), kEmbedEdges));
  INFO(validated.err);
  REQUIRE(validated.exit_code == 0);
  // The same training without the validation input.
  std::string plain = graph(params + "log_dir: " + (dir / "plain").string());
  for (const std::string line : {"  val:   {", "  - val.out -> train.validation\n"}) {
    const std::size_t at = plain.find(line);
    REQUIRE(at != std::string::npos);
    plain.erase(at, plain.find('\n', at) + 1 - at);
  }
  auto unvalidated = run_graph(dir, "plain.yaml", plain);
  INFO(unvalidated.err);
  REQUIRE(unvalidated.exit_code == 0);
  const auto a = embedflow::test::read_metrics(dir / "log" / "metrics.csv");
  const auto b = embedflow::test::read_metrics(dir / "plain" / "metrics.csv");
  REQUIRE(a.size() == 16);
  REQUIRE(b.size() == a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO("metrics row " << i);
    CHECK(a[i].loss == b[i].loss);
    CHECK(a[i].lr == b[i].lr);
  }
  // The final snapshot (the best evaluation's average) embeds to the recorded metrics.
  auto check = run_python(kRetrievalOracle, {(dir / "snap.h5").string(), (dir / "log" / "validation.csv").string()});
  INFO(check.out << check.err);
  CHECK(check.exit_code == 0);
}

TEST_CASE("validation: early stopping after `patience` evaluations without improvement; the snapshot is the best one",
          "[torch][train][select][cli]") {
  fs::path dir = scratch_dir("torch-select-patience");
  // The lr drops to 0 after 4 updates (step schedule, gamma 0): the model stops changing, so every
  // evaluation from step 4 on scores the same.
  auto r = run_graph(dir, "train.yaml",
                     graph("optimizer: {type: torch.adam, lr: 0.003}, schedule: {type: torch.step, step_size: 4, gamma: 0.0}, "
                           "epochs: 2, log_every: 1, validate_every: 2, select_metric: precision_at_1, patience: 3, "
                           "log_dir: " + (dir / "log").string(),
                           embed_nodes(dir, "snap"), kEmbedEdges));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const auto rows = read_validation(dir / "log" / "validation.csv");
  REQUIRE(rows.size() >= 4);
  check_bookkeeping(rows, /*maximize=*/true);
  for (const Row& row : rows)
    if (row.step > 4) CHECK(row.value_text == rows[1].value_text);  // the plateau
  // The best is step 2 or step 4 (whichever scored higher, step 2 on a tie); three evaluations
  // later training stops.
  const std::int64_t best = rows[1].value > rows[0].value ? 4 : 2;
  const std::int64_t stop = best + 3 * 2;
  CHECK(rows.back().step == stop);
  CHECK(rows.back().since_best == 3);
  CHECK(rows.size() == static_cast<std::size_t>(stop / 2));
  const auto metrics = embedflow::test::read_metrics(dir / "log" / "metrics.csv");
  REQUIRE(!metrics.empty());
  CHECK(metrics.back().step == std::to_string(stop));  // not the 16 steps of two epochs
  CHECK_THAT(r.err, Catch::Contains("early stopping at step " + std::to_string(stop)));
  CHECK(printed_snapshot_step(r.out) == best);
  CHECK(std::abs(printed_snapshot_validation(r.out) - rows[best / 2 - 1].value) < 1e-5);
}

TEST_CASE("validation: select_mode min on the validation loss", "[torch][train][select][cli]") {
  fs::path dir = scratch_dir("torch-select-loss");
  auto r = run_graph(dir, "train.yaml",
                     graph("optimizer: {type: torch.adam, lr: 0.003}, epochs: 2, validate_every: 2, select_metric: loss, "
                           "log_dir: " + (dir / "log").string(),
                           embed_nodes(dir, "snap"), kEmbedEdges));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const auto rows = read_validation(dir / "log" / "validation.csv");
  REQUIRE(rows.size() == 8);
  for (const Row& row : rows) CHECK(row.metric == "loss");
  check_bookkeeping(rows, /*maximize=*/false);  // auto: lower is better for the loss
  CHECK(printed_snapshot_step(r.out) == rows.back().best_step);
  // numpy's batch-hard triplet loss over the trainer's validation batches (50 rows each), on the
  // embeddings torch.embed makes with the final snapshot, is the selected evaluation's value.
  auto check = run_python(R"PY(
import csv, sys, h5py, numpy as np
d = sys.argv[1]
f = h5py.File(d + '/snap.h5')['embeddings']
e, y = f['embedding'][:].astype(np.float64), f['label'][:]
total = 0.0
for b in range(0, len(y), 50):
    x, l = e[b:b + 50], y[b:b + 50]
    dist = np.sqrt(((x[:, None, :] - x[None, :, :]) ** 2).sum(-1))
    same, eye = l[:, None] == l[None, :], np.eye(len(l), dtype=bool)
    pos, neg = same & ~eye, ~same
    valid = pos.any(1) & neg.any(1)
    hp = np.where(pos, dist, 0).max(1)
    hn = np.where(neg, dist, np.inf).min(1)
    total += np.maximum(hp - hn + 0.2, 0)[valid].mean() * len(l)
want = total / len(y)
rows = list(csv.DictReader(open(d + '/log/validation.csv')))
sel = [r for r in rows if int(r['step']) == int(rows[-1]['best_step'])][0]
assert abs(float(sel['value']) - want) < 1e-5, (sel['value'], want)
assert float(sel['value']) == min(float(r['value']) for r in rows)
print(want)
)PY",
                          {dir.string()});
  INFO(check.out << check.err);
  CHECK(check.exit_code == 0);
}

TEST_CASE("validation: a resumed run keeps the best weights and value and the patience counter",
          "[torch][train][select][cli]") {
  fs::path dir = scratch_dir("torch-select-resume");
  auto g = [&](const std::string& run, const std::string& extra, const std::string& embeddings) {
    return graph("optimizer: {type: torch.adam, lr: 0.003}, schedule: {type: torch.step, step_size: 4, gamma: 0.0}, "
                 "epochs: 2, validate_every: 2, select_metric: map_at_r, patience: 3, checkpoint_every: 2, "
                 "keep_checkpoints: 0, resume: auto, " + extra + "checkpoint_dir: " + (dir / run / "ckpt").string() +
                 ", log_dir: " + (dir / run / "log").string(),
                 embed_nodes(dir, embeddings), kEmbedEdges);
  };
  auto whole = run_graph(dir, "whole.yaml", g("whole", "", "whole"));
  INFO(whole.err);
  REQUIRE(whole.exit_code == 0);
  // Stopped after step 6 (one or two evaluations after the best), then resumed to the end.
  auto part = run_graph(dir, "part.yaml", g("part", "max_steps: 6, ", "part"));
  INFO(part.err);
  REQUIRE(part.exit_code == 0);
  auto resumed = run_graph(dir, "resumed.yaml", g("part", "", "resumed"));
  INFO(resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.err, Catch::Contains("resuming from"));
  // The same evaluations, the same best and the same early stop as the uninterrupted run: with a
  // fresh counter or a lost best it would stop later or select another step.
  const std::string a = read_file(dir / "whole" / "log" / "validation.csv");
  const std::string b = read_file(dir / "part" / "log" / "validation.csv");
  CHECK(a == b);
  const auto rows = read_validation(dir / "whole" / "log" / "validation.csv");
  REQUIRE(rows.back().since_best == 3);
  CHECK(rows.back().step > 6);
  CHECK(printed_snapshot_step(resumed.out) == rows.back().best_step);
  CHECK(printed_snapshot_step(whole.out) == rows.back().best_step);
  auto check = run_python(R"PY(
import sys, h5py, numpy as np
load = lambda p: h5py.File(p)['embeddings']['embedding'][:]
a, b = load(sys.argv[1] + '/whole.h5'), load(sys.argv[1] + '/resumed.h5')
assert np.array_equal(a, b), np.abs(a - b).max()
)PY",
                          {dir.string()});
  INFO(check.out << check.err);
  CHECK(check.exit_code == 0);
  // Resumed once more from its last checkpoint, where patience is exhausted: nothing trains, and
  // the final snapshot is still the best evaluation's (its training batches are held for the
  // validation stream, and one of them still builds the model and restores the checkpoint).
  auto again = run_graph(dir, "again.yaml", g("whole", "", "again"));
  INFO(again.err);
  REQUIRE(again.exit_code == 0);
  CHECK_THAT(again.err, Catch::Contains("resuming from"));
  CHECK(printed_snapshot_step(again.out) == rows.back().best_step);
  CHECK(read_file(dir / "whole" / "log" / "validation.csv") == a);
  check = run_python(R"PY(
import sys, h5py, numpy as np
load = lambda p: h5py.File(p)['embeddings']['embedding'][:]
a, b = load(sys.argv[1] + '/whole.h5'), load(sys.argv[1] + '/again.h5')
assert np.array_equal(a, b), np.abs(a - b).max()
)PY",
                     {dir.string()});
  INFO(check.out << check.err);
  CHECK(check.exit_code == 0);
}

TEST_CASE("validation: misconfigured model selection stops at `embedflow validate`", "[torch][validate][select][cli]") {
  fs::path dir = scratch_dir("torch-select-errors");
  struct Case {
    std::string name, yaml, said;
  };
  const std::string lone =
      "seed: 3\nnodes:\n"
      "  data:  {type: io.hdf5_reader, params: {path: " + path_of("train.h5") + ", fields: [id, label, image], batch_size: 64}}\n"
      "  train: {type: torch.train, params: {" + kModel + ", validate_every: 2}}\n"
      "edges: [data.out -> train.in]\n";
  const std::vector<Case> cases{
      {"unconnected.yaml", lone, "validate_every is 2 but the `validation` input is not connected"},
      {"off.yaml", graph("validate_every: 0"), "the `validation` input is connected but validate_every is 0"},
      {"metric.yaml", graph("validate_every: 2, select_metric: map_at_k"), "select_metric"},
      {"nolabel.yaml", graph("validate_every: 2", "", "", "[id, image]"),
       "the `validation` input needs an image field and `label`"},
      {"loss.yaml", graph("validate_every: 2, select_metric: loss", "", "", "[id, image]"), "needs one of {label, pair_labels}"},
  };
  for (const Case& c : cases) {
    auto r = run_graph(dir, c.name, c.yaml, "validate");
    INFO(c.name << ": " << r.out << r.err);
    CHECK(r.exit_code == 2);
    const std::string all = r.out + r.err;
    CHECK_THAT(all, Catch::Contains(c.said));
    CHECK_THAT(all, Catch::Contains(c.name + ":"));  // located in the graph file
    CHECK_THAT(all, Catch::Contains("train"));
  }
}
