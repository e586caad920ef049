#!/usr/bin/python3
"""Data-parallel training throughput: torch.train with world_size 2 (c10d Gloo, one LibTorch thread
per rank) against the same training in one process with two threads, and against PyTorch's
DistributedDataParallel (Debian's python3-torch, Gloo, two processes of one thread), in one run.

  (a) embedflow, one process: io.hdf5_reader -> torch.train (threads: 2);
  (b) embedflow, two ranks: the same graph run twice with world_size 2 (threads: 1 each; each rank
      reads every batch and trains on its half);
  (c) PyTorch DDP: two processes (torch.multiprocessing), each on its half of every batch of
      in-memory tensors, torch.nn.parallel.DistributedDataParallel over Gloo;
  (d) embedflow, two ranks with augmentation: u8 pairs -> image.augment (random resized crop,
      flip, rotation, to_tensor on both images) -> torch.train, each rank augmenting whole batches;
  (e) the same with core.shard after the reader: each rank augments only the rows it trains on;
  (f) side (b) with bucket_mb 0: each rank all-reduces its gradients in one piece after the
      backward pass instead of in buckets during it (what the overlap is worth).

PyTorch runs with the glibc malloc settings `embedflow run` applies to itself (the benchmark
re-executes itself with them as GLIBC_TUNABLES, which the DDP processes inherit); DDP keeps its
defaults (bucket_cap_mb 25, broadcast_buffers).

Model: torch.small_cnn defaults (conv 32, conv 64, batch norm, hidden 128, embedding 64) as a
siamese network on pairs, contrastive loss (margin 1), Adam lr 1e-3, batches of --batch pairs.
The first --warmup steps are not timed. The sides take turns for --rounds rounds; each side's
rounds, their spread, the load before and after and every round's ratios are printed, and a
target is decided on the median of the paired ratios and its sign-test interval
(tools/bench/rounds.py), so a burst of load from other processes does not decide it.
Target: (b) >= 1.0 x (c).

  /usr/bin/python3 tools/bench/data_parallel/data_parallel.py --build build
"""
import argparse
import gzip
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from torch_steps import SmallCnn  # noqa: E402
from rounds import loadavg, ratio_line, spread_line  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def make_pairs(path, n, raw_path=None):
    src = '/usr/share/datasets/fashion-mnist/'
    with gzip.open(src + 'train-images-idx3-ubyte.gz') as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)[:n].astype(np.float32) / 255
    with gzip.open(src + 'train-labels-idx1-ubyte.gz') as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)[:n]
    rng = np.random.default_rng(0)
    i, j = rng.integers(0, n, n), rng.integers(0, n, n)
    a, b, label = x[i], x[j], (y[i] == y[j]).astype(np.float32)
    with h5py.File(path, 'w') as f:
        f['a_image'], f['b_image'], f['pair_label'] = a, b, label
        f['a_id'], f['b_id'] = i.astype(np.int64), j.astype(np.int64)
    if raw_path:  # the same pairs as u8 HWC images, what the augmenters take
        u8 = lambda t: np.round(t * 255).astype(np.uint8).transpose(0, 2, 3, 1)
        with h5py.File(raw_path, 'w') as f:
            f['a_image'], f['b_image'], f['pair_label'] = u8(a), u8(b), label
            f['a_id'], f['b_id'] = i.astype(np.int64), j.astype(np.int64)
    return a, b, label


def contrastive(ea, eb, label, margin=1.0):
    d = (ea - eb).norm(dim=1)
    return (label * d ** 2 + (1 - label) * (margin - d).clamp(min=0) ** 2).mean() / 2


AUGMENT = ('{type: image.augment, params: {fields: [a_image, b_image], ops: [{op: random_resized_crop, height: 28, '
           'width: 28, scale: [0.7, 1.0]}, {op: flip, horizontal_p: 0.5}, {op: rotate, degrees: [-10, 10]}, to_tensor]}}')


def graph_text(data, batch, steps, threads, log, extra, augment=False, shard=False, bucket_mb=25):
    stages = (['shard'] if shard else []) + (['aug'] if augment else []) + ['train']
    edges = ', '.join(f'{a}.out -> {b}.in' for a, b in zip(['data'] + stages, stages))
    optional = ('  shard: {type: core.shard, params: {world_size: 0, rank: -1}}\n' if shard else '') + \
               (f'  aug:   {AUGMENT}\n' if augment else '')
    return f"""# small_cnn siamese training on pairs, batch {batch}
seed: 1
nodes:
  data:  {{type: io.hdf5_reader, params: {{path: {data}, batch_size: {batch}, drop_last: true, epochs: 100}}}}
{optional}  train: {{type: torch.train, params: {{model: {{type: torch.small_cnn}}, loss: {{type: torch.contrastive, margin: 1.0}},
          optimizer: {{type: torch.adam, lr: 0.001}}, max_steps: {steps}, threads: {threads}, log_every: 1,
          log_dir: {log}, bucket_mb: {bucket_mb}{extra}}}}}
edges: [{edges}]
"""


def rate_from_log(log, batch, steps, warmup):
    rows = np.genfromtxt(os.path.join(log, 'metrics.csv'), delimiter=',', names=True)
    timed = rows[warmup:]
    if len(timed) != steps - warmup:
        sys.exit(f'{log}: expected {steps - warmup} timed steps, got {len(timed)}')
    return (steps - warmup) * batch / float(np.sum(batch / timed['samples_per_s']))


def embedflow_single(cli, work, data, batch, steps, warmup):
    log = os.path.join(work, 'single')
    graph = os.path.join(work, 'single.yaml')
    with open(graph, 'w') as g:
        g.write(graph_text(data, batch, steps, 2, log, ''))
    r = subprocess.run([cli, 'run', graph, '--quiet', '--threads', '2'], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f'single-process graph failed:\n{r.stderr}')
    return rate_from_log(log, batch, steps, warmup)


def embedflow_ranks(cli, work, data, batch, steps, warmup, ranks, graph_threads=1, augment=False, shard=False,
                    bucket_mb=25):
    port = free_port()
    procs = []
    for rank in reversed(range(ranks)):
        log = os.path.join(work, f'rank{rank}')
        graph = os.path.join(work, f'rank{rank}.yaml')
        with open(graph, 'w') as g:
            g.write(graph_text(data, batch, steps, 1, log,
                               f', world_size: {ranks}, rank: {rank}, rendezvous: "tcp://127.0.0.1:{port}"', augment, shard,
                               bucket_mb))
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(ranks))  # what core.shard reads
        procs.append(subprocess.Popen([cli, 'run', graph, '--quiet', '--threads', str(graph_threads)], stderr=subprocess.PIPE,
                                      text=True, env=env))
    for p in procs:
        _, err = p.communicate()
        if p.returncode != 0:
            sys.exit(f'data-parallel graph failed:\n{err}')
    return rate_from_log(os.path.join(work, 'rank0'), batch, steps, warmup)


def ddp_worker(rank, ranks, port, data, batch, steps, warmup, out):
    torch.set_num_threads(1)
    dist.init_process_group('gloo', init_method=f'tcp://127.0.0.1:{port}', rank=rank, world_size=ranks)
    a, b, label = (torch.from_numpy(t) for t in data)
    torch.manual_seed(1)
    model = torch.nn.parallel.DistributedDataParallel(SmallCnn())
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    lo, hi = batch * rank // ranks, batch * (rank + 1) // ranks
    n = len(label) // batch
    start = None
    for s in range(steps):
        if s == warmup:
            start = time.perf_counter()
        k = (s % n) * batch
        xa, xb, y = a[k + lo:k + hi], b[k + lo:k + hi], label[k + lo:k + hi]
        e = model(torch.cat([xa, xb]))
        loss = contrastive(e[:len(y)], e[len(y):], y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    elapsed = time.perf_counter() - start
    if rank == 0:
        out.put((steps - warmup) * batch / elapsed)
    dist.destroy_process_group()


def pytorch_ddp(data, batch, steps, warmup, ranks):
    ctx = mp.get_context('spawn')
    out = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=ddp_worker, args=(r, ranks, port, data, batch, steps, warmup, out)) for r in range(ranks)]
    for p in procs:
        p.start()
    rate = out.get()
    for p in procs:
        p.join()
    return rate


# What `embedflow run` sets with mallopt (the runtime's tune_process_allocator), as glibc tunables:
# they must be in the environment before a process starts, so the benchmark re-executes itself.
TUNABLES = 'glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824'

SIDES = {
    'a': 'embedflow, 1 process x 2 threads',
    'b': 'embedflow, 2 ranks x 1 thread (Gloo), gradients in buckets during backward',
    'c': 'PyTorch DDP, 2 processes x 1 thread (Gloo)',
    'd': 'embedflow, 2 ranks x 1 thread, each augmenting whole batches',
    'e': 'embedflow, 2 ranks x 1 thread, core.shard before augmenting',
    'f': 'embedflow, 2 ranks x 1 thread, one all-reduce after backward (bucket_mb 0)',
}
TARGETS = (('b', 'c', 1.0), ('b', 'a', None), ('b', 'f', None), ('e', 'd', None))


def children_cpu():
    """User + system seconds of every child process waited for so far (the graphs, the DDP ranks)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--build', default='build')
    ap.add_argument('--batch', type=int, default=256, help='pairs per step (all ranks together)')
    ap.add_argument('--steps', type=int, default=60)
    ap.add_argument('--warmup', type=int, default=10)
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--pairs', type=int, default=8192)
    ap.add_argument('--sides', default='abcdef', help='which sides to run, e.g. bcf')
    ap.add_argument('--system-malloc', action='store_true',
                    help="every side with glibc's default malloc settings (embedflow's own are switched off)")
    a = ap.parse_args()
    if a.system_malloc:
        os.environ['EMBEDFLOW_SYSTEM_MALLOC'] = '1'
    elif os.environ.get('GLIBC_TUNABLES') != TUNABLES:
        os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ, GLIBC_TUNABLES=TUNABLES))
    cli = os.path.join(a.build, 'bin', 'embedflow')
    load_before = loadavg()
    with tempfile.TemporaryDirectory() as work:
        h5, raw = os.path.join(work, 'pairs.h5'), os.path.join(work, 'pairs_u8.h5')
        data = make_pairs(h5, a.pairs, raw)
        run = {
            'a': lambda: embedflow_single(cli, work, h5, a.batch, a.steps, a.warmup),
            'b': lambda: embedflow_ranks(cli, work, h5, a.batch, a.steps, a.warmup, 2),
            'c': lambda: pytorch_ddp(data, a.batch, a.steps, a.warmup, 2),
            'd': lambda: embedflow_ranks(cli, work, raw, a.batch, a.steps, a.warmup, 2, augment=True),
            'e': lambda: embedflow_ranks(cli, work, raw, a.batch, a.steps, a.warmup, 2, augment=True, shard=True),
            'f': lambda: embedflow_ranks(cli, work, h5, a.batch, a.steps, a.warmup, 2, bucket_mb=0),
        }
        sides = [k for k in SIDES if k in a.sides]
        rounds = {k: [] for k in sides}
        cpu = {k: [] for k in sides}  # CPU seconds of a side's processes (all ranks), which the load moves less
        for r in range(a.rounds):
            for k in sides:
                before = children_cpu()
                rounds[k].append(run[k]())
                cpu[k].append(children_cpu() - before)
            print(f'round {r + 1}: ' + ', '.join(f'({k}) {rounds[k][-1]:.0f}' for k in sides), flush=True)
    best = {k: max(v) for k, v in rounds.items()}
    print(f'\nsmall_cnn siamese, contrastive, Adam, batch {a.batch} pairs, {a.steps - a.warmup} timed steps, '
          f'best of {a.rounds} rounds (pairs/s); malloc: {os.environ.get("GLIBC_TUNABLES", "glibc defaults")} on every '
          f'side; load average before {load_before}, after {loadavg()}')
    for k in sides:
        v = rounds[k]
        print(spread_line(f'({k})', v, 'pairs/s') + '; CPU s of all processes: ' + ', '.join(f'{c:.1f}' for c in cpu[k]))
    print('| side | pairs/s |\n|---|---:|')
    for k in sides:
        print(f'| ({k}) {SIDES[k]} | {best[k]:.0f} |')
    for num, den, target in TARGETS:
        if num in rounds and den in rounds:
            print(ratio_line(f'({num})/({den})', [x / y for x, y in zip(rounds[num], rounds[den])], target) +
                  f'; best/best {best[num] / best[den]:.2f}')


if __name__ == '__main__':
    main()
