#!/usr/bin/python3
"""Photo-scale input speed: JPEG photos (500 x 375) -> RandomResizedCrop 224 + horizontal flip
-> f32 NCHW batches of 64, three ways in one run:

  (a) embedflow: image.files_reader (shuffled, RGB, batches of 64) -> image.augment
      (random_resized_crop 224, flip, to_tensor) -> core.sink, at --threads 1 and 2;
  (b) torchvision (Debian's python3-torchvision): a Dataset opening each file with PIL,
      transforms RandomResizedCrop(224) + RandomHorizontalFlip + ToTensor,
      DataLoader(batch_size=64, shuffle=True, num_workers=2);
  (c) embedflow replaying the decoded u8 images from its HDF5 stage cache: the reader with
      `cache: true` decodes once, resized to 341 x 256 (as FFCV stores images at a maximum
      resolution), and later runs replay the cache -> image.augment as in (a).

Both sides resample with antialiasing (PIL's bilinear; embedflow's area filter when shrinking).
Images: `gen_photos --images` renders them when the build's gen_photos supports it; otherwise
the script draws its own 500 x 375 JPEGs (smooth gradients, shapes and noise, quality 90) once
into --data. Every side runs in a fresh process and is timed from start to its last batch
(embedflow's times include starting the CLI and loading plugins). The sides take turns for
--rounds rounds, in an order that rotates each round, and every round's ratios are paired (the
sides of a round ran back to back and saw similar load): tools/bench/rounds.py decides each target
from the median of the paired ratios and its interval. Peak RSS of (a) is measured at 2,000 and at
every image. CPU time (user + system, workers included) is printed too: on a machine loaded by
other jobs it is the steadier figure. The load average before each round is printed, and this
process's autogroup: the kernel gives each session one share of the CPU, so another busy session
can cap what a second thread gains. Targets: (a) >= 2 x (b); (c) >= 5 x (b); (a)'s peak RSS the
same at 2k and 10k; (a) at --threads 2 >= 1.6 x --threads 1.

  /usr/bin/python3 tools/bench/photo_input/photo_input.py --build build --images 10000 --rounds 3
"""
import argparse
import glob
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from rounds import loadavg, ratio_line  # noqa: E402

BATCH = 64


def draw_photo(args):
    """One synthetic 500 x 375 photo: sky-to-ground gradient, a few boxes and discs, noise."""
    path, seed = args
    from PIL import Image, ImageDraw
    rng = np.random.default_rng(seed)
    h, w = 375, 500
    y = np.linspace(0, 1, h)[:, None, None]
    top, bottom = rng.uniform(60, 255, 3), rng.uniform(0, 200, 3)
    img = np.broadcast_to(top * (1 - y) + bottom * y, (h, w, 3)).copy()
    img += rng.normal(0, 12, (h, w, 3))
    im = Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))
    d = ImageDraw.Draw(im)
    for _ in range(12):
        x0, y0 = int(rng.integers(0, w - 40)), int(rng.integers(0, h - 40))
        x1, y1 = x0 + int(rng.integers(20, 200)), y0 + int(rng.integers(20, 200))
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        (d.rectangle if rng.random() < 0.6 else d.ellipse)([x0, y0, x1, y1], fill=colour)
    im.save(path, quality=90)


def make_images(build, data, n):
    """The JPEG list: gen_photos' rendered photos when it can write them, else drawn here."""
    os.makedirs(data, exist_ok=True)
    images = os.path.join(data, 'images')
    have = sorted(glob.glob(os.path.join(images, '*.jpg')))
    if len(have) < n:
        shutil.rmtree(images, ignore_errors=True)
        os.makedirs(images)
        gen = os.path.join(build, 'bin', 'gen_photos')
        r = subprocess.run([gen, '--rows', str(n), '--seed', '11', '--out', os.path.join(data, 'meta.csv'),
                            '--images', images, '--image-limit', str(n)], capture_output=True, text=True)
        have = sorted(glob.glob(os.path.join(images, '*.jpg')))
        if r.returncode != 0 or len(have) < n:
            print(f'gen_photos --images unavailable ({(r.stderr or r.stdout).strip().splitlines()[-1:]}); '
                  f'drawing {n} JPEGs with PIL', flush=True)
            with multiprocessing.Pool(2) as pool:
                pool.map(draw_photo, [(os.path.join(images, f'{i:06d}.jpg'), i) for i in range(n)], chunksize=64)
            have = sorted(glob.glob(os.path.join(images, '*.jpg')))
        else:
            print(f'{n} photos rendered by gen_photos', flush=True)
    have = have[:n]
    with open(os.path.join(data, 'list.csv'), 'w') as f:
        f.write('path,id\n')
        for i, p in enumerate(have):
            f.write(f'{p},{i}\n')
    return have


CPU = {}


def run_measured(argv):
    """Runs a command; returns (wall seconds, peak RSS in MB, stdout+stderr). Its CPU time
    (user + system, its reaped children included: the DataLoader's workers) goes to CPU[argv]."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    CPU[tuple(argv)] = usage.ru_utime + usage.ru_stime
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f'{" ".join(argv)} failed ({p.returncode}):\n{out}')
    return wall, usage.ru_maxrss / 1024.0, out


AUGMENT = ('{type: image.augment, params: {ops: [{op: random_resized_crop, height: 224, width: 224}, '
           '{op: flip, horizontal_p: 0.5}, to_tensor]}}')


def graph_files(work, listing, limit):
    g = os.path.join(work, f'files_{limit}.yaml')
    with open(g, 'w') as f:
        f.write(f"""# (a): JPEG files -> random resized crop 224 + flip -> f32 NCHW batches of {BATCH}; a batch is
# 36 MB decoded and 38 MB as f32, so the reader keeps 4 batches in flight and decodes one ahead
nodes:
  read:  {{type: image.files_reader, params: {{csv: {listing}, mode: color, shuffle: true, batch_size: {BATCH}, limit: {limit},
                                           chunk: {BATCH}}}, in_flight: 4}}
  aug:   {AUGMENT}
  count: {{type: core.sink, params: {{mode: count}}}}
edges: [read.out -> aug.in, aug.out -> count.in]
""")
    return g


def graph_cached(work, listing, limit):
    g = os.path.join(work, f'cached_{limit}.yaml')
    with open(g, 'w') as f:
        f.write(f"""# (c): the reader's decoded, resized u8 images replayed from the stage cache
nodes:
  read:  {{type: image.files_reader, params: {{csv: {listing}, mode: color, shuffle: true, batch_size: {BATCH}, limit: {limit},
                                           height: 256, width: 341, chunk: {BATCH}}}, in_flight: 4, cache: true}}
  aug:   {AUGMENT}
  count: {{type: core.sink, params: {{mode: count}}}}
edges: [read.out -> aug.in, aug.out -> count.in]
""")
    return g


TORCHVISION = r'''
import sys, time
import torch, torchvision.transforms as T
from PIL import Image
paths = [l.split(",")[0] for l in open(sys.argv[1]).read().splitlines()[1:]]
class Files(torch.utils.data.Dataset):
    def __init__(self, paths):
        self.paths = paths
        self.t = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor()])
    def __len__(self):
        return len(self.paths)
    def __getitem__(self, i):
        with open(self.paths[i], "rb") as f:
            return self.t(Image.open(f).convert("RGB"))
loader = torch.utils.data.DataLoader(Files(paths), batch_size=%d, shuffle=True, num_workers=2)
n = 0
for x in loader:
    assert x.dtype == torch.float32 and tuple(x.shape[1:]) == (3, 224, 224)
    n += x.shape[0]
print("images", n)
''' % BATCH


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--build', default='build', help='build directory holding bin/embedflow')
    ap.add_argument('--images', type=int, default=10000)
    ap.add_argument('--small', type=int, default=2000, help='image count of the second peak-RSS run of (a)')
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--data', default=os.path.join(tempfile.gettempdir(), 'embedflow_photo_input'),
                    help='where the JPEGs are kept between runs')
    a = ap.parse_args()
    cli = os.path.abspath(os.path.join(a.build, 'bin', 'embedflow'))
    make_images(a.build, a.data, a.images)
    listing = os.path.join(a.data, 'list.csv')
    work = tempfile.mkdtemp(prefix='photo_input_')
    cache_dir = os.path.join(work, 'cache')
    try:
        with open(os.path.join(work, 'torchvision_side.py'), 'w') as f:
            f.write(TORCHVISION)
        files, cached = graph_files(work, listing, a.images), graph_cached(work, listing, a.images)
        # The cache is written once (not timed as (c)); every later (c) run replays it.
        wall, _, out = run_measured([cli, 'run', cached, '--quiet', '--threads', '2', '--cache-dir', cache_dir])
        print(f'(c) cache written in {wall:.1f} s', flush=True)
        sides = {
            'a2': [cli, 'run', files, '--quiet', '--threads', '2'],
            'b': [sys.executable, os.path.join(work, 'torchvision_side.py'), listing],
            'c': [cli, 'run', cached, '--quiet', '--threads', '2', '--cache-dir', cache_dir],
            'a1': [cli, 'run', files, '--quiet', '--threads', '1'],
        }
        rates = {k: [] for k in sides}
        cpu = {k: [] for k in sides}
        rss = {}
        names = list(sides)
        try:
            with open('/proc/self/autogroup') as f:
                autogroup = f.read().strip()
        except OSError:
            autogroup = 'unknown'
        print(f'autogroup {autogroup}; load before the rounds {loadavg()}', flush=True)
        for rnd in range(a.rounds):
            print(f'round {rnd + 1}: load {loadavg()}', flush=True)
            for name in names[rnd % len(names):] + names[:rnd % len(names)]:
                argv = sides[name]
                wall, peak, out = run_measured(argv)
                rates[name].append(a.images / wall)
                cpu[name].append(CPU[tuple(argv)])
                rss[name] = max(rss.get(name, 0), peak)
                print(f'round {rnd + 1} {name}: {a.images / wall:8.1f} images/s  ({wall:.2f} s, CPU {cpu[name][-1]:.1f} s, '
                      f'peak RSS {peak:.0f} MB)', flush=True)
        small = graph_files(work, listing, a.small)
        _, rss_small, _ = run_measured([cli, 'run', small, '--quiet', '--threads', '2'])
        best = {k: max(v) for k, v in rates.items()}
        spread = {k: f'{min(v):.0f}-{max(v):.0f}' for k, v in rates.items()}
        print()
        print(f'| side | images/s, best of {a.rounds} | rounds | CPU ms an image (best) | peak RSS |')
        print('|---|---:|---:|---:|---:|')
        labels = {'a2': '(a) embedflow files_reader + augment + to_tensor, --threads 2',
                  'a1': '(a) the same, --threads 1',
                  'b': '(b) torchvision Dataset (PIL) + DataLoader(num_workers=2)',
                  'c': '(c) embedflow replaying the decoded u8 HDF5 cache, --threads 2'}
        for k in ['a2', 'a1', 'b', 'c']:
            print(f'| {labels[k]} | {best[k]:.0f} | {spread[k]} | {1000 * min(cpu[k]) / a.images:.2f} | {rss[k]:.0f} MB |')
        print()
        paired = lambda x, y: [p / q for p, q in zip(rates[x], rates[y])]  # noqa: E731
        cpu_paired = lambda x, y: [q / p for p, q in zip(cpu[x], cpu[y])]  # noqa: E731
        print(ratio_line('(a)/(b) images/s', paired('a2', 'b'), 2))
        print(ratio_line('(c)/(b) images/s', paired('c', 'b'), 5))
        print(ratio_line('(c)/(b) CPU an image, (b) over (c)', cpu_paired('c', 'b')))
        print(ratio_line('(a) --threads 2 / --threads 1 images/s', paired('a2', 'a1'), 1.6))
        print(f'(a) peak RSS: {rss_small:.0f} MB at {a.small} images, {rss["a2"]:.0f} MB at {a.images} images '
              f'(target: independent of the count)')
        print(f'load average after the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores')
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    main()
