#!/usr/bin/python3
"""A PyTorch training loop fed by embedflow: the siamese small CNN of graphs/fuzzy_geo_fashion.yaml
trained on its geo pairs, with the data half in a graph and the learning half in Python.

  graph (tools/examples/geo_pairs_loader.yaml, on the engine's threads): Fashion-MNIST classes
      0-4 -> synthetic geotags -> P_{10,2000} pairs (cached) -> shuffle -> batches of 128 ->
      join with the images -> augment both images (random resized crop, flip, normalize)
  Python (this file): the model (three conv blocks 32/64/128, a 128-unit hidden layer, a 64-d
      head), the squared contrastive loss (margin 1), Adam (lr 1e-3)

The batches arrive as torch tensors over the graph's own buffers (DLPack, no copy) while the
graph prepares the next ones; the loop reads `a_image`, `b_image` [B,1,28,28] and `pair_label`
[B] (1: a positive pair, 0: a negative one).

  PYTHONPATH=build/python /usr/bin/python3 tools/examples/train_geo_pairs.py --steps 200
"""
import argparse
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
LOADER_GRAPH = os.path.join(HERE, "geo_pairs_loader.yaml")


class SmallCnn(torch.nn.Module):
    """torch.small_cnn with channels [32, 64, 128], embedding_dim 64: conv-BN-ReLU-maxpool blocks,
    a 128-unit hidden layer, a 64-d head."""

    def __init__(self, channels=(32, 64, 128), hidden=128, embedding=64):
        super().__init__()
        layers, c, side = [], 1, 28
        for ch in channels:
            layers += [torch.nn.Conv2d(c, ch, 3, padding=1, bias=False), torch.nn.BatchNorm2d(ch), torch.nn.ReLU(),
                       torch.nn.MaxPool2d(2)]
            c, side = ch, side // 2
        self.features = torch.nn.Sequential(*layers)
        self.head = torch.nn.Sequential(torch.nn.Linear(c * side * side, hidden), torch.nn.ReLU(),
                                        torch.nn.Linear(hidden, embedding))

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


def contrastive_loss(a, b, label, margin=1.0):
    """Squared contrastive loss: positives pulled together, negatives pushed beyond the margin."""
    d = torch.nn.functional.pairwise_distance(a, b)
    return (label * d.pow(2) + (1 - label) * torch.clamp(margin - d, min=0).pow(2)).mean() / 2


class Trainer:
    """Model, loss and optimizer; step() takes one batch of pairs."""

    def __init__(self, seed=0, lr=1e-3):
        torch.manual_seed(seed)
        self.model = SmallCnn()
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=lr)

    def step(self, a_image, b_image, label):
        # One forward pass over both members, as a siamese network shares its weights.
        embeddings = self.model(torch.cat([a_image, b_image]))
        a, b = embeddings.split(len(a_image))
        loss = contrastive_loss(a, b, label)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()


def train(batches, steps, trainer, warmup=0, log_every=0, log=print):
    """Runs `steps` steps over an iterator of {a_image, b_image, pair_label} batches. Returns
    (losses, seconds per timed step); a step's time includes waiting for its batch."""
    losses, times = [], []
    last = time.perf_counter()
    for s, batch in enumerate(batches):
        if s == steps:
            break
        loss = trainer.step(batch["a_image"], batch["b_image"], batch["pair_label"])
        now = time.perf_counter()
        if s >= warmup:
            times.append(now - last)
        last = now
        losses.append(loss)
        if log_every and (s + 1) % log_every == 0:
            log(f"step {s + 1}: loss {loss:.4f}")
    return losses, times


def embedflow_batches(embedflow, batch=128, graph_threads=2, seed=None, cache_dir=None, out=None, capacity=4):
    """The graph's augmented pair batches as torch tensors (a Stream: close it, or leave the loop)."""
    graph = embedflow.Graph(LOADER_GRAPH, set={"batch": batch, "sink": False}, seed=seed, threads=graph_threads,
                            cache_dir=cache_dir, out=out)
    return graph.stream("aug.out", as_torch=True, capacity=capacity)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2, help="PyTorch intra-op threads")
    ap.add_argument("--graph-threads", type=int, default=2, help="the graph's oneTBB worker threads")
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--seed", type=int, default=None, help="graph seed (default: the graph's)")
    ap.add_argument("--cache-dir", default=None, help="stage cache (default: $EMBEDFLOW_CACHE_DIR, ~/.cache/embedflow)")
    ap.add_argument("--out", default=None, help="the loader run's record folder (default: out/geo_pairs_loader)")
    ap.add_argument("--save", default=None, help="write the trained model's state_dict here")
    a = ap.parse_args()
    import embedflow

    torch.set_num_threads(a.threads)
    trainer = Trainer()
    with embedflow_batches(embedflow, a.batch, a.graph_threads, a.seed, a.cache_dir, a.out) as batches:
        losses, times = train(batches, a.steps, trainer, warmup=min(5, a.steps // 2), log_every=a.log_every)
    if len(losses) < a.steps:
        print(f"the graph ended after {len(losses)} batches", file=sys.stderr)
    rate = len(times) * a.batch / sum(times) if times else 0.0
    print(f"{len(losses)} steps of {a.batch} pairs, loss {losses[0]:.4f} -> {losses[-1]:.4f}, "
          f"{rate:.0f} pairs/s after warm-up")
    if a.save:
        torch.save(trainer.model.state_dict(), a.save)


if __name__ == "__main__":
    main()
