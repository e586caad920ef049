#!/usr/bin/python3
"""PyTorch prototype of graphs/fuzzy_geo_fashion.yaml's model, for trying training variants fast.

It trains the graph's siamese small CNN (three 3x3 conv + batch norm + ReLU + 2x2 max-pool blocks
of 32, 64 and 128 channels, a 128-unit hidden layer, a 64-d head) on Fashion-MNIST classes 0-4 and
scores MAP@R and P@1 of the conv features (what the graph retrieves with) on the test images of
classes 5-9, cosine distance: the main job's protocol. The weak labels are simulated from the class
labels as the geo pairs are at p = 0: positives are two images of one class, negatives two random
images (about 20% share a class, as photos of one class in two far-apart neighbourhoods do).

The README's "why the target looks out of reach" figures come from this script, e.g.
  /usr/bin/python3 tools/prototypes/fuzzy_fashion.py --seed 0                  # the graph's recipe
  /usr/bin/python3 tools/prototypes/fuzzy_fashion.py --seed 0 --augment        # crop + flip both members
  /usr/bin/python3 tools/prototypes/fuzzy_fashion.py --seed 0 --instance 0.5   # half the positives (x, aug x)
  /usr/bin/python3 tools/prototypes/fuzzy_fashion.py --seed 0 --loss supcon    # two views, class positives
  /usr/bin/python3 tools/prototypes/fuzzy_fashion.py --seed 0 --loss simclr    # two views, image positives
  /usr/bin/python3 tools/prototypes/fuzzy_fashion.py --seed 0 --positive-margin 0.5
  /usr/bin/python3 tools/prototypes/fuzzy_fashion.py --seed 0 --noise 0.3      # 30% random positives
  /usr/bin/python3 tools/prototypes/fuzzy_fashion.py --seed 0 --loss ce --steps 500 --batch 256
Each run takes 3-15 min on one core (--threads). MAP@R is computed here with NumPy; the graph's
eval.retrieval is tested against scikit-learn, and both give 0.4706 on the pixels (--steps 0
prints the pixel and untrained-network scores).
"""
import argparse
import gzip
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DATA = "/usr/share/datasets/fashion-mnist/"


def idx_images(name):
    return np.frombuffer(gzip.open(DATA + name).read(), np.uint8, offset=16).reshape(-1, 28, 28)


def idx_labels(name):
    return np.frombuffer(gzip.open(DATA + name).read(), np.uint8, offset=8).astype(np.int64)


def load_split():
    """Training images of classes 0-4, test images of classes 5-9 (the graph's split)."""
    xtr, ytr = idx_images("train-images-idx3-ubyte.gz"), idx_labels("train-labels-idx1-ubyte.gz")
    xte, yte = idx_images("t10k-images-idx3-ubyte.gz"), idx_labels("t10k-labels-idx1-ubyte.gz")
    return xtr[ytr < 5], ytr[ytr < 5], xte[yte >= 5], yte[yte >= 5]


def tensor(x):
    return torch.tensor(x, dtype=torch.float32)[:, None] / 255.0


class SmallCnn(nn.Module):
    """torch.small_cnn with the graph's settings; features() is torch.embed's `features` output."""

    def __init__(self, channels=(32, 64, 128), hidden=128, dim=64):
        super().__init__()
        blocks, cin = [], 1
        for c in channels:
            blocks += [nn.Conv2d(cin, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU(), nn.MaxPool2d(2)]
            cin = c
        self.conv = nn.Sequential(*blocks)
        flat = self.conv(torch.zeros(1, 1, 28, 28)).numel()
        self.head = nn.Sequential(nn.Linear(flat, hidden), nn.ReLU(), nn.Linear(hidden, dim))

    def features(self, x):
        return self.conv(x).flatten(1)

    def forward(self, x):
        return self.head(self.features(x))


def map_at_r(e, y):
    """(MAP@R, P@1) with cosine distance, each test image querying all the others."""
    e = e.astype(np.float64)
    e /= np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)
    d = -e @ e.T
    np.fill_diagonal(d, np.inf)
    r = np.bincount(y)[y] - 1
    order = np.argsort(d, 1, kind="stable")[:, : r.max()]
    rel = y[order] == y[:, None]
    scores = []
    for i in range(len(y)):
        hits = rel[i, : r[i]]
        scores.append((np.cumsum(hits) / np.arange(1, r[i] + 1) * hits).sum() / r[i])
    return round(float(np.mean(scores)), 4), round(float(rel[:, 0].mean()), 4)


def embed_features(net, x, batch=1000):
    net.eval()
    with torch.no_grad():
        out = np.concatenate([net.features(tensor(x[i : i + batch])).numpy() for i in range(0, len(x), batch)])
    net.train()
    return out


def augment(x, min_scale):
    """Random resized crop (area min_scale..1, aspect 3/4..4/3) and horizontal flip, per image."""
    n = len(x)
    area = torch.empty(n).uniform_(min_scale, 1.0).sqrt()
    aspect = torch.empty(n).uniform_(3 / 4, 4 / 3).sqrt()
    sx, sy = (area * aspect).clamp(max=1), (area / aspect).clamp(max=1)
    tx = (1 - sx) * torch.empty(n).uniform_(-1, 1)
    ty = (1 - sy) * torch.empty(n).uniform_(-1, 1)
    flip = torch.where(torch.rand(n) < 0.5, -1.0, 1.0)
    theta = torch.zeros(n, 2, 3)
    theta[:, 0, 0], theta[:, 0, 2], theta[:, 1, 1], theta[:, 1, 2] = sx * flip, tx, sy, ty
    grid = F.affine_grid(theta, x.shape, align_corners=False)
    return F.grid_sample(x, grid, align_corners=False)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--batch", type=int, default=128, help="pairs, or images (supcon, simclr: two views each; ce)")
    ap.add_argument("--lr", type=float, default=1e-3, help="Adam")
    ap.add_argument("--loss", choices=["contrastive", "supcon", "simclr", "ce"], default="contrastive")
    ap.add_argument("--margin", type=float, default=1.0, help="negative margin of the squared contrastive loss")
    ap.add_argument("--positive-margin", type=float, default=0.0, help="positives closer than this cost nothing")
    ap.add_argument("--noise", type=float, default=0.0, help="fraction of positives replaced by random pairs")
    ap.add_argument("--augment", action="store_true", help="crop + flip both members of every pair")
    ap.add_argument("--instance", type=float, default=0.0, help="fraction of positives that are (x, augmented x)")
    ap.add_argument("--min-scale", type=float, default=0.6, help="smallest crop area")
    ap.add_argument("--temperature", type=float, default=0.1, help="supcon / simclr")
    ap.add_argument("--every", type=int, default=200, help="score the test set every N steps")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--save", help="write the final test features here (.npy)")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)
    xtr, ytr, xte, yte = load_split()
    net = SmallCnn(dim=5 if a.loss == "ce" else 64)
    opt = torch.optim.Adam(net.parameters(), lr=a.lr)
    by_class = [np.flatnonzero(ytr == c) for c in range(5)]
    score = lambda: map_at_r(embed_features(net, xte), yte)
    if a.steps == 0:
        print("pixels (MAP@R, P@1)", map_at_r(xte.reshape(len(xte), -1).astype(np.float64), yte))
    print("step 0 (MAP@R, P@1)", score(), flush=True)
    t0 = time.time()
    b = a.batch
    for step in range(1, a.steps + 1):
        if a.loss == "contrastive":
            i = rng.integers(0, len(ytr), b)
            pos = rng.random(b) < 0.5
            j = np.where(pos, [rng.choice(by_class[ytr[k]]) for k in i], rng.integers(0, len(ytr), b))
            if a.noise > 0:
                j = np.where(pos & (rng.random(b) < a.noise), rng.integers(0, len(ytr), b), j)
            inst = pos & (rng.random(b) < a.instance) if a.instance > 0 else np.zeros(b, bool)
            j = np.where(inst, i, j)
            x = tensor(np.concatenate([xtr[i], xtr[j]]))
            if a.augment:
                x = augment(x, a.min_scale)
            elif inst.any():
                second = torch.where(torch.tensor(inst)[:, None, None, None], augment(x[b:], a.min_scale), x[b:])
                x = torch.cat([x[:b], second])
            e = net(x)
            d = (e[:b] - e[b:]).norm(dim=1)
            z = torch.tensor(pos, dtype=torch.float32)
            loss = (z * (d - a.positive_margin).clamp(min=0) ** 2 + (1 - z) * (a.margin - d).clamp(min=0) ** 2).mean()
        elif a.loss in ("supcon", "simclr"):
            i = rng.integers(0, len(ytr), b)
            n = len(i)
            x = tensor(xtr[i])
            e = F.normalize(net(torch.cat([augment(x, a.min_scale), augment(x, a.min_scale)])), dim=1)
            sim = (e @ e.T / a.temperature).masked_fill(torch.eye(2 * n, dtype=torch.bool), -1e9)
            idx = torch.arange(2 * n) % n
            positive = idx[:, None] == idx[None]
            if a.loss == "supcon":
                lab = torch.tensor(np.concatenate([ytr[i], ytr[i]]))
                positive |= lab[:, None] == lab[None]
            positive.fill_diagonal_(False)
            logp = sim - sim.logsumexp(1, keepdim=True)
            loss = -((logp * positive).sum(1) / positive.sum(1)).mean()
        else:  # ce: the true class labels, an upper bound on what p = 0 pairs can carry
            i = rng.integers(0, len(ytr), b)
            loss = F.cross_entropy(net(tensor(xtr[i])), torch.tensor(ytr[i]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % a.every == 0 or step == a.steps:
            print(f"step {step} loss {float(loss):.4f} (MAP@R, P@1) {score()} {time.time() - t0:.0f} s", flush=True)
    if a.save:
        np.save(a.save, embed_features(net, xte))


if __name__ == "__main__":
    main()
