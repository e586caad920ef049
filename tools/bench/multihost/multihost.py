#!/usr/bin/python3
"""Data-parallel training across two hosts: torch.train with world_size 2, one rank in each of two
network namespaces joined by a veth pair (netns.py; needs root), against PyTorch's
DistributedDataParallel (Debian's python3-torch, torch.distributed Gloo) with one process in each
of the same two namespaces, in one run.

  (b) embedflow: `embedflow run` in each namespace, world_size 2, rank 0 and 1, tcp:// rendezvous
      at the first namespace's address; each rank reads every batch from HDF5 and trains on its half;
  (c) PyTorch DDP: this script in each namespace (--ddp-worker), init_process_group('gloo') at the
      same address, GLOO_SOCKET_IFNAME the namespace's veth end, each on its half of every batch of
      the same pairs held in memory; bucket_cap_mb 25 and broadcast_buffers, DDP's defaults.

Both sides: one thread per rank, small_cnn siamese on Fashion-MNIST pairs, contrastive loss
(margin 1), Adam lr 1e-3, batches of --batch pairs over both ranks, the first --warmup steps not
timed, the glibc malloc settings `embedflow run` applies to itself on every side (the benchmark
re-executes itself with them as GLIBC_TUNABLES). The sides take turns for --rounds rounds; the
target (b) >= 1.0 x (c) is decided on the paired ratios by tools/bench/rounds.py.

  sudo /usr/bin/python3 tools/bench/multihost/multihost.py --build build
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import h5py

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..'))
sys.path.insert(0, os.path.join(HERE, '..', 'data_parallel'))
from rounds import loadavg, ratio_line, spread_line  # noqa: E402
from data_parallel import TUNABLES, contrastive, graph_text, make_pairs, rate_from_log  # noqa: E402
from netns import TwoHosts  # noqa: E402


def ddp_worker(a):
    """One DDP rank (run inside a namespace): prints pairs/s over the timed steps on rank 0."""
    import torch
    import torch.distributed as dist
    from torch_steps import SmallCnn
    torch.set_num_threads(1)
    dist.init_process_group('gloo', init_method=f'tcp://{a.addr}:{a.port}', rank=a.rank, world_size=2)
    with h5py.File(a.data) as f:
        xa, xb, label = (torch.from_numpy(f[k][:]) for k in ('a_image', 'b_image', 'pair_label'))
    torch.manual_seed(1)
    model = torch.nn.parallel.DistributedDataParallel(SmallCnn())
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    lo, hi = a.batch * a.rank // 2, a.batch * (a.rank + 1) // 2
    n = len(label) // a.batch
    start = None
    for s in range(a.steps):
        if s == a.warmup:
            start = time.perf_counter()
        k = (s % n) * a.batch
        ya = xa[k + lo:k + hi]
        e = model(torch.cat([ya, xb[k + lo:k + hi]]))
        loss = contrastive(e[:len(ya)], e[len(ya):], label[k + lo:k + hi])
        opt.zero_grad()
        loss.backward()
        opt.step()
    elapsed = time.perf_counter() - start
    if a.rank == 0:
        print((a.steps - a.warmup) * a.batch / elapsed, flush=True)
    dist.destroy_process_group()


PORT = [29600 + os.getpid() % 300]


def next_port():
    PORT[0] += 1
    return PORT[0]


def run_pair(cmds, envs):
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e) for c, e in zip(cmds, envs)]
    outs = [p.communicate() for p in procs]
    for p, (_, err) in zip(procs, outs):
        if p.returncode != 0:
            sys.exit(f'{" ".join(p.args)} failed:\n{err}')
    return outs


def embedflow_side(hosts, cli, work, data, a):
    port = next_port()
    cmds = []
    for rank in (0, 1):
        graph = os.path.join(work, f'rank{rank}.yaml')
        with open(graph, 'w') as g:
            g.write(graph_text(data, a.batch, a.steps, 1, os.path.join(work, f'log{rank}'),
                               f', world_size: 2, rank: {rank}, rendezvous: "tcp://{hosts.addr[0]}:{port}"'))
        cmds.append(hosts.run_in(rank, [cli, 'run', graph, '--quiet', '--threads', '1', '--out',
                                        os.path.join(work, f'out{rank}')]))
    run_pair(cmds, [dict(os.environ)] * 2)
    return rate_from_log(os.path.join(work, 'log0'), a.batch, a.steps, a.warmup)


def ddp_side(hosts, data, a):
    port = next_port()
    cmds, envs = [], []
    for rank in (0, 1):
        cmds.append(hosts.run_in(rank, [sys.executable, os.path.abspath(__file__), '--ddp-worker', '--rank', str(rank),
                                        '--addr', hosts.addr[0], '--port', str(port), '--data', data, '--batch',
                                        str(a.batch), '--steps', str(a.steps), '--warmup', str(a.warmup)]))
        # Gloo would take the address the host name resolves to (127.0.0.1 here): name the veth end.
        envs.append(dict(os.environ, GLOO_SOCKET_IFNAME=hosts.ifname[rank], OMP_NUM_THREADS='1'))
    outs = run_pair(cmds, envs)
    return float(outs[0][0].strip().splitlines()[-1])


SIDES = {'b': 'embedflow, 2 ranks x 1 thread in two namespaces (Gloo over veth)',
         'c': 'PyTorch DDP, 2 processes x 1 thread in the same two namespaces (Gloo over veth)'}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--build', default='build')
    ap.add_argument('--batch', type=int, default=256, help='pairs per step (both ranks together)')
    ap.add_argument('--steps', type=int, default=60)
    ap.add_argument('--warmup', type=int, default=10)
    ap.add_argument('--rounds', type=int, default=7)
    ap.add_argument('--pairs', type=int, default=8192)
    ap.add_argument('--ddp-worker', action='store_true', help=argparse.SUPPRESS)
    ap.add_argument('--rank', type=int, help=argparse.SUPPRESS)
    ap.add_argument('--addr', help=argparse.SUPPRESS)
    ap.add_argument('--port', type=int, help=argparse.SUPPRESS)
    ap.add_argument('--data', help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.ddp_worker:
        return ddp_worker(a)
    if os.environ.get('GLIBC_TUNABLES') != TUNABLES:
        os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ, GLIBC_TUNABLES=TUNABLES))
    cli = os.path.abspath(os.path.join(a.build, 'bin', 'embedflow'))
    hosts = TwoHosts()
    reason = hosts.make()
    if reason:
        sys.exit(f'cannot build two network namespaces joined by a veth pair: {reason}')
    load_before = loadavg()
    rounds = {k: [] for k in SIDES}
    try:
        with tempfile.TemporaryDirectory() as work:
            data = os.path.join(work, 'pairs.h5')
            make_pairs(data, a.pairs)
            for r in range(a.rounds):
                order = ('b', 'c') if r % 2 == 0 else ('c', 'b')  # alternate who goes first
                for k in order:
                    rounds[k].append(embedflow_side(hosts, cli, work, data, a) if k == 'b' else ddp_side(hosts, data, a))
                print(f'round {r + 1}: ' + ', '.join(f'({k}) {rounds[k][-1]:.0f}' for k in SIDES), flush=True)
    finally:
        hosts.remove()
    print(f'\nsmall_cnn siamese, contrastive, Adam, batch {a.batch} pairs over 2 ranks in two network namespaces, '
          f'{a.steps - a.warmup} timed steps, {a.rounds} rounds (pairs/s); load average before {load_before}, after {loadavg()}')
    for k in SIDES:
        print(spread_line(f'({k}) {SIDES[k]}', rounds[k], 'pairs/s'))
    print(ratio_line('(b)/(c)', [x / y for x, y in zip(rounds['b'], rounds['c'])], 1.0))


if __name__ == '__main__':
    main()
