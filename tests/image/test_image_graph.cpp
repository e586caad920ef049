// Augmenters in graphs run in the test's process: identical output for 1 and 2 threads and for a
// rerun with the same seed, different with another seed; each op changes the images as specified
// (numpy oracles on the IDX files); validation errors at load time; graphs/image_pipeline.yaml
// runs. The node types' examples are checked with every other family's, in
// tests/engine/test_examples.cpp.
#include <catch2/catch.hpp>

#include "image_test_util.hpp"

using namespace embedflow::test;
namespace fs = std::filesystem;

namespace {

// Every augmenter as its own node, then image.augment with the same list, on 3000 test images
// (per record for the single nodes, batches of 50 for augment).
std::string augment_graph(const fs::path& dir) {
  return R"(
seed: 21
nodes:
  images:  {type: image.idx_reader, params: {split: test, limit: 3000}}
  crop:    {type: image.random_resized_crop, params: {height: 24, width: 24, scale: [0.5, 1.0]}}
  flip:    {type: image.flip, params: {horizontal_p: 0.5, vertical_p: 0.2}}
  rotate:  {type: image.rotate, params: {degrees: [-20, 20]}}
  jitter:  {type: image.color_jitter, params: {brightness: 0.4, contrast: 0.4}}
  blur:    {type: image.gaussian_blur, params: {sigma: [0.1, 1.5], p: 0.5}}
  resize:  {type: image.resize, params: {height: 28, width: 28}}
  tensor:  {type: image.to_tensor}
  norm:    {type: image.normalize, params: {mean: [0.2860], std: [0.3530]}}
  save1:   {type: io.hdf5_writer, params: {path: )" + (dir / "chain.h5").string() + R"(}}
  batches: {type: image.idx_reader, params: {split: test, limit: 3000, batch_size: 50}}
  aug:     {type: image.augment, params: {ops: [{op: random_resized_crop, height: 24, width: 24, scale: [0.5, 1.0]},
                                                {op: flip, horizontal_p: 0.5, vertical_p: 0.2},
                                                {op: rotate, degrees: [-20, 20]},
                                                {op: color_jitter, brightness: 0.4, contrast: 0.4},
                                                {op: gaussian_blur, sigma: [0.1, 1.5], p: 0.5},
                                                {op: resize, height: 28, width: 28}, to_tensor,
                                                {op: normalize, mean: [0.2860], std: [0.3530]}]}}
  save2:   {type: io.hdf5_writer, params: {path: )" + (dir / "augment.h5").string() + R"(}}
edges: [images.out -> crop.in, crop.out -> flip.in, flip.out -> rotate.in, rotate.out -> jitter.in,
        jitter.out -> blur.in, blur.out -> resize.in, resize.out -> tensor.in, tensor.out -> norm.in,
        norm.out -> save1.in, batches.out -> aug.in, aug.out -> save2.in]
)";
}

}  // namespace

TEST_CASE("augmenters are deterministic by seed and identical for --threads 1 and 2") {
  std::vector<fs::path> dirs;
  for (const char* name : {"image_aug_t1", "image_aug_t2", "image_aug_seed"}) dirs.push_back(scratch_dir(name));
  GraphRun t1 = run_graph("g.yaml", augment_graph(dirs[0]), 1);
  GraphRun t2 = run_graph("g.yaml", augment_graph(dirs[1]), 2);
  GraphRun s = run_graph("g.yaml", augment_graph(dirs[2]), 2, {"seed=22"});
  INFO(t1.message() << t2.message() << s.message());
  REQUIRE(t1.exit_code == 0);
  REQUIRE(t2.exit_code == 0);
  REQUIRE(s.exit_code == 0);
  run_numpy_oracle(R"PY(
images, labels = fashion("test")
a, b, c = sys.argv[1:4]
for name in ("chain", "augment"):
    x = h5py.File(f"{a}/{name}.h5", "r")["data"]; y = h5py.File(f"{b}/{name}.h5", "r")["data"]
    z = h5py.File(f"{c}/{name}.h5", "r")["data"]
    xi, yi, zi = x["image"][:], y["image"][:], z["image"][:]
    n = 3000
    check(xi.shape == (n, 1, 28, 28) or xi.shape == (n, 1, 28, 28), name, xi.shape)
    check(xi.dtype == np.float32, name, xi.dtype)
    check(np.array_equal(xi, yi), name, "differs between --threads 1 and 2")
    check(np.array_equal(x["id"][:], np.arange(n)), name, "order")
    check(not np.array_equal(xi, zi), name, "same output for another seed")
    # Normalised with the Fashion-MNIST statistics, the augmented images keep a mean near 0
    # (crops and rotations shift it a little) and differ from the plain normalised images.
    plain = ((images[:n] / 255.0) - 0.2860) / 0.3530
    check(abs(float(xi.mean())) < 0.3, name, "mean", float(xi.mean()))
    diff = np.abs(xi[:, 0] - plain).reshape(n, -1).max(axis=1)
    check((diff > 0.1).mean() > 0.95, name, "most images changed", (diff > 0.1).mean())
print("ok")
)PY", {dirs[0].string(), dirs[1].string(), dirs[2].string()});
}

TEST_CASE("flip p=1, to_tensor and normalize in a graph match numpy on the IDX images") {
  const fs::path dir = scratch_dir("image_ops_numpy");
  run_graph_ok("g.yaml", R"(
nodes:
  images: {type: image.idx_reader, params: {split: test, limit: 500, batch_size: 100}}
  flip:   {type: image.flip, params: {horizontal_p: 1.0}}
  keep:   {type: io.hdf5_writer, params: {path: )" + (dir / "flip.h5").string() + R"(}}
  vflip:  {type: image.augment, params: {ops: [{op: flip, horizontal_p: 0, vertical_p: 1}, to_tensor, {op: normalize, mean: 0.5, std: 0.25}]}}
  save:   {type: io.hdf5_writer, params: {path: )" + (dir / "vflip.h5").string() + R"(}}
  tensor: {type: image.to_tensor}
  norm:   {type: image.normalize, params: {mean: [0.2860], std: [0.3530]}}
  nsave:  {type: io.hdf5_writer, params: {path: )" + (dir / "norm.h5").string() + R"(}}
  single: {type: image.idx_reader, params: {split: test, limit: 500}}
  half:   {type: image.flip, params: {horizontal_p: 0.5}}
  hsave:  {type: io.hdf5_writer, params: {path: )" + (dir / "half.h5").string() + R"(}}
  resize: {type: image.resize, params: {height: 14, width: 14, interpolation: area}}
  rsave:  {type: io.hdf5_writer, params: {path: )" + (dir / "resize.h5").string() + R"(}}
edges: [images.out -> flip.in, flip.out -> keep.in, images.out -> vflip.in, vflip.out -> save.in,
        images.out -> tensor.in, tensor.out -> norm.in, norm.out -> nsave.in, images.out -> resize.in, resize.out -> rsave.in,
        single.out -> half.in, half.out -> hsave.in]
)", 2);
  run_numpy_oracle(R"PY(
images, labels = fashion("test")
d = sys.argv[1]
im = images[:500]
f = h5py.File(d + "/flip.h5", "r")["data"]["image"][:]
check(np.array_equal(f[:, :, :, 0], im[:, :, ::-1]), "horizontal flip")
v = h5py.File(d + "/vflip.h5", "r")["data"]["image"][:]
check(v.shape == (500, 1, 28, 28), v.shape)
check(np.allclose(v[:, 0], (im[:, ::-1, :] / 255.0 - 0.5) / 0.25, atol=1e-5), "vertical flip + to_tensor + normalize")
n = h5py.File(d + "/norm.h5", "r")["data"]["image"][:]
check(np.allclose(n[:, 0], (im / 255.0 - 0.2860) / 0.3530, atol=1e-5), "normalize")
# p = 0.5, seeded per record: each image is either mirrored or untouched, about half of each.
h = h5py.File(d + "/half.h5", "r")["data"]["image"][:, :, :, 0]
mirrored = np.all(h == im[:, :, ::-1], axis=(1, 2)); kept = np.all(h == im, axis=(1, 2))
symmetric = np.all(im == im[:, :, ::-1], axis=(1, 2))
check((mirrored | kept).all(), "flip p=0.5: other changes")
check(200 < int((mirrored & ~symmetric).sum()) < 300, "flip p=0.5 mirrored", int(mirrored.sum()))
rs = h5py.File(d + "/resize.h5", "r")["data"]["image"][:]
# INTER_AREA halving is the rounded mean of each 2x2 block.
blocks = im.reshape(500, 14, 2, 14, 2).astype(np.float64).mean(axis=(2, 4))
check(np.abs(rs[:, :, :, 0].astype(np.float64) - blocks).max() <= 0.5 + 1e-9, "area resize")
print("ok")
)PY", {dir.string()});
}

TEST_CASE("image graphs are validated at load: unknown ops, op parameters, dtypes and shapes") {
  const fs::path dir = scratch_dir("image_validate");
  write_file(dir / "g.yaml", R"(
nodes:
  images: {type: image.idx_reader, params: {split: test, limit: 10, classes: "4-2"}}
  aug:    {type: image.augment, params: {ops: [{op: flipp}, {op: rotate, degrees: [30]}, {op: normalize, mean: [0.5], std: [0.2]}, to_tensor]}}
  norm:   {type: image.normalize, params: {mean: [0.5], std: [0]}}
  blur:   {type: image.gaussian_blur, params: {kernel_size: 4, fields: [picture]}}
  count:  {type: core.sink, params: {mode: count}}
  c2:     {type: core.sink, params: {mode: count}}
edges: [images.out -> aug.in, aug.out -> count.in, images.out -> norm.in, norm.out -> blur.in, blur.out -> c2.in]
)");
  GraphRun r = GraphRunner::from_file(plugins(), (dir / "g.yaml").string()).run();
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.error, Catch::Contains("range '4-2' runs backwards"));
  CHECK_THAT(r.error, Catch::Contains("unknown op 'flipp'; did you mean 'flip'?"));
  CHECK_THAT(r.error, Catch::Contains("degrees must be [lo, hi]"));
  CHECK_THAT(r.error, Catch::Contains("ops[2]: normalize needs f32 images; put to_tensor before it"));
  CHECK_THAT(r.error, Catch::Contains("std values must be > 0"));
  CHECK_THAT(r.error, Catch::Contains("normalize needs f32 CHW tensors"));
  CHECK_THAT(r.error, Catch::Contains("kernel_size must be odd"));
  CHECK_THAT(r.error, Catch::Contains("input has no field 'picture'"));
  // The CLI's dot command refuses the invalid graph too.
  Result d = run_cli({"dot", (dir / "g.yaml").string()});
  CHECK(d.exit_code == 2);
}

TEST_CASE("graphs/image_pipeline.yaml runs: one epoch of classes 0-4 is 375 batches of 5 x 16") {
  GraphRunner g = GraphRunner::from_file(plugins(), source_dir() + "/graphs/image_pipeline.yaml");
  GraphRun r = g.threads(2).run({"batches.epochs=1"});
  INFO(r.message());
  REQUIRE(r.exit_code == 0);
  CHECK(r.out == "count: 375\n");
  GraphRun v = g.validate();
  CHECK(v.exit_code == 0);
}

TEST_CASE("core.epochs before an augmenter: every epoch sees freshly augmented pixels, and the same images") {
  // 200 images passed over three times (each pass in its own order), cropped, flipped and
  // jittered: the same image id in two passes must come out with different pixels (a trainer
  // replaying its first pass would see identical ones), every id once per pass.
  const fs::path dir = scratch_dir("image_epochs_aug");
  const std::string yaml = R"(
seed: 5
nodes:
  images: {type: image.idx_reader, params: {split: test, limit: 200}}
  passes: {type: core.epochs, params: {epochs: 3}}
  aug:    {type: image.augment, params: {ops: [{op: random_resized_crop, height: 28, width: 28, scale: [0.5, 1.0]},
                                               {op: flip, horizontal_p: 0.5}, {op: color_jitter, brightness: 0.4}, to_tensor]}}
  save:   {type: io.hdf5_writer, params: {path: )" + (dir / "epochs.h5").string() + R"(}}
edges: [images.out -> passes.in, passes.out -> aug.in, aug.out -> save.in]
)";
  GraphRun r = run_graph("g.yaml", yaml, 2);
  INFO(r.message());
  REQUIRE(r.exit_code == 0);
  run_numpy_oracle(R"PY(
images, labels = fashion("test")
d = h5py.File(sys.argv[1] + "/epochs.h5", "r")["data"]
ids, x = d["id"][:], d["image"][:]
check(len(ids) == 600, "records", len(ids))
passes = [ids[0:200], ids[200:400], ids[400:600]]
for p in passes:
    check(sorted(p.tolist()) == list(range(200)), "each pass holds every image once")
check(not np.array_equal(passes[0], passes[1]), "each pass in a new order")
same_pixels = 0
for i in range(200):
    rows = np.nonzero(ids == i)[0]
    a, b, c = x[rows[0]], x[rows[1]], x[rows[2]]
    same_pixels += int(np.array_equal(a, b)) + int(np.array_equal(b, c))
    # Still the same picture: each augmented copy is closer to its own source than to others'.
check(same_pixels == 0, "an image augmented identically in two epochs", same_pixels)
# The augmentations keep the picture: a copy correlates with its source image more than with
# another image, on average.
src = images[:200].reshape(200, -1).astype(np.float64)
aug = x.reshape(600, -1).astype(np.float64)
def corr(u, v):
    u = u - u.mean(); v = v - v.mean()
    return float(u @ v / (np.linalg.norm(u) * np.linalg.norm(v) + 1e-12))
own = np.mean([corr(aug[k], src[ids[k]]) for k in range(600)])
other = np.mean([corr(aug[k], src[(ids[k] + 1) % 200]) for k in range(600)])
check(own > other + 0.2, "augmented copies resemble their source", own, other)
)PY",
                   {dir.string()});
}

TEST_CASE("baselines without training: pixel embeddings and hue x saturation histograms against numpy") {
  // Colour photos made by PIL (blocks of known colours, one of them grey), decoded by
  // image.files_reader; the pixel embedding is a box average (exact for an integer factor), the
  // histogram follows OpenCV's 8-bit HSV (H = hue/2 in [0, 180), S = 255 (max - min) / max).
  const fs::path dir = scratch_dir("image_baselines");
  run_numpy_oracle(R"PY(
from PIL import Image
d = sys.argv[1]
rng = np.random.default_rng(3)
colours = np.array([[200, 40, 40], [40, 180, 60], [30, 60, 200], [128, 128, 128], [220, 200, 30], [90, 20, 160]], np.uint8)
rows = ["path,label"]
for i in range(6):
    img = np.zeros((48, 64, 3), np.uint8)
    for by in range(0, 48, 16):
        for bx in range(0, 64, 16):
            img[by:by + 16, bx:bx + 16] = colours[rng.integers(0, len(colours))]
    Image.fromarray(img).save(f"{d}/p{i}.png")
    rows.append(f"p{i}.png,{i}")
open(f"{d}/list.csv", "w").write("\n".join(rows) + "\n")
)PY",
                   {dir.string()});
  const std::string yaml = R"(
nodes:
  images: {type: image.files_reader, params: {csv: )" + (dir / "list.csv").string() + R"(, mode: color, batch_size: 4}}
  pixels: {type: image.pixel_embedding, params: {height: 3, width: 4}}
  hist:   {type: image.color_histogram, params: {h_bins: 6, s_bins: 4}}
  savep:  {type: io.hdf5_writer, params: {path: )" + (dir / "pixels.h5").string() + R"(}}
  saveh:  {type: io.hdf5_writer, params: {path: )" + (dir / "hist.h5").string() + R"(}}
edges: [images.out -> pixels.in, images.out -> hist.in, pixels.out -> savep.in, hist.out -> saveh.in]
)";
  GraphRun r = run_graph("g.yaml", yaml, 2);
  INFO(r.message());
  REQUIRE(r.exit_code == 0);
  run_numpy_oracle(R"PY(
from PIL import Image
d = sys.argv[1]
p = h5py.File(d + "/pixels.h5", "r")["data"]; h = h5py.File(d + "/hist.h5", "r")["data"]
check("image" not in p and "image" not in h, "the image field is replaced")
ids = p["id"][:]
check(sorted(ids.tolist()) == list(range(6)), "ids", ids)
for k, i in enumerate(ids):
    img = np.asarray(Image.open(f"{d}/p{i}.png").convert("RGB")).astype(np.float64)
    box = img.reshape(3, 16, 4, 16, 3).mean(axis=(1, 3)) / 255.0       # 48x64 -> 3x4, area average
    check(np.allclose(p["embedding"][k], box.reshape(-1), atol=1e-6), "pixels", i)
for k, i in enumerate(h["id"][:]):
    img = np.asarray(Image.open(f"{d}/p{i}.png").convert("RGB")).astype(np.float64)
    r, g, b = img[..., 0], img[..., 1], img[..., 2]
    v = img.max(axis=2); mn = img.min(axis=2); c = v - mn
    s = np.where(v > 0, np.round(255 * c / np.maximum(v, 1)), 0)
    hue = np.zeros_like(v)
    nz = c > 0
    rm, gm = nz & (v == r), nz & (v == g) & (v != r)
    bm = nz & ~rm & ~gm
    hue[rm] = (60 * (g - b)[rm] / c[rm]) % 360
    hue[gm] = 120 + 60 * (b - r)[gm] / c[gm]
    hue[bm] = 240 + 60 * (r - g)[bm] / c[bm]
    H = np.round(hue / 2) % 180
    hb = np.minimum(5, (H * 6 // 180).astype(int)); sb = np.minimum(3, (s * 4 // 256).astype(int))
    expect = np.bincount((hb * 4 + sb).reshape(-1), minlength=24) / hb.size
    check(np.allclose(h["embedding"][k], expect, atol=1e-6), "histogram", i, h["embedding"][k], expect)
    check(abs(h["embedding"][k].sum() - 1) < 1e-5, "sums to 1")
)PY",
                   {dir.string()});
}

TEST_CASE("image.id_filter keeps the listed ids labelled from the file, or with keep: unlisted the others unchanged") {
  // tests/image/data/id_split.csv: ids 1 and 4 are queries (labels 7 and 8), 2 and 3 the gallery.
  const fs::path dir = scratch_dir("image_id_filter");
  const std::string data = source_dir() + "/tests/image/data";
  run_graph_ok("g.yaml", R"(
nodes:
  photos:  {type: image.files_reader, params: {csv: )" + data + R"(/id_list.csv, height: 8, width: 8, batch_size: 3}}
  queries: {type: image.id_filter, params: {path: )" + data + R"(/id_split.csv, role: query}}
  others:  {type: image.id_filter, params: {path: )" + data + R"(/id_split.csv, role: query, keep: unlisted}}
  qsave:   {type: io.hdf5_writer, params: {path: )" + (dir / "queries.h5").string() + R"(}}
  osave:   {type: io.hdf5_writer, params: {path: )" + (dir / "others.h5").string() + R"(}}
edges: [photos.out -> queries.in, photos.out -> others.in, queries.out -> qsave.in, others.out -> osave.in]
)", 1);
  run_numpy_oracle(R"PY(
import csv
d = sys.argv[1]
listed = {int(r["id"]): int(r["label"]) for r in csv.DictReader(open(sys.argv[2] + "/id_split.csv")) if r["role"] == "query"}
every = [int(r["id"]) for r in csv.DictReader(open(sys.argv[2] + "/id_list.csv"))]
q = h5py.File(d + "/queries.h5", "r")["data"]
check(sorted(q["id"][:].tolist()) == sorted(listed), "listed ids", q["id"][:])
check(all(listed[int(i)] == int(l) for i, l in zip(q["id"][:], q["label"][:])), "labels from the file", q["label"][:])
o = h5py.File(d + "/others.h5", "r")["data"]
check(sorted(o["id"][:].tolist()) == sorted(set(every) - set(listed)), "unlisted ids", o["id"][:])
# keep: unlisted leaves the records' own labels: files_reader gives -1 without a label column.
check((o["label"][:] == -1).all(), "own labels kept", o["label"][:])
)PY", {dir.string(), data});
}
