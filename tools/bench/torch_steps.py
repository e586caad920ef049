#!/usr/bin/python3
"""Training-step throughput of torch.small_cnn (batch 256, Fashion-MNIST-sized tensors) against
the same model, loss and optimizer in PyTorch (Debian's python3-torch), in one run, same threads.

  (a) embedflow: io.hdf5_reader -> torch.train (the graph end to end, no augmentation);
  (b) PyTorch: the same steps on tensors already in memory (no data loading at all).

Both use batch-hard triplet loss and Adam; the first `--warmup` steps are not timed. The two
sides alternate for `--rounds` rounds and each reports its best round, so a burst of load from
other processes on a shared machine does not decide the ratio.

  /usr/bin/python3 tools/bench/torch_steps.py --cli build-torch/bin/embedflow --threads 2
"""
import argparse
import gzip
import os
import subprocess
import tempfile
import time

import h5py
import numpy as np
import torch


def fashion(n):
    src = '/usr/share/datasets/fashion-mnist/'
    with gzip.open(src + 'train-images-idx3-ubyte.gz') as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
    with gzip.open(src + 'train-labels-idx1-ubyte.gz') as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)
    return x[:n].astype(np.float32) / 255, y[:n].astype(np.int64)


class SmallCnn(torch.nn.Module):
    """torch.small_cnn with its defaults: channels [32, 64], batch norm, hidden 128, embedding 64."""

    def __init__(self):
        super().__init__()
        layers, c = [], 1
        for ch in (32, 64):
            layers += [torch.nn.Conv2d(c, ch, 3, padding=1, bias=False), torch.nn.BatchNorm2d(ch), torch.nn.ReLU(),
                       torch.nn.MaxPool2d(2)]
            c = ch
        self.features = torch.nn.Sequential(*layers)
        self.head = torch.nn.Sequential(torch.nn.Linear(64 * 7 * 7, 128), torch.nn.ReLU(), torch.nn.Linear(128, 64))

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


def batch_hard(x, y, margin=0.2):
    d = torch.cdist(x, x, compute_mode='donot_use_mm_for_euclid_dist')
    same = y[None, :] == y[:, None]
    eye = torch.eye(len(y), dtype=torch.bool)
    pos, neg = same & ~eye, ~same
    hp = torch.where(pos, d, torch.zeros_like(d)).amax(1)
    hn = torch.where(neg, d, torch.full_like(d, float('inf'))).amin(1)
    valid = pos.any(1) & neg.any(1)
    return torch.clamp(hp - hn + margin, min=0)[valid].mean()


def pytorch_steps(x, y, batch, steps, warmup, threads):
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = SmallCnn()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    xs, ys = torch.from_numpy(x), torch.from_numpy(y)
    n = len(x) // batch
    t0 = None
    for s in range(steps):
        if s == warmup:
            t0 = time.perf_counter()
        i = s % n
        loss = batch_hard(model(xs[i * batch:(i + 1) * batch]), ys[i * batch:(i + 1) * batch])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return (steps - warmup) * batch / (time.perf_counter() - t0)


def embedflow_steps(cli, x, y, batch, steps, warmup, threads, work):
    data = os.path.join(work, 'fashion.h5')
    with h5py.File(data, 'w') as f:
        f['image'], f['label'] = x, y
    log = os.path.join(work, 'log')
    graph = os.path.join(work, 'bench.yaml')
    with open(graph, 'w') as g:
        g.write(f"""# torch.small_cnn training steps, batch {batch}.
seed: 1
nodes:
  data:  {{type: io.hdf5_reader, params: {{path: {data}, fields: [image, label], batch_size: {batch}, epochs: 100}}}}
  train: {{type: torch.train, params: {{model: {{type: torch.small_cnn}}, loss: {{type: torch.batch_hard_triplet}},
          optimizer: {{type: torch.adam, lr: 0.001}}, max_steps: {steps}, threads: {threads}, log_every: 1, log_dir: {log}}}}}
edges: [data.out -> train.in]
""")
    subprocess.run([cli, 'run', graph, '--quiet', '--threads', str(threads)], check=True)
    rows = np.genfromtxt(os.path.join(log, 'metrics.csv'), delimiter=',', names=True)
    timed = rows[warmup:]
    # Each row's samples_per_s covers one step: total samples over total time.
    return len(timed) * batch / np.sum(batch / timed['samples_per_s'])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--cli', default='build/bin/embedflow')
    ap.add_argument('--threads', type=int, default=2)
    ap.add_argument('--batch', type=int, default=256)
    ap.add_argument('--steps', type=int, default=60)
    ap.add_argument('--warmup', type=int, default=5)
    ap.add_argument('--images', type=int, default=15360)
    ap.add_argument('--rounds', type=int, default=3)
    a = ap.parse_args()
    x, y = fashion(a.images)
    ef_rounds, pt_rounds = [], []
    for _ in range(a.rounds):
        with tempfile.TemporaryDirectory() as work:
            ef_rounds.append(embedflow_steps(a.cli, x, y, a.batch, a.steps, a.warmup, a.threads, work))
        pt_rounds.append(pytorch_steps(x, y, a.batch, a.steps, a.warmup, a.threads))
    ef, pt = max(ef_rounds), max(pt_rounds)
    print(f'threads {a.threads}, batch {a.batch}, {a.steps - a.warmup} timed steps, best of {a.rounds} rounds')
    print('rounds (samples/s): embedflow ' + ', '.join(f'{v:.0f}' for v in ef_rounds) +
          '; PyTorch ' + ', '.join(f'{v:.0f}' for v in pt_rounds))
    print(f'| side | samples/s | steps/s | vs PyTorch |')
    print(f'|---|---|---|---|')
    print(f'| embedflow graph (hdf5_reader -> torch.train) | {ef:.0f} | {ef / a.batch:.2f} | {ef / pt:.2f}x |')
    print(f'| PyTorch, tensors in memory | {pt:.0f} | {pt / a.batch:.2f} | 1x |')


if __name__ == '__main__':
    main()
