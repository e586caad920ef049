#!/usr/bin/python3
"""Approximate neighbour search at collection scale: embedflow's index path against its exact search.

Data: a 1M x 128 gallery and 10k queries drawn from one mixture of 1000 anisotropic Gaussian
clusters (each cluster a random rotation of a decaying spectrum of axis scales, cluster sizes
Zipf-like), every row scaled to unit length, as a CNN's embeddings are; a row's label is its
cluster. Written once (numpy, h5py) to WORK/ann_data.h5 and reused.

The indexes: eval.index_build over the gallery, metric euclidean, built once into WORK and reused:
ivf (nlist NLIST, k-means on TRAIN rows) and hnsw (M, efConstruction EF_CONSTRUCTION); their
build times are printed.

Sides, in interleaved rounds (the order rotates each round), each one `embedflow run` in a fresh
process at --threads THREADS:
  exact  eval.knn_classifier, k = 10: embedflow's exact search (blocked SGEMM, double-precision
         rescoring) of every query over the whole gallery, and the kNN vote
  ivf    eval.index_knn, k = 10, one side per nprobe in NPROBES: the same vote through the ivf
         index (recall_queries 0 in timed runs)
  hnsw   the same through the hnsw index, one side per efSearch in EF_SEARCHES
  faiss  faiss Python's IndexFlatL2 search of the same queries, k = 10 (the reference for what
         exact search costs on this machine)
Time is CPU time: each run's process CPU seconds from run.json (every thread: the readers, the
BLAS and OpenMP pools, loading the index file, the search and the vote), and faiss's search's
process CPU seconds. CPU rather than wall time because this machine is shared: a benchmark run at
nice 19 gets whatever share of the two cores others leave, and its wall time measures them as
much as the search. Each run's evaluating node's busy wall time is printed beside it. The
headline speed-up is exact / approximate whole-process CPU per round; recall@10 is what
eval.index_knn measures against exact search on RECALL evenly spaced queries (one untimed run per
setting), checked here against the exact side's kNN accuracy. The target: some setting with
recall@10 >= 0.95 at a headline speed-up >= 20, decided from the paired rounds by
tools/bench/rounds.py.

Search only, as faiss's and ann-benchmarks' tables count it: the CPU seconds of the index's
search call alone (search_cpu_s in eval.index_knn's JSON: no process start, index load, query
reading or vote), against faiss IndexFlatL2's search of the same queries (the faiss side), paired
per round. Printed beside the headline, labelled; it decides nothing.

  /usr/bin/python3 tools/bench/ann/ann.py --build build [--rounds 3] [--nprobes 8,16,32,64] [--ef-searches 32,64,128]
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from rounds import loadavg, median, ratio_line, verdict  # noqa: E402

TARGET_RECALL, TARGET_SPEEDUP, K = 0.95, 20.0, 10
SPREAD, CENTRES = 0.3, 0.05  # within-class axis scale; spread of the class centres


def make_data(path, gallery, queries, dim, clusters, seed=7):
    rng = np.random.default_rng(seed)
    # Class centres share a common direction (a CNN's ReLU features are all positive) and spread
    # in a low-dimensional subspace, so neighbouring classes overlap as real ones do.
    common = rng.normal(size=dim)
    basis = np.linalg.qr(rng.normal(size=(dim, 24)))[0].T
    centres = (0.6 * common / np.linalg.norm(common) + rng.normal(size=(clusters, 24)) @ basis * CENTRES).astype(np.float32)
    # Decaying spectra, a few dominant directions per cluster, each in its own rotated frame.
    spectrum = (np.arange(1, dim + 1) ** -0.6).astype(np.float32)
    scales = SPREAD * spectrum[None, :] * np.exp(rng.normal(scale=0.3, size=(clusters, dim))).astype(np.float32)
    rotations = np.linalg.qr(rng.normal(size=(clusters, dim, dim)))[0].astype(np.float32)
    weights = 1.0 / np.arange(1, clusters + 1) ** 0.5
    weights /= weights.sum()

    def draw(n):
        y = rng.choice(clusters, size=n, p=weights)
        x = np.empty((n, dim), np.float32)
        for c in np.unique(y):
            rows = np.flatnonzero(y == c)
            z = rng.standard_normal((len(rows), dim), dtype=np.float32) * scales[c]
            x[rows] = centres[c] + z @ rotations[c]
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        return x, y.astype(np.int64)

    import h5py
    tmp = path + '.tmp'
    with h5py.File(tmp, 'w') as f:
        for name, n in (('gallery', gallery), ('query', queries)):
            x, y = draw(n)
            f[name + '/embedding'], f[name + '/label'] = x, y
    os.replace(tmp, path)


def embedflow_run(binary, graph_text, threads, work, tag):
    out = tempfile.mkdtemp(prefix=tag + '-', dir=work)
    graph = os.path.join(out, 'graph.yaml')
    with open(graph, 'w') as f:
        f.write(graph_text)
    start = time.perf_counter()
    res = subprocess.run([binary, 'run', graph, '--threads', str(threads), '--out', out, '--no-cache'],
                         capture_output=True, text=True)
    wall = time.perf_counter() - start
    if res.returncode != 0:
        sys.exit(f'{tag} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}')
    record = json.load(open(next(pathlib.Path(out).rglob('run.json'))))
    return record, wall, res.stdout + res.stderr, out


def node_wall(record, node):
    return next(n['wall_s'] for n in record['nodes'] if n['id'] == node)


def readers(data, batch):
    return (f'  train: {{type: io.hdf5_reader, params: {{path: {data}, object: gallery, batch_size: {batch}}}}}\n'
            f'  test:  {{type: io.hdf5_reader, params: {{path: {data}, object: query, batch_size: {batch}}}}}\n')


def exact_graph(data, out):
    return ('seed: 1\nvars: {out: out/ann}\nnodes:\n' + readers(data, 8192) +
            f'  knn: {{type: eval.knn_classifier, params: {{k: {K}, out: "{out}/knn"}}}}\n'
            'edges: [train.out -> knn.train, test.out -> knn.test]\n')


def index_graph(data, index, setting, value, recall_queries, out):
    return ('seed: 1\nvars: {out: out/ann}\nnodes:\n' +
            f'  test: {{type: io.hdf5_reader, params: {{path: {data}, object: query, batch_size: 8192}}}}\n'
            f'  knn: {{type: eval.index_knn, params: {{path: {index}, k: {K}, {setting}: {value}, '
            f'recall_queries: {recall_queries}, out: "{out}/knn"}}}}\n'
            'edges: [test.out -> knn.test]\n')


def build_index(binary, data, index, params, threads, work, tag):
    if os.path.exists(index) and os.path.exists(index + '.h5'):
        return
    graph = ('seed: 1\nnodes:\n' +
             f'  gallery: {{type: io.hdf5_reader, params: {{path: {data}, object: gallery, batch_size: 8192}}}}\n'
             f'  build: {{type: eval.index_build, params: {{{params}, path: {index}}}}}\n'
             'edges: [gallery.out -> build.gallery]\n')
    record, wall, _, _ = embedflow_run(binary, graph, threads, work, tag)
    print(f'{tag} index built in {node_wall(record, "build"):.1f} s (process {wall:.1f} s): {params}')


def faiss_flat_seconds(data, threads):
    import faiss
    import h5py
    with h5py.File(data) as f:
        g, q = f['gallery/embedding'][()], f['query/embedding'][()]
    faiss.omp_set_num_threads(threads)
    index = faiss.IndexFlatL2(g.shape[1])
    index.add(g)
    start = time.process_time()
    index.search(q, K)
    return time.process_time() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--build', default='build')
    ap.add_argument('--work', default=None, help='data, index and run folders (default: BUILD/bench_ann)')
    ap.add_argument('--gallery', type=int, default=1_000_000)
    ap.add_argument('--queries', type=int, default=10_000)
    ap.add_argument('--dim', type=int, default=128)
    ap.add_argument('--clusters', type=int, default=1000)
    ap.add_argument('--nlist', type=int, default=4096)
    ap.add_argument('--train', type=int, default=131072)
    ap.add_argument('--nprobes', default='8,16,32,64')
    ap.add_argument('--hnsw-m', type=int, default=32)
    ap.add_argument('--ef-construction', type=int, default=40)
    ap.add_argument('--ef-searches', default='32,64,128')
    ap.add_argument('--recall', type=int, default=1000)
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--threads', type=int, default=2)
    args = ap.parse_args()
    binary = os.path.abspath(os.path.join(args.build, 'bin', 'embedflow'))
    work = os.path.abspath(args.work or os.path.join(args.build, 'bench_ann'))
    os.makedirs(work, exist_ok=True)
    data = os.path.join(work, f'ann_data_{args.gallery}_{args.queries}_{args.dim}_{args.clusters}.h5')
    stem = os.path.join(work, os.path.basename(data)[:-3])
    ivf_index = f'{stem}_ivf{args.nlist}.faiss'
    hnsw_index = f'{stem}_hnsw{args.hnsw_m}_{args.ef_construction}.faiss'
    # A side: (name, index file, search parameter, value).
    approx = ([(f'ivf nprobe {p}', ivf_index, 'nprobe', p) for p in map(int, filter(None, args.nprobes.split(',')))] +
              [(f'hnsw efSearch {e}', hnsw_index, 'ef_search', e) for e in map(int, filter(None, args.ef_searches.split(',')))])
    print(f'ann: {args.gallery} x {args.dim} gallery, {args.queries} queries, {args.clusters} clusters, k = {K}, '
          f'{args.rounds} rounds, --threads {args.threads}; load {loadavg()}')
    if not os.path.exists(data):
        start = time.perf_counter()
        make_data(data, args.gallery, args.queries, args.dim, args.clusters)
        print(f'data written in {time.perf_counter() - start:.0f} s: {data}')
    if any(a[1] == ivf_index for a in approx):
        build_index(binary, data, ivf_index, f'kind: ivf, nlist: {args.nlist}, nprobe: 8, train_size: {args.train}',
                    args.threads, work, 'ivf')
    if any(a[1] == hnsw_index for a in approx):
        build_index(binary, data, hnsw_index, f'kind: hnsw, M: {args.hnsw_m}, ef_construction: {args.ef_construction}',
                    args.threads, work, 'hnsw')

    recall = {}
    for name, index, setting, value in approx:
        _, _, _, out = embedflow_run(binary, index_graph(data, index, setting, value, args.recall, '${out}'), args.threads,
                                     work, 'recall-' + name.replace(' ', '-'))
        result = json.load(open(os.path.join(out, 'knn.json')))
        recall[name] = result['index']['recall']
        print(f'{name}: recall@{K} {recall[name]:.4f} on {result["index"]["recall_queries"]} queries, '
              f'kNN accuracy {result["accuracy"]:.4f}')

    sides = ['exact', 'faiss'] + [a[0] for a in approx]
    settings = {a[0]: a for a in approx}
    times = {s: [] for s in sides}
    process = {s: [] for s in sides if s != 'faiss'}
    search_only = {a[0]: [] for a in approx}
    accuracy = {}
    for r in range(args.rounds):
        order = sides[r % len(sides):] + sides[:r % len(sides)]
        for side in order:
            if side == 'faiss':
                times['faiss'].append(faiss_flat_seconds(data, args.threads))
                continue
            if side == 'exact':
                graph = exact_graph(data, '${out}')
            else:
                _, index, setting, value = settings[side]
                graph = index_graph(data, index, setting, value, 0, '${out}')
            record, _, _, out = embedflow_run(binary, graph, args.threads, work, f'{side.replace(" ", "-")}-r{r}')
            times[side].append(record['process']['cpu_s'])
            process[side].append(node_wall(record, 'knn'))
            result = json.load(open(os.path.join(out, 'knn.json')))
            accuracy[side] = result['accuracy']
            if side in search_only:
                search_only[side].append(result['index']['search_cpu_s'])
        print(f'round {r + 1}: ' + ', '.join(f'{s} {times[s][-1]:.2f} CPU s' for s in sides) + f'; load {loadavg()}')

    print('\nexact (eval.knn_classifier) CPU s: ' + ', '.join(f'{t:.1f}' for t in times['exact']) +
          f'; node wall {median(process["exact"]):.1f} s median; kNN accuracy {accuracy["exact"]:.4f}')
    print('faiss IndexFlatL2 search CPU s: ' + ', '.join(f'{t:.1f}' for t in times['faiss']))
    print(f'\n| index, search setting | recall@{K} | process CPU s (median) | node wall s (median) | '
          'speed-up vs exact, process CPU (median) | faiss search CPU s (median) | '
          'search only: speed-up vs faiss IndexFlatL2 search (median) | kNN accuracy |')
    print('|---|---:|---:|---:|---:|---:|---:|---:|')
    chosen = None
    for name, *_ in approx:
        paired = [e / t for e, t in zip(times['exact'], times[name])]
        alone = [f / t for f, t in zip(times['faiss'], search_only[name])]
        print(f'| {name} | {recall[name]:.4f} | {median(times[name]):.2f} | {median(process[name]):.1f} | '
              f'{median(paired):.1f}x | {median(search_only[name]):.3f} | {median(alone):.0f}x | {accuracy[name]:.4f} |')
    for name, *_ in approx:
        paired = [e / t for e, t in zip(times['exact'], times[name])]
        print(ratio_line(f'{name} speed-up (process CPU)', paired, TARGET_SPEEDUP) + f'; recall@{K} {recall[name]:.4f}')
        alone = [f / t for f, t in zip(times['faiss'], search_only[name])]
        print(ratio_line(f'{name} search only (faiss IndexFlatL2 search / index search, CPU)', alone))
        if chosen is None and recall[name] >= TARGET_RECALL and verdict(paired, TARGET_SPEEDUP) == 'met':
            chosen = name
    faiss_paired = [e / f for e, f in zip(times['exact'], times['faiss'])]
    print(ratio_line('exact embedflow / faiss flat CPU', faiss_paired))
    print(f'target recall@{K} >= {TARGET_RECALL} at >= {TARGET_SPEEDUP}x: ' +
          (f'met by {chosen}' if chosen else 'not met by any setting tried'))
    print(f'load after: {loadavg()}')


if __name__ == '__main__':
    main()
