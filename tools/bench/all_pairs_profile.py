#!/usr/bin/python3
"""Profile of torch.all_pairs_contrastive's two formulations in PyTorch (the same 1.13 kernels as
the LibTorch the plugin links): the previous one, autograd through cdist (no matrix-product
shortcut), triu and masked_select, and the current one (plugins/torch/losses.cpp,
AllPairsFunction): distances from the Gram matrix, analytic backward pass grad = rowsum(W) x - W x.
Prints the best-of-rounds time of forward + backward per formulation and batch shape, the values'
and gradients' largest differences, and the profiler's top operators of the old formulation.

    /usr/bin/python3 tools/bench/all_pairs_profile.py --threads 2
"""
import argparse
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--shapes", default="64x16,256x16,128x64")
args = ap.parse_args()
torch.set_num_threads(args.threads)
mu, margin = 0.5, 2.0


def old(x, y):
    n = x.size(0)
    dm = torch.cdist(x, x, 2.0, compute_mode="donot_use_mm_for_euclid_dist")
    eye = torch.eye(n, dtype=torch.bool)
    same = y[None] == y[:, None]
    pos, neg = same & ~eye, ~same
    valid = (pos | neg) & torch.ones_like(pos).triu(1)
    d, z = dm.masked_select(valid), pos.masked_select(valid).float()
    return (mu * z * d ** 2 + (1 - mu) * (1 - z) * torch.clamp_min(margin - d, 0)).mean()


class AllPairs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, pos, neg, pairs):
        sq = x.pow(2).sum(1)
        s = (sq[:, None] + sq[None, :] - 2 * x.mm(x.t())).clamp_min_(0)
        d = s.sqrt()
        zero = torch.zeros(())
        terms = torch.where(pos, mu * s, torch.where(neg, (1 - mu) * (margin - d).clamp_min(0), zero))
        ctx.save_for_backward(x, d, pos, neg)
        ctx.pairs = pairs
        return terms.sum() / pairs

    @staticmethod
    def backward(ctx, g):
        x, d, pos, neg = ctx.saved_tensors
        zero = torch.zeros(())
        pulled = neg & (d < margin) & (d > 0)
        w = torch.where(pos, torch.full((), 2 * mu), zero) - torch.where(
            pulled, (1 - mu) / torch.where(pulled, d, torch.ones_like(d)), zero)
        w = (w + w.t()) * (g / ctx.pairs)
        return w.sum(1, keepdim=True) * x - w.mm(x), None, None, None


def new(x, y):
    n = x.size(0)
    eye = torch.eye(n, dtype=torch.bool)
    same = y[None] == y[:, None]
    idx = torch.arange(n)
    upper = idx[:, None] < idx[None, :]
    pos, neg = same & ~eye & upper, ~same & upper
    return AllPairs.apply(x, pos, neg, int((pos | neg).sum()))


def timed(f, x, y, reps=20):
    best = float("inf")
    for _ in range(args.rounds):
        t = time.perf_counter()
        for _ in range(reps):
            x.grad = None
            f(x, y).backward()
        best = min(best, (time.perf_counter() - t) / reps)
    return best * 1000


print(f"threads {args.threads}; best of {args.rounds} rounds of 20 forward+backward")
for shape in args.shapes.split(","):
    n, dim = map(int, shape.split("x"))
    torch.manual_seed(0)
    x = torch.randn(n, dim, requires_grad=True)
    y = torch.randint(0, 5, (n,))
    vals = {}
    for f in (old, new):
        x.grad = None
        v = f(x, y)
        v.backward()
        vals[f.__name__] = (v.item(), x.grad.clone())
    t_old, t_new = timed(old, x, y), timed(new, x, y)
    dv = abs(vals["old"][0] - vals["new"][0])
    dg = (vals["old"][1] - vals["new"][1]).abs().max().item()
    print(f"batch {n} x {dim}: old {t_old:.2f} ms, new {t_new:.2f} ms, ratio {t_old / t_new:.1f}x; "
          f"|value diff| {dv:.1e}, max |grad diff| {dg:.1e}")

n, dim = map(int, args.shapes.split(",")[0].split("x"))
x = torch.randn(n, dim, requires_grad=True)
y = torch.randint(0, 5, (n,))
with torch.profiler.profile() as prof:
    for _ in range(20):
        old(x, y).backward()
print(f"old formulation, batch {n} x {dim}, top operators by self CPU time:")
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=6))
