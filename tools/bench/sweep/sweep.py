#!/usr/bin/env python3
"""`embedflow sweep` against the same runs launched one by one without the shared stage cache.

The graph (graph.yaml) decodes every photo of a rendered city (the expensive stage, cached and
independent of the swept variables and the seed), embeds them with an untrained ResNet whose
width and embedding size are swept (3 x 3) and whose weights follow the seed (3 seeds), and
scores the embeddings. Side (a) is one `embedflow sweep --jobs J` into a fresh folder and a fresh
stage cache; side (b) is the 27 `embedflow run --no-cache` commands, one after the other, each
with every core for its graph threads (decoding). Both embed with one LibTorch thread, so both
compute the same floats in the same order and their metrics must be identical. Rounds alternate the sides; the verdict on (b)/(a) >= 2 comes from
tools/bench/rounds.py. Every round also checks that both sides produced identical metrics.

    tools/bench/sweep/sweep.py [--rounds 3] [--photos 1500] [--jobs 2]
"""
import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(HERE.parent))
import rounds  # noqa: E402

WIDTHS, DIMS, SEEDS = [4, 8, 16], [16, 32, 64], [1, 2, 3]


def render(build, folder, photos):
    if (folder / "meta.csv").exists():
        return
    folder.mkdir(parents=True)
    subprocess.run([str(build / "bin" / "gen_photos"), "--rows", str(photos), "--seed", "11", "--timelapse-frames", "0",
                    "--out", "meta.csv", "--images", "img", "--triplets", "triplets.csv", "--triplet-count", "400",
                    "--split", "split.csv"], cwd=folder, check=True, stdout=subprocess.DEVNULL)


def table(folder):
    rows = json.loads((folder / "table.json").read_text())["methods"]
    return {r["method"]: {k: r.get(k) for k in ("triplet_accuracy", "P@1", "MAP@R")} for r in rows}


def sweep_side(cli, graph, data, work, jobs):
    out, cache = work / "sweep", work / "sweep-cache"
    t0 = time.perf_counter()
    subprocess.run([str(cli), "sweep", str(graph), "--set", f"data={data}", "--grid", "width=" + ",".join(map(str, WIDTHS)),
                    "--grid", "dim=" + ",".join(map(str, DIMS)), "--seeds", ",".join(map(str, SEEDS)), "--jobs", str(jobs),
                    "--out", str(out), "--cache-dir", str(cache), "--no-report"], check=True, stderr=subprocess.DEVNULL)
    seconds = time.perf_counter() - t0
    s = json.loads((out / "sweep.json").read_text())
    results = {(p["values"]["width"], p["values"]["dim"], p["seed"]): table(out / p["dir"]) for p in s["points"]}
    stages = {st["node"]: (st["computed"], st["replayed"]) for st in s["stages"]}
    return seconds, results, stages


def one_by_one_side(cli, graph, data, work):
    t0 = time.perf_counter()
    results = {}
    for w in WIDTHS:
        for d in DIMS:
            for seed in SEEDS:
                out = work / "single" / f"w{w}-d{d}-s{seed}"
                subprocess.run([str(cli), "run", str(graph), "--set", f"data={data}", "--set", f"width={w}", "--set", f"dim={d}",
                                "--seed", str(seed), "--out", str(out), "--no-cache",
                                "--no-report", "--quiet"], check=True)
                results[(str(w), str(d), seed)] = table(out)
    return time.perf_counter() - t0, results


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--photos", type=int, default=1500)
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--build", default=str(ROOT / "build"))
    args = ap.parse_args()
    build = pathlib.Path(args.build)
    cli = build / "bin" / "embedflow"
    data = ROOT / "out" / "bench_sweep_data" / f"city{args.photos}"
    render(build, data, args.photos)
    paired = []
    print(f"load {rounds.loadavg()}; {len(WIDTHS) * len(DIMS)} variants x {len(SEEDS)} seeds; {args.photos} photos; "
          f"sweep --jobs {args.jobs}")
    for r in range(args.rounds):
        work = pathlib.Path(tempfile.mkdtemp(prefix="bench_sweep_"))
        try:
            sides = [("sweep", lambda: sweep_side(cli, HERE / "graph.yaml", data, work, args.jobs)),
                     ("one by one", lambda: one_by_one_side(cli, HERE / "graph.yaml", data, work))]
            if r % 2:
                sides.reverse()
            got = {name: fn() for name, fn in sides}
            a_s, a_results, stages = got["sweep"]
            b_s, b_results = got["one by one"]
            same = a_results == b_results
            paired.append(b_s / a_s)
            print(f"round {r + 1}: sweep {a_s:.1f} s (images computed {stages['images'][0]}, replayed "
                  f"{stages['images'][1]}), one by one {b_s:.1f} s, ratio {b_s / a_s:.2f}, identical metrics: {same}; "
                  f"load {rounds.loadavg()}", flush=True)
            if not same:
                for k in sorted(a_results):
                    if a_results[k] != b_results.get(k):
                        print(f"  differs at {k}: {a_results[k]} vs {b_results.get(k)}")
                sys.exit(1)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print(rounds.ratio_line("(one by one)/(sweep)", paired, 2.0))


if __name__ == "__main__":
    main()
