// The crowd family in whole graphs run in process (GraphRunner), and the simulator as a program:
//  - crowd.grid_reader's pairs, grids and annotations tables equal an independent Python
//    expansion of the annotation CSV; the JSON file gives the same stream;
//  - splits: grid-disjoint (and worker-disjoint with split_by: worker), the test part is
//    round(0.15 G) whole grids, nested train fractions; shuffles are seeded;
//  - gen_crowd: identical output for a seed, different for another; simulator statistics checked
//    with NumPy / scikit-learn (noisy workers' clusterings unrelated to attributes, biased workers
//    use their preferred attribute, attribute use follows in-grid variance, which a run with
//    --context-strength 0 does not show);
//  - its images read back by io.hdf5_reader and image.files_reader (PNG decoded by PIL as the
//    oracle), Fashion-MNIST attributes recomputed from the IDX files;
//  - graphs/crowd_data.yaml runs; malformed files stop a run with file:line; bad parameters are
//    validation errors; node examples run as pasted from `embedflow inspect` (through the CLI).
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>

#include "harness.hpp"

using namespace embedflow::test;
namespace fs = std::filesystem;

namespace {

#ifdef GEN_CROWD
Result gen(const fs::path& out, std::vector<std::string> args) {
  std::vector<std::string> argv{GEN_CROWD, "--out", out.string()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv);
}

// One small simulated crowd shared by the reader tests: 800 shapes, 60 workers, 400 grids.
const fs::path& small_crowd() {
  static fs::path dir;
  if (dir.empty()) {
    dir = scratch_dir("crowd_small");
    const Result r = gen(dir, {"--images", "800", "--workers", "60", "--grids", "400", "--seed", "3"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
  }
  return dir;
}
#endif

const char* kPython = R"PY(
import csv, json, sys
import numpy as np, h5py
def check(cond, *msg):
    if not cond:
        print("FAIL:", *msg)
        sys.exit(1)
def annotations(path):
    """{(worker, grid): (images, clusters)} in file order, from the CSV with the csv module."""
    out = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            key = (int(row["worker"]), int(row["grid"]))
            c = row["cluster"].strip()
            out.setdefault(key, ([], []))
            out[key][0].append(int(row["image"])); out[key][1].append(int(c) if c else -1)
    return out
def expand(anns, keys):
    rows = []
    for (w, g) in keys:
        im, cl = anns[(w, g)]
        for p in range(len(im)):
            for q in range(p + 1, len(im)):
                if cl[p] >= 0 and cl[q] >= 0:
                    rows.append((w, g, im[p], im[q], 1.0 if cl[p] == cl[q] else 0.0))
    return rows
def pairs(path, port="data"):
    d = h5py.File(path, "r")[port]
    return list(zip(d["worker"][:].tolist(), d["grid"][:].tolist(), d["a_id"][:].tolist(), d["b_id"][:].tolist(),
                    d["pair_label"][:].tolist()))
)PY";

// Runs a graph that must succeed; a failure fails the test with its message.
GraphRun run_ok(const std::string& yaml, const std::vector<std::string>& sets = {}, int threads = 0) {
  GraphRun r = GraphRunner(plugins(), yaml).threads(threads).run(sets);
  INFO(r.message());
  REQUIRE(r.exit_code == 0);
  return r;
}

// A reader graph writing the pairs, grids and annotations ports to out/{pairs,grids,anns}.h5.
std::string reader_graph(const fs::path& out, const std::string& params) {
  return "seed: 5\nnodes:\n"
         "  read:  {type: crowd.grid_reader, params: {" + params + "}}\n"
         "  pairs: {type: io.hdf5_writer, params: {path: " + (out / "pairs.h5").string() + "}}\n"
         "  grids: {type: io.hdf5_writer, params: {path: " + (out / "grids.h5").string() + "}}\n"
         "  anns:  {type: io.hdf5_writer, params: {path: " + (out / "anns.h5").string() + "}}\n"
         "edges: [read.out -> pairs.in, read.grids -> grids.in, read.annotations -> anns.in]\n";
}

}  // namespace

TEST_CASE("grid_reader on the tiny file: pairs, unassigned images, CSV = JSON, scalar records") {
  const fs::path dir = scratch_dir("crowd_tiny");
  for (const char* name : {"tiny.csv", "tiny.json"}) {
    const fs::path out = dir / name;
    fs::create_directories(out);
    const std::string file = source_dir() + "/tests/crowd/data/" + name;
    run_ok(reader_graph(out, "path: " + file + ", grid_size: 4, batch_size: 5"));
  }
  // Single-pair records (batch_size 0) carry the same values.
  const fs::path single = dir / "single";
  fs::create_directories(single);
  run_ok(reader_graph(single, "path: " + source_dir() + "/tests/crowd/data/tiny.csv, grid_size: 4, batch_size: 0"));
  check_python(std::string(kPython) + R"PY(
d = sys.argv[1]; tiny = sys.argv[2]
anns = annotations(tiny)
want = expand(anns, list(anns))
check(len(want) == 21, len(want))
a = pairs(f"{d}/tiny.csv/pairs.h5"); b = pairs(f"{d}/tiny.json/pairs.h5"); c = pairs(f"{d}/single/pairs.h5")
check(a == want, "csv", a, want)
check(b == want, "json", b)
check(c == want, "single", c)
check(list(h5py.File(f"{d}/tiny.csv/pairs.h5")["data"]["record_sizes"][:]) == [5, 5, 5, 5, 1], "batches")
check(h5py.File(f"{d}/single/pairs.h5")["data"].attrs["layout"] == "records", "single records")
g = h5py.File(f"{d}/tiny.csv/grids.h5")["data"]
check(g["grid"][:].tolist() == [0, 1, 2, 3], g["grid"][:])
check(g["members"][:].tolist() == [[10, 11, 12, 13], [12, 14, 15, 16], [10, 16, 17, 18], [11, 13, 15, 17]], g["members"][:])
n = h5py.File(f"{d}/tiny.csv/anns.h5")["data"]
check(n["clusters"][3].tolist() == [0, 1, 1, -1], n["clusters"][:])
check(n["worker"][:].tolist() == [0, 1, 0, 1])
print("ok")
)PY", {dir.string(), source_dir() + "/tests/crowd/data/tiny.csv"});
}

#ifdef GEN_CROWD

TEST_CASE("grid_reader pairs equal a Python expansion of gen_crowd's annotations; splits are disjoint") {
  const fs::path data = small_crowd();
  const std::string csv = (data / "annotations.csv").string();
  const fs::path dir = scratch_dir("crowd_reader");
  struct Run {
    const char* name;
    std::string params;
  };
  const std::vector<Run> runs{
      {"all", "path: " + csv + ", batch_size: 1000"},
      {"json", "path: " + (data / "annotations.json").string() + ", batch_size: 1000"},
      {"train", "path: " + csv + ", split: train, batch_size: 1000"},
      {"test", "path: " + csv + ", split: test, batch_size: 1000"},
      {"train_half", "path: " + csv + ", split: train, train_fraction: 0.5, batch_size: 1000"},
      {"test_seed9", "path: " + csv + ", split: test, split_seed: 9, batch_size: 1000"},
      {"wtrain", "path: " + csv + ", split: train, split_by: worker, batch_size: 1000"},
      {"wtest", "path: " + csv + ", split: test, split_by: worker, batch_size: 1000"},
  };
  for (const Run& run : runs) {
    const fs::path out = dir / run.name;
    fs::create_directories(out);
    GraphRun r = GraphRunner(plugins(), reader_graph(out, run.params)).run();
    INFO(run.name << ": " << r.message());
    REQUIRE(r.exit_code == 0);
  }
  check_python(std::string(kPython) + R"PY(
d, data = sys.argv[1:3]
anns = annotations(f"{data}/annotations.csv")
keys = list(anns)
G = len({g for _, g in keys})
check(G == 400, G)
for (w, g), (im, cl) in anns.items():
    check(len(im) == 24, "S", w, g)
allp = pairs(f"{d}/all/pairs.h5")
check(allp == expand(anns, keys), "all pairs differ from the expansion")
check(len(allp) == 276 * len(keys), len(allp))
check(pairs(f"{d}/json/pairs.h5") == allp, "json differs from csv")
# Grid split: disjoint, whole grids, round(0.15 G) test grids, and the pairs are those grids' pairs.
tr, te = pairs(f"{d}/train/pairs.h5"), pairs(f"{d}/test/pairs.h5")
gtr, gte = {p[1] for p in tr}, {p[1] for p in te}
check(not (gtr & gte), "grid overlap")
check(len(gte) == round(0.15 * G), len(gte))
check(gtr | gte == {g for _, g in keys}, "union")
check(te == expand(anns, [k for k in keys if k[1] in gte]), "test pairs")
check(tr == expand(anns, [k for k in keys if k[1] in gtr]), "train pairs")
gt = h5py.File(f"{d}/test/grids.h5")["data"]
check(set(gt["grid"][:].tolist()) == gte, "test grids table")
for g, m in zip(gt["grid"][:].tolist(), gt["members"][:].tolist()):
    w = [k for k in keys if k[1] == g][0]
    check(m == anns[w][0], "members of grid", g)
# train_fraction 0.5: half of the train grids, all inside train.
half = {p[1] for p in pairs(f"{d}/train_half/pairs.h5")}
check(len(half) == round(0.5 * len(gtr)) and half <= gtr, len(half))
# Another split seed: another test set of the same size.
g9 = {p[1] for p in pairs(f"{d}/test_seed9/pairs.h5")}
check(len(g9) == len(gte) and g9 != gte, "seed 9")
# Worker split: worker- and grid-disjoint.
wtr, wte = pairs(f"{d}/wtrain/pairs.h5"), pairs(f"{d}/wtest/pairs.h5")
check(not ({p[0] for p in wtr} & {p[0] for p in wte}), "worker overlap")
check(not ({p[1] for p in wtr} & {p[1] for p in wte}), "grid overlap (worker split)")
W = len({w for w, _ in keys})
check(len({p[0] for p in wte}) == round(0.15 * W), "test workers", len({p[0] for p in wte}), W)
check(0.05 < len(wte) / len(allp) < 0.3, "worker test share", len(wte) / len(allp))
print("ok")
)PY", {dir.string(), data.string()});
}

TEST_CASE("shuffled pairs are seeded by the graph seed and are a permutation") {
  const std::string csv = (small_crowd() / "annotations.csv").string();
  const fs::path dir = scratch_dir("crowd_shuffle");
  struct Run {
    std::string name;
    std::vector<std::string> sets;
    int threads;
  };
  const std::vector<Run> runs{{"a", {}, 0}, {"b", {}, 0}, {"c", {"seed=6"}, 0}, {"t2", {}, 2}};
  for (const auto& [name, sets, threads] : runs) {
    const fs::path out = dir / name;
    fs::create_directories(out);
    run_ok(reader_graph(out, "path: " + csv + ", split: train, shuffle: true, epochs: 2, batch_size: 500"), sets, threads);
  }
  check_python(std::string(kPython) + R"PY(
d = sys.argv[1]
a, b, c, t = (pairs(f"{d}/{x}/pairs.h5") for x in "a b c t2".split())
check(a == b, "same seed differs")
check(a == t, "--threads 2 differs")
check(a != c, "another seed gives the same order")
check(sorted(a) == sorted(c), "not a permutation")
e = h5py.File(f"{d}/a/pairs.h5")["data"]["epoch"][:]
n = len(a) // 2
check((e[:n] == 0).all() and (e[n:] == 1).all(), "epochs")
check(a[:n] != a[n:] and sorted(a[:n]) == sorted(a[n:]), "epochs reshuffle")
print("ok")
)PY", {dir.string()});
}

TEST_CASE("gen_crowd is deterministic by seed") {
  const fs::path dir = scratch_dir("crowd_gen_determinism");
  const std::vector<std::string> args{"--images", "300", "--workers", "30", "--grids", "120", "--workers-per-grid", "2"};
  auto with_seed = [&](const char* seed) {
    std::vector<std::string> a = args;
    a.push_back("--seed");
    a.push_back(seed);
    return a;
  };
  for (const auto& [name, seed] : {std::pair{"a", "4"}, {"b", "4"}, {"c", "5"}}) {
    Result r = gen(dir / name, with_seed(seed));
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
  }
  for (const char* f : {"annotations.csv", "annotations.json", "truth.csv", "truth.json", "workers.csv", "grids.csv",
                        "images.csv", "attributes.json", "images/000123.png"}) {
    INFO(f);
    CHECK(read_file(dir / "a" / f) == read_file(dir / "b" / f));
  }
  CHECK(read_file(dir / "a" / "annotations.csv") != read_file(dir / "c" / "annotations.csv"));
  CHECK(read_file(dir / "a" / "images/000123.png") != read_file(dir / "c" / "images/000123.png"));
  // images.h5 records its creation time, so its datasets are compared.
  check_python(R"PY(
import sys, h5py, numpy as np
d = sys.argv[1]
a, b, c = (h5py.File(f"{d}/{x}/images.h5", "r")["images"] for x in "abc")
for k in a:
    if not np.array_equal(a[k][:], b[k][:]): print("FAIL", k); sys.exit(1)
if np.array_equal(a["image"][:], c["image"][:]): print("FAIL seed"); sys.exit(1)
# Two distinct workers per grid, and every worker does at least min(10, 240 / 30) submissions.
import csv, collections
subs = {(int(r["worker"]), int(r["grid"])) for r in csv.DictReader(open(f"{d}/a/annotations.csv"))}
per_grid = collections.Counter(g for _, g in subs); per_worker = collections.Counter(w for w, _ in subs)
if len(subs) != 240 or set(per_grid.values()) != {2} or len(per_grid) != 120: print("FAIL workers per grid", per_grid); sys.exit(1)
if min(per_worker.values()) < 8 or len(per_worker) != 30: print("FAIL per worker", per_worker); sys.exit(1)
print("ok")
)PY", {dir.string()});
}

TEST_CASE("gen_crowd --open-fraction: open-minded workers get flat biases and leave the others' draws alone") {
  const fs::path dir = scratch_dir("crowd_open");
  const std::vector<std::string> common{"--images", "600", "--workers", "50", "--grids", "300", "--no-png", "--no-h5", "--seed", "6"};
  std::vector<std::string> open = common;
  open.insert(open.end(), {"--open-fraction", "0.4"});
  Result r1 = gen(dir / "base", common), r2 = gen(dir / "open", open);
  INFO(r1.err << r2.err);
  REQUIRE(r1.exit_code == 0);
  REQUIRE(r2.exit_code == 0);
  check_python(R"PY(
import sys, csv, numpy as np
d = sys.argv[1]
base, op = ({int(r["worker"]): r for r in csv.DictReader(open(f"{d}/{x}/workers.csv"))} for x in ("base", "open"))
bias = lambda r: np.array([float(v) for k, v in r.items() if k.startswith("bias_")])
opened = [w for w, r in op.items() if r["open"] == "1"]
assert len(opened) == 20, len(opened)                                     # round(0.4 * 50)
assert all(op[w]["noisy"] == "0" for w in opened)                          # drawn from the careful workers
assert all(r["open"] == "0" for r in base.values())
assert [r["noisy"] for r in base.values()] == [r["noisy"] for r in op.values()]
for w, r in op.items():                                                    # everyone else: the same draws
    if w not in opened:
        assert np.array_equal(bias(r), bias(base[w])) and r["coarseness"] == base[w]["coarseness"], w
peak_open = np.mean([bias(op[w]).max() for w in opened])
peak_biased = np.mean([bias(r).max() for w, r in op.items() if r["open"] == "0" and r["noisy"] == "0"])
assert peak_open < 0.55 and peak_biased > 0.8, (peak_open, peak_biased)   # Dirichlet(5) vs Dirichlet(0.05) over 5 attributes
print("ok", peak_open, peak_biased)
)PY", {dir.string()});
  for (const auto& bad : std::vector<std::vector<std::string>>{{"--open-fraction", "1.5"},
                                                               {"--open-fraction", "0.95", "--noisy-fraction", "0.1"},
                                                               {"--open-concentration", "0"}}) {
    Result r = gen(dir / "bad", bad);
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.err, Catch::Contains(bad[0]) || Catch::Contains("--noisy-fraction + --open-fraction"));
  }
}

TEST_CASE("simulator statistics: noise, worker bias and context sway") {
  const fs::path dir = scratch_dir("crowd_stats");
  const std::vector<std::string> common{"--images", "3000", "--workers", "100", "--grids", "2000", "--no-png", "--seed", "11"};
  std::vector<std::string> flat = common;
  flat.insert(flat.end(), {"--context-strength", "0"});
  Result r1 = gen(dir / "ctx", common);
  Result r2 = gen(dir / "flat", flat);
  INFO(r1.err << r2.err);
  REQUIRE(r1.exit_code == 0);
  REQUIRE(r2.exit_code == 0);
  // Everything is recomputed from images.h5 and the annotation CSV; truth.csv and workers.csv
  // supply only what cannot be observed (which submissions are lapses, the bias vectors).
  check_python(std::string(kPython) + R"PY(
from sklearn.metrics import adjusted_rand_score as ari
def salience(v, n):
    p = np.bincount(v, minlength=n) / len(v)
    return (1 - (p ** 2).sum()) / (1 - 1 / n)
def stats(d):
    f = h5py.File(f"{d}/images.h5", "r")["images"]
    attrs = json.load(open(f"{d}/attributes.json"))["attributes"]
    names = [a["name"] for a in attrs]; nvals = [len(a["values"]) for a in attrs]; K = len(names)
    vals = np.stack([f[n][:] for n in names], 1)
    row = {int(i): k for k, i in enumerate(f["id"][:])}
    anns = annotations(f"{d}/annotations.csv")
    truth = {(int(r["worker"]), int(r["grid"])): int(r["attribute"]) for r in csv.DictReader(open(f"{d}/truth.csv"))}
    workers = list(csv.DictReader(open(f"{d}/workers.csv")))
    noisy = {int(w["worker"]) for w in workers if w["noisy"] == "1"}
    bias = np.array([[float(w["bias_" + n]) for n in names] for w in workers])
    grids = {int(r["grid"]): [float(r["salience_" + n]) for n in names] for r in csv.DictReader(open(f"{d}/grids.csv"))}
    noisy_ari, used_ari, agree, B, S, U, W = [], [], [], [], [], [], []
    for (w, g), (im, cl) in anns.items():
        v = vals[[row[i] for i in im]]
        s = np.array([salience(v[:, k], nvals[k]) for k in range(K)])
        check(np.allclose(s, grids[g], atol=1e-9), "grids.csv salience", g, s, grids[g])
        # An attribute that is constant in the grid cannot be compared with a clustering.
        score = [ari(v[:, k], cl) if s[k] > 0 else -1.0 for k in range(K)]
        if w in noisy:
            check(truth[(w, g)] == -1, "noisy worker with an attribute")
            noisy_ari += [score[k] for k in range(K) if s[k] > 0]
            continue
        if truth[(w, g)] < 0: continue  # a lapse: a random clustering by a careful worker
        a = int(np.argmax(score))  # the attribute the clustering follows, inferred
        agree.append(a == truth[(w, g)]); used_ari.append(score[a])
        B.append(bias[w]); S.append(s); U.append(a); W.append(w)
    B, S, U, W = np.array(B), np.array(S), np.array(U), np.array(W)
    # Worker bias: how often each careful worker used each attribute against its bias vector.
    use = np.zeros_like(bias); np.add.at(use, (W, U), 1)
    careful = [w for w in range(len(bias)) if w not in noisy and use[w].sum() >= 8]
    freq = use[careful] / use[careful].sum(1, keepdims=True)
    pref = freq[np.arange(len(careful)), bias[careful].argmax(1)]
    # Context sway: the maximum-likelihood context strength t of P(k) ~ bias_k exp(t s_k) over the
    # attributes that vary in the grid, and the used attribute's salience minus its expectation
    # under the bias alone (0 in expectation when t = 0).
    def loglik(t):
        logit = np.where(S > 0, np.log(np.maximum(B, 1e-300)) + t * S, -np.inf)
        logit -= logit.max(1, keepdims=True)
        lp = logit - np.log(np.exp(logit).sum(1, keepdims=True))
        return lp[np.arange(len(U)), U].sum()
    ts = np.arange(0, 15.01, 0.1)
    tau = float(ts[int(np.argmax([loglik(t) for t in ts]))])
    P0 = np.where(S > 0, B, 0); P0 /= P0.sum(1, keepdims=True)
    lift = S[np.arange(len(U)), U] - (P0 * S).sum(1)
    return dict(noisy_ari=float(np.mean(noisy_ari)), noisy_n=len(noisy_ari), used_ari=float(np.mean(used_ari)),
                agree=float(np.mean(agree)), pref=float(pref.mean()), rest=float(((1 - pref) / (K - 1)).mean()),
                bias_corr=float(np.corrcoef(bias[careful].ravel(), freq.ravel())[0, 1]), tau=tau,
                lift=float(lift.mean()), lift_se=float(lift.std() / np.sqrt(len(lift))))
ctx, flat = stats(sys.argv[1]), stats(sys.argv[2])
print("context strength 6 (default):", ctx); print("context strength 0:", flat)
check(ctx["noisy_n"] > 300, "few noisy comparisons", ctx["noisy_n"])
check(abs(ctx["noisy_ari"]) < 0.02, "noisy clusterings follow attributes", ctx["noisy_ari"])
check(ctx["agree"] > 0.97, "the inferred attribute is not the one truth.csv names", ctx["agree"])
check(ctx["used_ari"] > 0.6, "clusterings do not follow the used attribute", ctx["used_ari"])
check(ctx["pref"] > 2 * ctx["rest"], "preferred attribute not used more often", ctx["pref"], ctx["rest"])
check(ctx["bias_corr"] > 0.5, "use does not follow bias", ctx["bias_corr"])
check(abs(ctx["tau"] - 6) <= 1.5, "context strength not recovered", ctx["tau"])
check(flat["tau"] <= 0.5, "context sway without context strength", flat["tau"])
check(ctx["lift"] > 5 * ctx["lift_se"], "used attributes are not the more variable ones", ctx["lift"], ctx["lift_se"])
check(abs(flat["lift"]) < 4 * flat["lift_se"], "variance lift without context strength", flat["lift"], flat["lift_se"])
print("ok")
)PY", {(dir / "ctx").string(), (dir / "flat").string()});
}

#ifdef CROWD_HAVE_IMAGE_IO
TEST_CASE("gen_crowd images are read by io.hdf5_reader and image.files_reader") {
  const fs::path data = small_crowd();
  const fs::path dir = scratch_dir("crowd_images");
  const std::string yaml =
      "nodes:\n"
      "  h5:    {type: io.hdf5_reader, params: {path: " + (data / "images.h5").string() + "}}\n"
      "  png:   {type: image.files_reader, params: {csv: " + (data / "images.csv").string() + ", mode: color}}\n"
      "  out1:  {type: io.hdf5_writer, params: {path: " + (dir / "h5.h5").string() + "}}\n"
      "  out2:  {type: io.hdf5_writer, params: {path: " + (dir / "png.h5").string() + "}}\n"
      "edges: [h5.out -> out1.in, png.out -> out2.in]\n";
  run_ok(yaml);
  Result fm = gen(dir / "fmnist", {"--dataset", "fashion-mnist", "--images", "600", "--workers", "20", "--grids", "50",
                                   "--fmnist-split", "test", "--no-png"});
  INFO(fm.err);
  REQUIRE(fm.exit_code == 0);
  check_python(std::string(kPython) + R"PY(
import gzip
from PIL import Image
d, data = sys.argv[1:3]
a = h5py.File(f"{d}/h5.h5")["data"]; b = h5py.File(f"{d}/png.h5")["data"]
rows = list(csv.DictReader(open(f"{data}/images.csv")))
check(len(rows) == 800 and a["id"].shape == (800,) and b["id"].shape == (800,), "counts")
check(a["image"].shape == (800, 32, 32, 3) and b["image"].shape == (800, 32, 32, 3), a["image"].shape, b["image"].shape)
check((a["id"][:] == b["id"][:]).all() and (a["label"][:] == b["label"][:]).all(), "ids/labels")
check((a["image"][:] == b["image"][:]).all(), "PNG and HDF5 pixels differ")
for k in (0, 17, 799):
    png = np.asarray(Image.open(f"{data}/{rows[k]['path']}").convert("RGB"))
    check((png == a["image"][k]).all(), "PIL decode differs", k)
for n in ("shape", "colour", "size", "orientation", "fill"):
    check([int(r[n]) for r in rows] == a[n][:].tolist(), "attribute", n)
check((a["label"][:] == a["shape"][:]).all(), "label is the shape")
# Colour attribute against the pixels: the dominant channel of the drawn shape.
img = a["image"][:].astype(int)
mask = np.abs(img - 205).max(3) > 60
mean = np.array([img[i][mask[i]].mean(0) for i in range(len(img))])
red, green, blue, yellow = (a["colour"][:] == c for c in range(4))
check((mean[red, 0] > mean[red, 2] + 50).mean() > 0.95, "red")
check((mean[blue, 2] > mean[blue, 0] + 50).mean() > 0.95, "blue")
check((mean[yellow, 0] + mean[yellow, 1] > 2 * mean[yellow, 2] + 100).mean() > 0.95, "yellow")
# Fashion-MNIST: pixels, classes and tercile attributes recomputed from the IDX files.
with gzip.open("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz") as f: X = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)[:600]
with gzip.open("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz") as f: Y = np.frombuffer(f.read(), np.uint8, offset=8)[:600]
m = h5py.File(f"{d}/fmnist/images.h5")["images"]
check((m["image"][:, :, :, 0] == X).all() and (m["id"][:] == np.arange(600)).all(), "fmnist pixels/ids")
check((m["class"][:] == Y).all() and (m["label"][:] == Y).all(), "fmnist classes")
ink = X > 32
bright = np.where(ink.sum((1, 2)) > 0, (X * ink).sum((1, 2)) / np.maximum(ink.sum((1, 2)), 1), 0)
area = ink.mean((1, 2))
def terc(x):
    s = np.sort(x); t1, t2 = s[len(s) // 3], s[2 * len(s) // 3]
    return np.where(x < t1, 0, np.where(x < t2, 1, 2))
check((m["brightness"][:] == terc(bright)).all(), "brightness terciles")
check((m["ink"][:] == terc(area)).all(), "ink terciles")
check(sorted(np.bincount(m["ink"][:]).tolist())[0] > 150, "ink bins unbalanced", np.bincount(m["ink"][:]))
print("ok")
)PY", {dir.string(), data.string()});
}

TEST_CASE("image.pair_join passes the reader's worker, grid, epoch and members through") {
  const fs::path data = small_crowd();
  const fs::path dir = scratch_dir("crowd_join");
  const std::string joined = (dir / "joined.h5").string(), plain = (dir / "plain.h5").string();
  const std::string reader = "{type: crowd.grid_reader, params: {path: " + (data / "annotations.csv").string() +
                             ", split: test, batch_size: 100, with_members: true, epochs: 2, NAMES}}";
  auto with = [&](const std::string& names) {
    std::string r = reader;
    r.replace(r.find("NAMES"), 5, names);
    return r;
  };
  run_ok("seed: 5\nnodes:\n  pairs: " + with("names: sampler") + "\n  plain: " + with("names: contract") + R"(
  images: {type: io.hdf5_reader, params: {path: )" + (data / "images.h5").string() + R"(}}
  table:  {type: image.collect}
  join:   {type: image.pair_join}
  save:   {type: io.hdf5_writer, params: {path: )" + joined + R"(}}
  save2:  {type: io.hdf5_writer, params: {path: )" + plain + R"(}}
edges: [pairs.out -> join.pairs, images.out -> table.in, table.out -> join.table, join.out -> save.in, plain.out -> save2.in]
)");
  check_python(std::string(kPython) + R"PY(
j = h5py.File(sys.argv[1], "r")["data"]; p = h5py.File(sys.argv[2], "r")["data"]
for k in ("worker", "grid", "epoch", "members", "a_id", "b_id", "pair_label"):
    check(k in j, "missing", k)
    check(np.array_equal(j[k][:], p[k][:]), "differs", k)
check(j["members"].shape[1] == 24, j["members"].shape)
check(set(j["epoch"][:].tolist()) == {0, 1}, "epochs")
check("anchor" not in j and "other" not in j and "label" not in j, "consumed fields leaked")
imgs = h5py.File(sys.argv[3], "r")["images"]
ids = imgs["id"][:]; pos = {int(i): n for n, i in enumerate(ids)}
a = j["a_image"][:50]; want = imgs["image"][:][[pos[int(i)] for i in j["a_id"][:50]]]
check(np.array_equal(a, want), "a_image rows")
print("ok")
)PY", {joined, plain, (data / "images.h5").string()});
}

TEST_CASE("graphs/crowd_data.yaml runs on gen_crowd output") {
  const fs::path data = small_crowd();
  const GraphRun r = GraphRunner::from_file(plugins(), source_dir() + "/graphs/crowd_data.yaml").run({"data=" + data.string()});
  INFO(r.out << r.message());
  REQUIRE(r.exit_code == 0);
  // 340 train grids of 276 pairs in batches of 64; the test reader's 60 grids one batch each.
  CHECK(r.out.find("count: 1467\n") != std::string::npos);
  CHECK(r.out.find("count: 60\n") != std::string::npos);
  CHECK(r.out.find("members: i64[340,24]") != std::string::npos);
}
#endif

#endif  // GEN_CROWD

namespace {

// Runs the example `inspect <type>` prints, as a user pasting it would, from the source tree;
// the example must be there and the run must succeed.
Result run_pasted_example(const std::string& type, const std::string& scratch) {
  Result r = run_cli({"inspect", type});
  REQUIRE(r.exit_code == 0);
  const auto at = r.out.find("Example:\n");
  REQUIRE(at != std::string::npos);
  const fs::path file = scratch_dir(scratch) / "example.yaml";
  write_file(file, r.out.substr(at + 9));
  Result run = run_process({"/bin/sh", "-c", "cd '" + source_dir() + "' && '" EMBEDFLOW_CLI "' run --quiet '" + file.string() + "'"});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  return run;
}

}  // namespace

TEST_CASE("crowd.triplets' example runs as pasted: triplets from one submission's clusters") {
  const Result run = run_pasted_example("crowd.triplets", "crowd_triplets_example");
  // tiny.csv: each of the 4 grids has a cluster of two or more and another cluster; 2 triplets
  // each = 8, in two batches of 4. Grid 0 clusters {10, 11} and {12, 13}: an anchor 12 there has
  // positive 13 and negative 10 or 11.
  CHECK(run.out.find("anchor_image: [") != std::string::npos);
  CHECK(std::count(run.out.begin(), run.out.end(), '\n') == 2);
}

TEST_CASE("crowd.grid_reader's example runs as pasted from the source tree") {
  const Result run = run_pasted_example("crowd.grid_reader", "crowd_example");
  // tiny.csv, test_fraction 0.25: three train grids, 6 + 6 + 3 pairs (grid 3 has an unassigned image).
  CHECK(run.out.find("pair_label: [0, 0, 1]") != std::string::npos);
  CHECK(std::count(run.out.begin(), run.out.end(), '\n') == 4);
}

TEST_CASE("malformed annotation files stop a run naming file:line; bad parameters fail validation") {
  const fs::path dir = scratch_dir("crowd_errors");
  write_file(dir / "bad.csv", "worker,grid,image,cluster\n0,0,1,0\n0,0,2,zero\n");
  const std::string sink = "  show: {type: core.sink}\nedges: [read.out -> show.in]\n";
  GraphRun r = GraphRunner(plugins(), "nodes:\n  read: {type: crowd.grid_reader, params: {path: " + (dir / "bad.csv").string() +
                                          ", grid_size: 0}}\n" + sink, "bad.yaml")
                   .run();
  CHECK(r.exit_code == 1);
  CHECK(r.error.find((dir / "bad.csv").string() + ":3: column 'cluster': 'zero' is not an integer") != std::string::npos);
  CHECK(r.error.find("node 'read'") != std::string::npos);

  write_file(dir / "bad.json", "{\"annotations\": [{\"worker\": 0, \"grid\": 0, \"images\": [1, 2], \"clusters\": [0, 1]},\n"
                               "  {\"worker\": 1, \"grid\": 0, \"images\": [1, 3], \"clusters\": [0, 1]}]}\n");
  r = GraphRunner(plugins(), "nodes:\n  read: {type: crowd.grid_reader, params: {path: " + (dir / "bad.json").string() +
                                 ", grid_size: 2}}\n" + sink, "bad_json.yaml")
          .run();
  CHECK(r.exit_code == 1);
  CHECK(r.error.find((dir / "bad.json").string() + ":2: grid 0 (worker 1) lists image 3") != std::string::npos);

  const std::string tiny = source_dir() + "/tests/crowd/data/tiny.csv";
  r = GraphRunner(plugins(), "nodes:\n  read: {type: crowd.grid_reader, params: {path: " + tiny +
                                 ", train_fraction: 0.5}}\n  miss: {type: crowd.grid_reader, params: {path: " +
                                 (dir / "missing.csv").string() + "}}\n  show: {type: core.sink}\n  show2: {type: core.sink}\n"
                                 "edges: [read.out -> show.in, miss.out -> show2.in]\n",
                  "v.yaml")
          .validate();
  CHECK(r.exit_code == 2);
  const std::string problems = r.problem_text();
  CHECK(problems.find("train_fraction applies to split: train only") != std::string::npos);
  CHECK(problems.find("missing.csv: no such annotation file") != std::string::npos);
  CHECK(problems.find("v.yaml:2:") != std::string::npos);
}
