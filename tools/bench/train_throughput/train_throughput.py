#!/usr/bin/python3
"""Training throughput of torch.small_cnn on Fashion-MNIST, batch 256, four ways in one run,
every side with the same LibTorch/PyTorch intra-op thread count:

  (a) embedflow graph end to end, with augmentation:
        image.idx_reader (shuffled, batches of 256) -> image.augment (random resized crop, flip,
        rotation, to_tensor, normalize) -> torch.train
  (b) model steps on pre-made tensors: the same torch.train fed by io.hdf5_reader from an HDF5
        file of already-augmented f32 batches (what (a) would reach if data cost nothing);
  (c) PyTorch in Python (Debian's python3-torch): a Dataset doing the same augmentations with
        PIL + numpy per image, DataLoader(batch_size=256, shuffle=True, num_workers=2), the same
        model, loss and optimizer.
  (d) PyTorch model steps on tensors already in memory: the pre-made batches of (b) as one torch
      tensor, sliced per step (no data loading at all): the step cost of PyTorch itself.
  (e) (d) with the model's weights in channels-last memory format (model.to(memory_format=
      torch.channels_last)), the layout torch.train uses on the CPU by default: what (b) gains
      over (d) that a PyTorch script can have with one line. Reported, no target.

Both PyTorch sides run in this process, which re-executes itself with the glibc malloc settings
`embedflow run` applies to itself (mmap threshold 32 MiB, trim threshold 1 GiB, as GLIBC_TUNABLES),
so the sides differ in their code, not their allocator; --system-malloc runs every side (the
embedflow ones too) with glibc's defaults instead.

Model: torch.small_cnn defaults (conv 32, conv 64, batch norm, hidden 128, embedding 64); loss:
batch-hard triplet (margin 0.2); Adam, lr 1e-3. The first --warmup steps are not timed. The sides
take turns for --rounds rounds; each ratio is decided on the median of the rounds' paired ratios
and its sign-test interval (tools/bench/rounds.py), so a burst of load from other processes on a
shared machine does not decide it. Targets: (a) >= 0.95 x (b), (a) >= 1.2 x (c) and
(b) >= 1.0 x (d).

  /usr/bin/python3 tools/bench/train_throughput/train_throughput.py --build build --threads 2
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np
import torch

# The model and loss of tools/bench/torch_steps.py (the model-step benchmark against PyTorch).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from torch_steps import SmallCnn, batch_hard  # noqa: E402
from rounds import loadavg, ratio_line, spread_line  # noqa: E402
from fashion_peer import FASHION, MEAN, STD, horizontal_flip, idx, normalized, random_resized_crop, rotate  # noqa: E402

OPS = f"""[{{op: random_resized_crop, height: 28, width: 28, scale: [0.7, 1.0]}},
          {{op: flip, horizontal_p: 0.5}}, {{op: rotate, degrees: [-10, 10]}}, to_tensor,
          {{op: normalize, mean: [{MEAN}], std: [{STD}]}}]"""


class AugmentedFashion(torch.utils.data.Dataset):
    """The graph's augmentations per image with PIL + numpy (what a torchvision transform does)."""

    def __init__(self, images, labels):
        self.images, self.labels = images, labels

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        from PIL import Image
        rng = np.random.default_rng((torch.initial_seed() + i) % 2**32)
        img = Image.fromarray(self.images[i])
        img = rotate(horizontal_flip(random_resized_crop(img, rng, (0.7, 1.0)), rng), rng)
        t = normalized(img)
        return torch.from_numpy(t), int(self.labels[i])


def timed_rate(step_times, batch):
    return len(step_times) * batch / sum(step_times)


def pytorch_dataloader(images, labels, batch, steps, warmup, threads, workers):
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = SmallCnn()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = torch.utils.data.DataLoader(AugmentedFashion(images, labels), batch_size=batch, shuffle=True,
                                         num_workers=workers, drop_last=True, persistent_workers=workers > 0)
    times, s = [], 0
    while s < steps:
        last = time.perf_counter()
        for x, y in loader:
            loss = batch_hard(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            now = time.perf_counter()
            if s >= warmup:
                times.append(now - last)  # includes waiting for the loader, as the graph's rate does
            last = now
            s += 1
            if s == steps:
                break
    return timed_rate(times, batch)


def run_graph(cli, nodes, edges, batch, steps, warmup, threads, work, name, graph_threads):
    """Runs `nodes` + a torch.train node named train; returns the timed steps' samples/s."""
    log = os.path.join(work, name)
    graph = os.path.join(work, name + '.yaml')
    with open(graph, 'w') as g:
        g.write(f"""# torch.small_cnn training, batch {batch} ({name})
seed: 1
nodes:
{nodes.rstrip()}
  train: {{type: torch.train, params: {{model: {{type: torch.small_cnn}}, loss: {{type: torch.batch_hard_triplet}},
          optimizer: {{type: torch.adam, lr: 0.001}}, max_steps: {steps}, threads: {threads}, log_every: 1,
          log_dir: {log}}}}}
edges: {edges}
""")
    r = subprocess.run([cli, 'run', graph, '--quiet', '--threads', str(graph_threads)], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f'{name} graph failed:\n{r.stderr}')
    rows = np.genfromtxt(os.path.join(log, 'metrics.csv'), delimiter=',', names=True)
    timed = rows[warmup:]
    if len(timed) != steps - warmup:
        sys.exit(f'{name}: expected {steps - warmup} timed steps, got {len(timed)}')
    # Each row covers one step, from the previous row to this one: data waits included.
    return timed_rate(list(batch / timed['samples_per_s']), batch)


def pytorch_in_memory(x, y, batch, steps, warmup, threads, channels_last=False):
    """Side (d): the model, loss and optimizer of (c) stepping through the pre-made batches of (b);
    side (e) with channels-last weights."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = SmallCnn()
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    xs, ys = torch.from_numpy(x), torch.from_numpy(y)
    times = []
    for s in range(steps):
        start = time.perf_counter()
        loss = batch_hard(model(xs[s * batch:(s + 1) * batch]), ys[s * batch:(s + 1) * batch])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if s >= warmup:
            times.append(time.perf_counter() - start)
    return timed_rate(times, batch)


def graph_augmented(cli, batch, steps, warmup, threads, work, graph_threads):
    nodes = f"""  data:  {{type: image.idx_reader, params: {{split: train, shuffle: true, epochs: 100, batch_size: {batch}, drop_last: true}}}}
  aug:   {{type: image.augment, params: {{ops: {' '.join(OPS.split())}}}}}"""
    return run_graph(cli, nodes, '[data.out -> aug.in, aug.out -> train.in]', batch, steps, warmup, threads, work,
                     'a_augmented', graph_threads)


def premade_tensors(images, labels, batch, steps):
    """`steps` batches augmented once, up front, by the Dataset of side (c): f32 [N,1,28,28]."""
    ds = AugmentedFashion(images, labels)
    torch.manual_seed(0)
    order = np.random.default_rng(0).permutation(len(images))[:steps * batch]
    x = np.stack([ds[int(i)][0].numpy() for i in order])
    return x, labels[order].astype(np.int64)


def graph_premade(cli, x, y, batch, steps, warmup, threads, work, graph_threads):
    data = os.path.join(work, 'premade.h5')
    with h5py.File(data, 'w') as f:
        f['image'], f['label'] = x, y
    nodes = f"  data:  {{type: io.hdf5_reader, params: {{path: {data}, fields: [image, label], batch_size: {batch}}}}}"
    return run_graph(cli, nodes, '[data.out -> train.in]', batch, steps, warmup, threads, work, 'b_premade', graph_threads)


# What `embedflow run` sets with mallopt (the runtime's tune_process_allocator), as glibc tunables:
# they must be in the environment before a process starts, so the benchmark re-executes itself.
TUNABLES = 'glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824'


def same_allocator(system_malloc):
    """Gives the PyTorch sides (this process and its DataLoader workers) the allocator settings of
    the embedflow sides; with system_malloc, every side keeps glibc's defaults."""
    if system_malloc:
        os.environ['EMBEDFLOW_SYSTEM_MALLOC'] = '1'
        return
    if os.environ.get('GLIBC_TUNABLES') != TUNABLES:
        os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ, GLIBC_TUNABLES=TUNABLES))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--build', default='build', help='build directory holding bin/embedflow')
    ap.add_argument('--threads', type=int, default=2, help='intra-op threads of every side (and the graph\'s --threads)')
    ap.add_argument('--workers', type=int, default=2, help='DataLoader num_workers of side (c)')
    ap.add_argument('--graph-threads', type=int, default=0,
                    help="the graph's --threads (oneTBB workers for the data nodes) on sides (a) and (b); 0: --threads")
    ap.add_argument('--batch', type=int, default=256)
    ap.add_argument('--steps', type=int, default=60)
    ap.add_argument('--warmup', type=int, default=5)
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--system-malloc', action='store_true',
                    help="every side with glibc's default malloc settings (embedflow's own are switched off)")
    a = ap.parse_args()
    same_allocator(a.system_malloc)
    cli = os.path.join(a.build, 'bin', 'embedflow')
    images = idx(f'{FASHION}/train-images-idx3-ubyte.gz')
    labels = idx(f'{FASHION}/train-labels-idx1-ubyte.gz').astype(np.int64)
    x, y = premade_tensors(images, labels, a.batch, a.steps)
    rounds = {'a': [], 'b': [], 'c': [], 'd': [], 'e': []}
    load = loadavg()
    for _ in range(a.rounds):
        with tempfile.TemporaryDirectory() as work:
            gt = a.graph_threads or a.threads
            rounds['a'].append(graph_augmented(cli, a.batch, a.steps, a.warmup, a.threads, work, gt))
            rounds['b'].append(graph_premade(cli, x, y, a.batch, a.steps, a.warmup, a.threads, work, gt))
        rounds['c'].append(pytorch_dataloader(images, labels, a.batch, a.steps, a.warmup, a.threads, a.workers))
        rounds['d'].append(pytorch_in_memory(x, y, a.batch, a.steps, a.warmup, a.threads))
        rounds['e'].append(pytorch_in_memory(x, y, a.batch, a.steps, a.warmup, a.threads, channels_last=True))
    best = {k: max(v) for k, v in rounds.items()}
    print(f'malloc: {os.environ.get("GLIBC_TUNABLES", "glibc defaults")} on every side')
    print(f'threads {a.threads} (graph --threads {a.graph_threads or a.threads}, DataLoader workers {a.workers}), batch {a.batch}, {a.steps - a.warmup} timed steps, best of {a.rounds} rounds, '
          f'load average before {load}, after {loadavg()}')
    for k, v in rounds.items():
        print(spread_line(f'({k})', v))
    print('| side | samples/s | steps/s | ratio |')
    print('|---|---|---|---|')
    print(f'| (a) embedflow graph, idx_reader -> image.augment -> torch.train | {best["a"]:.0f} | '
          f'{best["a"] / a.batch:.2f} | (a)/(b) = {best["a"] / best["b"]:.2f} (target >= 0.95), '
          f'(a)/(c) = {best["a"] / best["c"]:.2f} (target >= 1.2) |')
    print(f'| (b) embedflow torch.train on pre-made tensors (io.hdf5_reader) | {best["b"]:.0f} | '
          f'{best["b"] / a.batch:.2f} | |')
    print(f'| (c) PyTorch, Dataset + DataLoader(num_workers={a.workers}) | {best["c"]:.0f} | '
          f'{best["c"] / a.batch:.2f} | |')
    print(f'| (d) PyTorch model steps on in-memory tensors | {best["d"]:.0f} | {best["d"] / a.batch:.2f} | '
          f'(b)/(d) = {best["b"] / best["d"]:.2f} (target >= 1.0) |')
    print(f'| (e) (d) with channels-last weights | {best["e"]:.0f} | {best["e"] / a.batch:.2f} | '
          f'(b)/(e) = {best["b"] / best["e"]:.2f} |')
    for num, den, target in (('a', 'b', 0.95), ('a', 'c', 1.2), ('b', 'd', 1.0), ('b', 'e', None)):
        print(ratio_line(f'({num})/({den})', [x / y for x, y in zip(rounds[num], rounds[den])], target) +
              f'; best/best {best[num] / best[den]:.2f}')


if __name__ == '__main__':
    main()
