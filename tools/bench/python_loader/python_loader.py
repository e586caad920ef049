#!/usr/bin/python3
"""A PyTorch training loop fed two ways, in one run, with the same model, loss and optimizer
(tools/examples/train_geo_pairs.py: the siamese small CNN of graphs/fuzzy_geo_fashion.yaml, the
squared contrastive loss, Adam) on the same geo pairs of Fashion-MNIST classes 0-4, batches of
128 pairs:

  (a) embedflow: Graph(tools/examples/geo_pairs_loader.yaml).stream("aug.out", as_torch=True):
      the cached P_{10,2000} pairs -> shuffle -> batch -> join with the images -> augment both
      images (random resized crop 28 at scale [0.8, 1], horizontal flip, to_tensor, normalize),
      on the engine's threads (--graph-threads);
  (b) PyTorch: a Dataset over the same pairs and images doing the same per pair (look both images
      up by id, the same augmentation with PIL + numpy), DataLoader(batch_size=128,
      shuffle=True, num_workers=2, drop_last=True);
  (c) no loader: the same loop over --held batches taken from (a)'s stream beforehand and held
      in memory as tensors, cycled. This is the ceiling any loader can reach: the model step
      alone. (a)/(c) says what the stream costs the loop, (c)/(b) is the most any loader can
      gain over DataLoader here.

Every side uses --threads PyTorch intra-op threads. The first --warmup steps (graph start and
the whole-set shuffle; worker start) are not timed; a step's time includes waiting for its
batch. The sides take turns for --rounds rounds. Target: (a) >= 1.2 x (b) samples/s, decided on
the median of the rounds' paired ratios and its sign-test interval (tools/bench/rounds.py). The
ceiling (c)/(b) is printed beside it: where (c)/(b) < 1.2, no loader can meet the target.

  PYTHONPATH=build/python /usr/bin/python3 tools/bench/python_loader/python_loader.py --rounds 3
"""
import argparse
import os
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
from train_geo_pairs import LOADER_GRAPH, Trainer, embedflow_batches, train  # noqa: E402
sys.path.insert(0, os.path.join(HERE, ".."))
from rounds import loadavg, median, ratio_line, spread_line  # noqa: E402
from fashion_peer import horizontal_flip, normalized, random_resized_crop  # noqa: E402


def pairs_and_images(embedflow, cache_dir):
    """The pair list and the image table the graph joins, read once through embedflow (untimed):
    the same pairs (from the pair sampler's cache) and the same images for both sides."""
    graph = embedflow.Graph(LOADER_GRAPH, cache_dir=cache_dir, out=os.path.join("out", "python_loader", "setup"))
    with graph.stream("table.out") as s:
        table = next(s)
        ids = np.array(table["id"])
        images = np.array(table["image"]).reshape(len(ids), 28, 28)
    anchor, other, label = [], [], []
    with graph.stream("pairs.out") as s:
        for batch in s:
            anchor.append(np.array(batch["anchor"]))
            other.append(np.array(batch["other"]))
            label.append(np.array(batch["label"]))
    row = {int(i): r for r, i in enumerate(ids)}
    a = np.array([row[int(i)] for i in np.concatenate(anchor)])
    b = np.array([row[int(i)] for i in np.concatenate(other)])
    return images, a, b, np.concatenate(label).astype(np.float32)


class AugmentedPairs(torch.utils.data.Dataset):
    """image.pair_join + image.augment per pair, with PIL + numpy as a torchvision transform does."""

    def __init__(self, images, a, b, label):
        self.images, self.a, self.b, self.label = images, a, b, label

    def __len__(self):
        return len(self.label)

    def augment(self, image, rng):
        from PIL import Image
        img = Image.fromarray(image)
        return torch.from_numpy(normalized(horizontal_flip(random_resized_crop(img, rng, (0.8, 1.0)), rng)))

    def __getitem__(self, i):
        rng = np.random.default_rng((torch.initial_seed() + i) % 2**32)
        return (self.augment(self.images[self.a[i]], rng), self.augment(self.images[self.b[i]], rng),
                torch.tensor(self.label[i]))


def dataloader_batches(dataset, batch, workers):
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch, shuffle=True, num_workers=workers, drop_last=True)
    for a, b, label in loader:
        yield {"a_image": a, "b_image": b, "pair_label": label}


def held_batches(embedflow, batch, graph_threads, count, cache_dir):
    """`count` augmented batches from the graph's stream, copied into memory (untimed)."""
    held = []
    with embedflow_batches(embedflow, batch, graph_threads, cache_dir=cache_dir,
                           out=os.path.join("out", "python_loader", "held")) as batches:
        for b in batches:
            held.append({k: v.clone() for k, v in b.items()})
            if len(held) == count:
                break
    return held


def cycled(held):
    while True:
        yield from held


def rate(times, batch):
    return len(times) * batch / sum(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2, help="PyTorch intra-op threads of both sides")
    ap.add_argument("--graph-threads", type=int, default=1, help="the graph's oneTBB workers, side (a)")
    ap.add_argument("--workers", type=int, default=2, help="DataLoader num_workers, side (b)")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--held", type=int, default=16, help="batches held in memory for side (c)")
    ap.add_argument("--cache-dir", default=None, help="stage cache (default: $EMBEDFLOW_CACHE_DIR, ~/.cache/embedflow)")
    a = ap.parse_args()
    import embedflow
    embedflow.set_log_level("warning")

    torch.set_num_threads(a.threads)
    images, pa, pb, label = pairs_and_images(embedflow, a.cache_dir)
    dataset = AugmentedPairs(images, pa, pb, label)
    load = loadavg()
    held = held_batches(embedflow, a.batch, a.graph_threads, a.held, a.cache_dir)
    rounds = {"a": [], "b": [], "c": []}
    for r in range(a.rounds):
        with embedflow_batches(embedflow, a.batch, a.graph_threads, cache_dir=a.cache_dir,
                               out=os.path.join("out", "python_loader", "a")) as batches:
            _, times = train(batches, a.steps, Trainer(), warmup=a.warmup)
        rounds["a"].append(rate(times, a.batch))
        _, times = train(dataloader_batches(dataset, a.batch, a.workers), a.steps, Trainer(), warmup=a.warmup)
        rounds["b"].append(rate(times, a.batch))
        _, times = train(cycled(held), a.steps, Trainer(), warmup=a.warmup)
        rounds["c"].append(rate(times, a.batch))
    best = {k: max(v) for k, v in rounds.items()}
    print(f"{len(label)} pairs, batch {a.batch}, {a.steps - a.warmup} timed steps per round, {a.rounds} rounds, "
          f"PyTorch threads {a.threads}, graph --threads {a.graph_threads}, DataLoader workers {a.workers}; "
          f"load average before {load}, after {loadavg()}")
    for k, v in rounds.items():
        print(spread_line(f"({k})", v))
    print("| side | samples/s (best round) |")
    print("|---|---:|")
    print(f"| (a) embedflow stream (as_torch) | {best['a']:.0f} |")
    print(f"| (b) PyTorch Dataset + DataLoader(num_workers={a.workers}) | {best['b']:.0f} |")
    print(f"| (c) no loader: {a.held} batches held in memory | {best['c']:.0f} |")
    target = 1.2
    pair = lambda num, den: [x / y for x, y in zip(rounds[num], rounds[den])]  # noqa: E731
    print(ratio_line("(a)/(b)", pair("a", "b"), target) + f"; best/best {best['a'] / best['b']:.2f}")
    print(ratio_line("(a)/(c)", pair("a", "c")) + "  (what the stream costs the loop; 1.00 = nothing)")
    ceiling = pair("c", "b")
    print(ratio_line("(c)/(b)", ceiling) + f"  (the ceiling of (a)/(b): no loader can do better; median "
          f"{'below' if median(ceiling) < target else 'at or above'} the target)")


if __name__ == "__main__":
    main()
