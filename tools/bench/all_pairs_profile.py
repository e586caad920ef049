#!/usr/bin/python3
"""Profile of torch.all_pairs_contrastive's two formulations in PyTorch (the same 1.13 kernels as
the LibTorch the plugin links): the previous one, autograd through cdist (no matrix-product
shortcut), triu and masked_select, and the current one (AllPairsFunction in
plugins/torch/batch_losses.cpp): distances from the Gram matrix, analytic backward pass
grad = rowsum(W) x - W x.
Prints the best-of-rounds time of forward + backward per formulation and batch shape, the values'
and gradients' largest differences, and the profiler's top operators of the old formulation.
With --cli, it also times whole torch.train steps through the embedflow CLI: a 16-d linear model
(torch.mlp) on random 16-d features in batches of 64, with torch.l2_embedding (a trivial loss:
the trainer's own cost), torch.all_pairs_contrastive and torch.batch_hard_triplet (which still
goes through cdist), 400 steps each, and prints each run's samples/s and ms per step.

    /usr/bin/python3 tools/bench/all_pairs_profile.py --threads 2
    /usr/bin/python3 tools/bench/all_pairs_profile.py --threads 2 --cli build/bin/embedflow
"""
import argparse
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--shapes", default="64x16,256x16,128x64")
ap.add_argument("--cli", default="", help="embedflow binary: also time torch.train steps through it")
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

if args.cli:
    import os, re, subprocess, tempfile
    import h5py
    import numpy as np
    tmp = tempfile.mkdtemp(prefix="all_pairs_")
    rng = np.random.default_rng(0)
    n = 64 * 400
    with h5py.File(f"{tmp}/f.h5", "w") as f:
        g = f.create_group("data")
        g["image"] = rng.standard_normal((n, 16)).astype(np.float32)
        g["label"] = rng.integers(0, 5, n).astype(np.int64)
        g["id"] = np.arange(n)
    env = dict(os.environ)
    env.setdefault("EMBEDFLOW_PLUGIN_PATH", os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(args.cli))), "plugins"))
    print(f"torch.train through {args.cli}: torch.mlp 16 -> 16, batches of 64, 400 steps, {args.threads} LibTorch threads")
    for loss in ("{type: torch.l2_embedding}", "{type: torch.all_pairs_contrastive, margin: 2.0}",
                 "{type: torch.batch_hard_triplet}"):
        rates = []
        for _ in range(args.rounds):
            with open(f"{tmp}/g.yaml", "w") as f:
                f.write(f"""seed: 1
nodes:
  data:  {{type: io.hdf5_reader, params: {{path: {tmp}/f.h5, object: data, batch_size: 64}}}}
  train: {{type: torch.train, params: {{model: {{type: torch.mlp, embedding_dim: 16}}, loss: {loss}, max_steps: 400, threads: {args.threads}, log_every: 400}}}}
  show:  {{type: core.sink, params: {{mode: print}}}}
edges: [data.out -> train.in, train.metrics -> show.in]
""")
            r = subprocess.run([args.cli, "run", f"{tmp}/g.yaml", "--threads", "2"], env=env, capture_output=True, text=True)
            m = re.search(r"samples_per_s: ([0-9.e+]+)", r.stdout + r.stderr)
            if not m:
                raise SystemExit(r.stderr)
            rates.append(float(m.group(1)))
        best = max(rates)
        print(f"{loss}: best {best:.0f} samples/s = {64000 / best:.2f} ms per step "
              f"(rounds: {', '.join(f'{x:.0f}' for x in rates)})")
