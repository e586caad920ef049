// Conditional Similarity Networks (plugins/crowd/cen/csn.cpp):
//  - crowd.csn_loss equals a hand computation on two triplets (hinge, embedding norm, mask L1);
//  - crowd.triplets with `truth` labels each triplet with its submission's attribute (checked in
//    Python against truth.csv and the annotations) and leaves out submissions that used none;
//  - training lowers the loss, and crowd.cen_score's distances equal ||m_c ⊙ (x_i - x_j)|| computed
//    in NumPy from the final checkpoint, with c each pair's attribute in truth.csv;
//  - a CSN scored without `truth`, a CSN loss on another model and a condition outside the masks
//    fail naming what is wrong.
#include <catch2/catch.hpp>

#include <cmath>

#include "cli.hpp"
#include "crowd_types.hpp"
#include "tiny_crowd.hpp"

using namespace embedflow;
using namespace embedflow::test;
namespace fs = std::filesystem;

namespace {
Array rows(std::vector<float> v) { return Array::from_vector<float>({2, 2}, std::move(v)); }
}  // namespace

TEST_CASE("crowd.csn_loss equals a hand computation") {
  Record b;
  b.set("masks", rows({1, 0.5f, 0, 1}));
  b.set("x_a", rows({0, 0, 1, 1}));
  b.set("x_p", rows({1, 0, 1, 2}));
  b.set("x_n", rows({0, 2, 3, 1}));
  const double h = 0.3, le = 0.01, lm = 0.02;
  // Triplet 1: m (a - p) = (-1, 0), m (a - n) = (0, -1): hinge h. Triplet 2: (0, -1) and (0, 0): 1 + h.
  const double triplet = (h + 1 + h) / 2;
  const double norms = (std::sqrt(2.0) + std::sqrt(6.0) + std::sqrt(14.0)) / std::sqrt(2.0);
  const double masks = 3 * (1.5 + 1.0) / 2;
  Value::Map m{{"type", Value::string("crowd.csn_loss")}, {"margin", Value::number(h)}, {"embedding_norm", Value::number(le)},
               {"mask_l1", Value::number(lm)}};
  CHECK(crowd::evaluate_csn_loss(Value::map(std::move(m)), b) == Approx(triplet + le * norms + lm * masks).epsilon(1e-6));
}

#ifdef GEN_CROWD
TEST_CASE("CSN: triplets labelled from truth.csv; training lowers the loss; scored distances follow the checkpoint's masks") {
  const fs::path data = tiny_crowd();
  const fs::path dir = scratch_dir("csn");
  const std::string csv = (data / "annotations.csv").string();
  auto graph = [&](const std::string& model, const std::string& loss, const std::string& score) {
    return "seed: 5\nnodes:\n"
           "  read: {type: crowd.grid_reader, params: {path: " + csv + ", split: train, names: ids, batch_size: 1104}}\n"
           "  test: {type: crowd.grid_reader, params: {path: " + csv + ", split: test, names: ids, batch_size: 1104}}\n"
           "  trip: {type: crowd.triplets, params: {per_submission: 30, batch_size: 128, epochs: 3, truth: " + data.string() + "}}\n"
           "  train: {type: torch.train, params: {model: " + model + ", loss: " + loss + ", optimizer: {type: torch.adam, lr: 0.01},"
           " threads: 1, log_every: 10, log_dir: " + (dir / "log").string() + ", checkpoint_dir: " + (dir / "ckpt").string() + "}}\n"
           "  score: {type: crowd.cen_score, params: {threads: 1" + score + "}}\n"
           "  save_trip: {type: io.hdf5_writer, params: {path: " + (dir / "triplets.h5").string() + "}}\n"
           "  save: {type: io.hdf5_writer, params: {path: " + (dir / "test.h5").string() + "}}\n"
           "edges: [read.annotations -> trip.annotations, trip.out -> train.in, trip.out -> save_trip.in, train.model -> score.model,"
           " test.out -> score.pairs, score.pairs -> save.in]\n";
  };
  const std::string csn = "{type: crowd.csn, images: 600, conditions: 5, embedding_dim: 6}";
  run_graph_file_ok(dir, "csn.yaml", graph(csn, "{type: crowd.csn_loss}", ", truth: " + data.string()));
  const auto l = losses(dir / "log" / "metrics.csv");
  REQUIRE(l.size() >= 5);
  CHECK(l.back() < 0.8 * l.front());
  check_python(R"PY(
import sys, csv, glob, h5py, numpy as np, torch
d, data, ckpt = sys.argv[1:4]
def check(c, *m):
    if not c:
        print("FAIL:", *m); sys.exit(1)
truth = {(int(r["worker"]), int(r["grid"])): int(r["attribute"]) for r in csv.DictReader(open(f"{data}/truth.csv"))}
subs = {}
for r in csv.DictReader(open(f"{data}/annotations.csv")):
    subs.setdefault((int(r["worker"]), int(r["grid"])), {})[int(r["image"])] = int(r["cluster"])
# Every triplet lies in one submission clustered by its condition: anchor and positive together,
# the negative apart; submissions that used no attribute give none.
t = h5py.File(f"{d}/triplets.h5")["data"]
a, p, n, c = (t[k][:] for k in ("anchor_id", "positive_id", "negative_id", "condition"))
check(c.min() >= 0 and c.max() <= 4, "conditions", c.min(), c.max())
by_attr = {}
for key, cl in subs.items():
    by_attr.setdefault(truth[key], []).append(cl)
for i in range(0, len(a), 7):
    ok = any(x.get(a[i], -1) >= 0 and x.get(a[i]) == x.get(p[i]) and x.get(n[i], -1) not in (-1, x[a[i]]) for x in by_attr.get(c[i], []))
    check(ok, "triplet", i, a[i], p[i], n[i], c[i])
# Scored distances: ||relu(mask[c]) * (x_a - x_b)|| with c the pair's attribute, the mean mask for -1.
m = torch.jit.load(sorted(glob.glob(ckpt + "/step-*.pt"))[-1])
names = m.model.names.split("\n")[:-1]
w = {nm: getattr(m.model, f"t{i}").double().numpy() for i, nm in enumerate(names)}
x, masks = w["image.weight"], np.maximum(w["mask.weight"], 0)
masks = np.vstack([masks, masks.mean(0)])
s = h5py.File(f"{d}/test.h5")["data"]
cond = np.array([truth[(wk, g)] for wk, g in zip(s["worker"][:].tolist(), s["grid"][:].tolist())])
check((cond >= 0).any(), "test pairs with an attribute")
ref = np.linalg.norm(masks[cond] * (x[s["a_id"][:]] - x[s["b_id"][:]]), axis=1)
err = np.abs(ref - s["distance"][:]).max()
check(err < 1e-4, "distances", err)
print("ok", len(a), "triplets; distance error", err)
)PY", {dir.string(), data.string(), (dir / "ckpt").string()});

  // A CSN scored without the conditions, a CSN loss on a plain table and masks for too few
  // conditions are errors that say so.
  Result r = run_graph_file(dir, "no_truth.yaml", graph(csn, "{type: crowd.csn_loss}", ""));
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.err, Catch::Contains("crowd.csn model") && Catch::Contains("needs `truth`"));
  r = run_graph_file(dir, "table.yaml", graph("{type: crowd.id_table, images: 600, embedding_dim: 6}", "{type: crowd.csn_loss}", ""));
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("crowd.csn_loss needs a crowd.csn model"));
  r = run_graph_file(dir, "few.yaml", graph("{type: crowd.csn, images: 600, conditions: 2}", "{type: crowd.csn_loss}", ", truth: " + data.string()));
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("is outside -1..1 (raise `conditions`)"));
}
#endif
