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
  (e) the same with core.shard after the reader: each rank augments only the rows it trains on.

Model: torch.small_cnn defaults (conv 32, conv 64, batch norm, hidden 128, embedding 64) as a
siamese network on pairs, contrastive loss (margin 1), Adam lr 1e-3, batches of --batch pairs.
The first --warmup steps are not timed. The sides take turns for --rounds rounds and each reports
its best round, so a burst of load from other processes does not decide the ratios.

  /usr/bin/python3 tools/bench/data_parallel/data_parallel.py --build build
"""
import argparse
import gzip
import os
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


def graph_text(data, batch, steps, threads, log, extra, augment=False, shard=False):
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
          log_dir: {log}{extra}}}}}
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


def embedflow_ranks(cli, work, data, batch, steps, warmup, ranks, graph_threads=1, augment=False, shard=False):
    port = free_port()
    procs = []
    for rank in reversed(range(ranks)):
        log = os.path.join(work, f'rank{rank}')
        graph = os.path.join(work, f'rank{rank}.yaml')
        with open(graph, 'w') as g:
            g.write(graph_text(data, batch, steps, 1, log,
                               f', world_size: {ranks}, rank: {rank}, rendezvous: "tcp://127.0.0.1:{port}"', augment, shard))
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--build', default='build')
    ap.add_argument('--batch', type=int, default=256, help='pairs per step (all ranks together)')
    ap.add_argument('--steps', type=int, default=60)
    ap.add_argument('--warmup', type=int, default=10)
    ap.add_argument('--rounds', type=int, default=2)
    ap.add_argument('--pairs', type=int, default=8192)
    a = ap.parse_args()
    cli = os.path.join(a.build, 'bin', 'embedflow')
    with tempfile.TemporaryDirectory() as work:
        h5, raw = os.path.join(work, 'pairs.h5'), os.path.join(work, 'pairs_u8.h5')
        data = make_pairs(h5, a.pairs, raw)
        best = {'single': 0.0, 'ranks': 0.0, 'ddp': 0.0, 'ranks_aug': 0.0, 'ranks_aug_shard': 0.0}
        for r in range(a.rounds):
            best['single'] = max(best['single'], embedflow_single(cli, work, h5, a.batch, a.steps, a.warmup))
            best['ranks'] = max(best['ranks'], embedflow_ranks(cli, work, h5, a.batch, a.steps, a.warmup, 2))
            best['ddp'] = max(best['ddp'], pytorch_ddp(data, a.batch, a.steps, a.warmup, 2))
            best['ranks_aug'] = max(best['ranks_aug'], embedflow_ranks(cli, work, raw, a.batch, a.steps, a.warmup, 2, augment=True))
            best['ranks_aug_shard'] = max(best['ranks_aug_shard'],
                                          embedflow_ranks(cli, work, raw, a.batch, a.steps, a.warmup, 2, augment=True, shard=True))
            print(f'round {r + 1}: ' + ', '.join(f'{k} {v:.0f}' for k, v in best.items()), flush=True)
    print(f'\nsmall_cnn siamese, contrastive, Adam, batch {a.batch} pairs, {a.steps - a.warmup} timed steps, '
          f'best of {a.rounds} rounds (pairs/s)')
    print('| side | pairs/s |\n|---|---:|')
    print(f"| (a) embedflow, 1 process x 2 threads | {best['single']:.0f} |")
    print(f"| (b) embedflow, 2 ranks x 1 thread (Gloo) | {best['ranks']:.0f} |")
    print(f"| (c) PyTorch DDP, 2 processes x 1 thread (Gloo) | {best['ddp']:.0f} |")
    print(f"| (d) embedflow, 2 ranks x 1 thread, each augmenting whole batches | {best['ranks_aug']:.0f} |")
    print(f"| (e) embedflow, 2 ranks x 1 thread, core.shard before augmenting | {best['ranks_aug_shard']:.0f} |")
    print(f"ratios: (b)/(a) = {best['ranks'] / best['single']:.2f}, (b)/(c) = {best['ranks'] / best['ddp']:.2f}, "
          f"(e)/(d) = {best['ranks_aug_shard'] / best['ranks_aug']:.2f}")


if __name__ == '__main__':
    main()
