#!/usr/bin/python3
"""Image family throughput: readers and augmentation, against Python peers in the same run.

Measures, on Fashion-MNIST train (60,000 28x28 images), best of --repeats runs each:
  idx      image.idx_reader -> core.sink (per image; gunzip included)
           peer: gzip + numpy parse of the same files (whole arrays, no per-image records)
  files    image.files_reader over the 60,000 images written as PNGs (dir/<class>/<n>.png)
           peer: PIL.Image.open + numpy over the same files, one process
  augment  idx_reader (batches of 256) -> image.augment (crop, flip, rotate, jitter, blur,
           to_tensor, normalize) -> core.sink
           peer: the same ops with PIL + numpy per image, one process (what a torchvision
           DataLoader worker does)
embedflow figures are the engine's own run time ("done: ... in X s", plugin loading excluded)
and the process CPU time (user + sys); peers report wall time of the measured loop. On a shared
machine the CPU time is the steadier figure.

  /usr/bin/python3 tools/bench/image_throughput/image_throughput.py --build build --threads 1 2
"""
import argparse, os, re, resource, subprocess, sys, tempfile, time
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from fashion_peer import FASHION, horizontal_flip, idx, normalized, random_resized_crop, rotate  # noqa: E402

OPS = """[{op: random_resized_crop, height: 28, width: 28, scale: [0.7, 1.0]},
          {op: flip, horizontal_p: 0.5}, {op: rotate, degrees: [-10, 10]},
          {op: color_jitter, brightness: 0.3, contrast: 0.3},
          {op: gaussian_blur, sigma: [0.1, 1.0], p: 0.5}, to_tensor,
          {op: normalize, mean: [0.2860], std: [0.3530]}]"""


def write_pngs(root):
    from PIL import Image
    marker = os.path.join(root, ".complete")
    if os.path.exists(marker):
        return
    images, labels = idx(f"{FASHION}/train-images-idx3-ubyte.gz"), idx(f"{FASHION}/train-labels-idx1-ubyte.gz")
    for c in range(10):
        os.makedirs(f"{root}/{c}", exist_ok=True)
    for i in range(len(images)):
        Image.fromarray(images[i]).save(f"{root}/{labels[i]}/{i:05d}.png")
    open(marker, "w").close()


def run_graph(cli, yaml, threads, tmp):
    path = os.path.join(tmp, "g.yaml")
    with open(path, "w") as f:
        f.write(yaml)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run([cli, "run", path, "--threads", str(threads)], capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        sys.exit(f"graph failed: {r.stderr}")
    m = re.search(r"done: \d+ source records in ([0-9.e+-]+) s", r.stderr)
    secs = float(m.group(1)) if m else float("nan")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    count = int(re.search(r"count: (\d+)", r.stdout).group(1))
    return secs, cpu, count


def best(fn, repeats):
    results = [fn() for _ in range(repeats)]
    return min(results, key=lambda r: r[0])


def peer_idx():
    t = time.perf_counter()
    images = idx(f"{FASHION}/train-images-idx3-ubyte.gz")
    labels = idx(f"{FASHION}/train-labels-idx1-ubyte.gz")
    assert len(images) == len(labels) == 60000
    return time.perf_counter() - t, 60000


def peer_files(root, files):
    from PIL import Image
    t = time.perf_counter()
    total = 0
    for f in files:
        total += int(np.asarray(Image.open(os.path.join(root, f)))[0, 0])
    return time.perf_counter() - t, len(files)


def peer_augment(n):
    from PIL import Image, ImageEnhance, ImageFilter
    images = idx(f"{FASHION}/train-images-idx3-ubyte.gz")[:n]
    rng = np.random.default_rng(0)
    t = time.perf_counter()
    for a in images:
        img = rotate(horizontal_flip(random_resized_crop(Image.fromarray(a), rng, (0.7, 1.0)), rng), rng)
        img = ImageEnhance.Brightness(img).enhance(rng.uniform(0.7, 1.3))
        img = ImageEnhance.Contrast(img).enhance(rng.uniform(0.7, 1.3))
        if rng.random() < 0.5:
            img = img.filter(ImageFilter.GaussianBlur(rng.uniform(0.1, 1.0)))
        normalized(img)
    return time.perf_counter() - t, n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build", help="build directory holding bin/embedflow")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--png-dir", default=os.path.join(tempfile.gettempdir(), "embedflow_fashion_png"),
                    help="where the 60,000 PNGs are written (reused when complete)")
    ap.add_argument("--peer-augment", type=int, default=10000, help="images the PIL augment peer processes")
    a = ap.parse_args()
    cli = os.path.join(a.build, "bin", "embedflow")
    write_pngs(a.png_dir)
    files = sorted(os.path.join(str(c), f) for c in range(10) for f in os.listdir(os.path.join(a.png_dir, str(c))))
    graphs = {
        "idx": "nodes:\n  r: {type: image.idx_reader, params: {split: train}}\n  count: {type: core.sink, params: {mode: count}}\n"
               "edges: [r.out -> count.in]\n",
        "files": f"nodes:\n  r: {{type: image.files_reader, params: {{dir: {a.png_dir}}}}}\n"
                 "  count: {type: core.sink, params: {mode: count}}\nedges: [r.out -> count.in]\n",
        "augment": "nodes:\n  r: {type: image.idx_reader, params: {split: train, batch_size: 256}}\n"
                   f"  aug: {{type: image.augment, params: {{ops: {OPS}}}}}\n"
                   "  count: {type: core.sink, params: {mode: count}}\nedges: [r.out -> aug.in, aug.out -> count.in]\n",
    }
    peers = {"idx": ("gzip + numpy parse", lambda: peer_idx()),
             "files": ("PIL decode loop", lambda: peer_files(a.png_dir, files)),
             "augment": ("PIL + numpy augment loop", lambda: peer_augment(a.peer_augment))}
    load = open("/proc/loadavg").read().split()[:3]
    print(f"Fashion-MNIST train, 60000 images; best of {a.repeats}; load average {' '.join(load)}")
    print(f"{'stage':8} {'contender':32} {'time s':>8} {'cpu s':>7} {'images/s':>10} {'vs peer':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for stage in ("idx", "files", "augment"):
            name, fn = peers[stage]
            ps, pn = min((fn() for _ in range(a.repeats)), key=lambda r: r[0])
            peer_rate = pn / ps
            print(f"{stage:8} {name:32} {ps:8.3f} {'':>7} {peer_rate:10.0f} {1.0:8.2f}")
            for t in a.threads:
                secs, cpu, count = best(lambda: run_graph(cli, graphs[stage], t, tmp), a.repeats)
                n = 60000
                rate = n / secs
                print(f"{stage:8} {'embedflow --threads ' + str(t):32} {secs:8.3f} {cpu:7.2f} {rate:10.0f} {rate / peer_rate:8.2f}")


if __name__ == "__main__":
    main()
