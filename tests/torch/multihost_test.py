#!/usr/bin/python3
"""Data-parallel torch.train across two hosts and under the launchers, with real processes.

Two network namespaces joined by a veth pair stand for two hosts (each has its own address and
loopback; they share the filesystem, as hosts sharing a checkpoint volume do). Checked:
  - torchrun --standalone --nproc_per_node 2 --no_python embedflow run: weights equal one process, and
    rank 1's run record in its rank-1 folder;
  - torchrun --nnodes 2 (one node per namespace, static rendezvous on torchrun's agent store), the
    reader sharded at the source by the launcher's world;
  - Slurm's variables (SLURM_NTASKS, SLURM_PROCID, SLURM_LOCALID, SLURM_JOB_NODELIST) as srun sets them,
    and the store's host taken from a bracketed node list;
  - explicit world_size/rank over tcp:// rendezvous, one rank per namespace;
  - SIGKILL of one rank mid-run: the other exits non-zero within a timeout naming its host, rank
    and the rendezvous; both restarted with resume: auto end equal to the uninterrupted run;
  - SIGSTOP of one rank (connections open, no answers): the other fails after rendezvous_timeout;
  - a parameter disagreeing with the launcher's variables is a ConfigError naming the node.
The weights are the checkpoints' `model` entries, read with torch.jit.load (a checkpoint is a
TorchScript archive). Needs root for `ip netns`; exits 77 (ctest: skipped) with the reason if a
namespace cannot be made.

  tests/torch/multihost_test.py BUILD_DIR
"""
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'tools', 'bench', 'multihost'))
from netns import TwoHosts  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
CLI = os.path.join(BUILD, 'bin', 'embedflow')
# Debian's torchrun 1.13 on Python 3.11 fails on its default --redirects/--tee of 0 (Std(0) is not
# found by iterating the IntFlag there); teeing stderr avoids that value.
TORCHRUN = ['torchrun', '--redirects', '2', '--tee', '2']
failures = []
WORK = None
HOSTS = TwoHosts()
NS, ADDR, SUBNET = HOSTS.ns, HOSTS.addr, HOSTS.subnet


def check(ok, what):
    print(('ok    ' if ok else 'FAIL  ') + what, flush=True)
    if not ok:
        failures.append(what)


def in_ns(i, cmd):
    return HOSTS.run_in(i, cmd)


def explicit(g, i):
    """Rank i of the graph g with an explicit rank, in namespace i; each rank records in its own folder
    (only a launcher's variables tell `embedflow run` which rank it is)."""
    return in_ns(i, [CLI, 'run', g, '--quiet', '--set', f'train.rank={i}', '--out', os.path.splitext(g)[0] + f'-rank{i}'])


def graph(work, name, extra='', max_steps=48, every=8, data_extra=''):
    path = os.path.join(work, name + '.yaml')
    with open(path, 'w') as f:
        f.write(f"""seed: 1
nodes:
  data:  {{type: io.hdf5_reader, params: {{path: {work}/pairs.h5, batch_size: 64, epochs: 100{data_extra}}}}}
  train: {{type: torch.train, params: {{model: {{type: torch.mlp, hidden: [64], embedding_dim: 8}},
          loss: {{type: torch.contrastive, margin: 1.0}}, optimizer: {{type: torch.sgd, lr: 0.05, momentum: 0.9}},
          max_steps: {max_steps}, log_every: 1, threads: 1, log_dir: {work}/{name}, checkpoint_dir: {work}/{name}/ckpt,
          checkpoint_every: {every}, keep_checkpoints: 0{extra}}}}}
edges: [data.out -> train.in]
""")
    return path


def weights(run_dir, step=None):
    files = sorted(glob.glob(os.path.join(run_dir, 'ckpt', 'step-*.pt')))
    path = files[-1] if step is None else os.path.join(run_dir, 'ckpt', f'step-{step:08d}.pt')
    m = torch.jit.load(path)
    return {k: v.clone() for k, v in m.model.state_dict().items()}


def close(a, b, tol):
    return a.keys() == b.keys() and all(torch.allclose(a[k], b[k], rtol=tol, atol=tol) for k in a)


def run(cmd, env=None, timeout=60):
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=WORK)


def both(cmds, envs, timeout=60):
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e, cwd=WORK) for c, e in zip(cmds, envs)]
    out = []
    for p in procs:
        try:
            _, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
            err += '\n(killed by the test: timeout)'
        out.append((p.returncode, err))
    return out


def env(**kw):
    e = {k: v for k, v in os.environ.items() if not k.startswith(('SLURM_', 'TORCHELASTIC_')) and
         k not in ('RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'MASTER_ADDR', 'MASTER_PORT')}
    e.update({k: str(v) for k, v in kw.items()})
    return e


def main():
    global WORK
    work = WORK = tempfile.mkdtemp(prefix='embedflow-multihost-')
    rng = np.random.default_rng(1)
    with h5py.File(os.path.join(work, 'pairs.h5'), 'w') as f:
        a, b = rng.random((512, 1, 28, 28), dtype=np.float32), rng.random((512, 1, 28, 28), dtype=np.float32)
        f['a_image'], f['b_image'] = a, b
        f['pair_label'] = (rng.random(512) < 0.5).astype(np.float32)
        f['a_id'], f['b_id'] = np.arange(512), np.arange(512, 1024)

    r = run([CLI, 'run', graph(work, 'single'), '--quiet'], env=env())
    check(r.returncode == 0, 'single-process run: ' + r.stderr[-400:])
    single = weights(os.path.join(work, 'single'))
    tol = 1e-4

    # torchrun on one host: two ranks from the environment torchrun sets (its agent store).
    g = graph(work, 'torchrun1', ', world_size: 0, rank: -1')
    r = run(TORCHRUN + ['--standalone', '--nproc_per_node', '2', '--no_python', CLI, 'run', g, '--quiet'], env=env())
    check(r.returncode == 0, 'torchrun --standalone --nproc_per_node 2: exit 0 ' + r.stderr[-600:])
    if r.returncode == 0:
        check(close(weights(os.path.join(work, 'torchrun1')), single, tol), 'torchrun --standalone: weights equal one process')
        check(os.path.exists(os.path.join(work, 'out', 'torchrun1', 'run.json')) and
              os.path.exists(os.path.join(work, 'out', 'torchrun1', 'rank-1', 'run.json')),
              'torchrun: rank 0 records in out/torchrun1, rank 1 in out/torchrun1/rank-1')

    # A parameter that disagrees with the launcher is a located ConfigError.
    r = run([CLI, 'run', graph(work, 'conflict', ', world_size: 2, rank: 0'), '--quiet'], env=env(WORLD_SIZE=3, RANK=0))
    check(r.returncode != 0 and 'train' in r.stderr and 'world_size 2 disagrees with the launcher\'s WORLD_SIZE=3' in r.stderr,
          'world_size 2 under WORLD_SIZE=3: located ConfigError: ' + r.stderr.strip()[-300:])
    r = run([CLI, 'run', graph(work, 'conflict2', ', world_size: 0, rank: 1'), '--quiet'], env=env(SLURM_NTASKS=2, SLURM_PROCID=0))
    check(r.returncode != 0 and "rank 1 disagrees with the launcher's SLURM_PROCID=0" in r.stderr,
          'rank 1 under SLURM_PROCID=0: ConfigError: ' + r.stderr.strip()[-300:])

    # The store's host is the first host of Slurm's node list, bracket ranges and all.
    r = run([CLI, 'run', graph(work, 'nodelist', ', world_size: 0, rank: -1, rendezvous_timeout: 1'), '--quiet'],
            env=env(SLURM_NTASKS=2, SLURM_PROCID=1, SLURM_JOB_NODELIST='nohost[07-09,12],gpu1', MASTER_PORT=29999))
    check(r.returncode != 0 and 'joining the data-parallel group at tcp://nohost07:29999 as rank 1 of 2' in r.stderr,
          'SLURM_JOB_NODELIST nohost[07-09,12],gpu1: the store is at nohost07: ' + r.stderr.strip()[-300:])

    reason = HOSTS.make()
    if reason:
        print(f'SKIP: cannot build two network namespaces joined by a veth pair ({reason})')
        return 77 if not failures else 1
    try:
        # torchrun with two nodes, one per namespace, static rendezvous at node 0's address; the
        # reader sharded at the source by the launcher's world (each rank reads its 32 rows of every
        # batch of 64: rows the trainer's check adds up to the batch, or the run stops).
        g = graph(work, 'torchrun2', ', world_size: 0, rank: -1', data_extra=', shard_world_size: 0')
        port = 29400 + os.getpid() % 500
        out = both([in_ns(i, TORCHRUN + ['--nnodes', '2', '--node_rank', str(i), '--nproc_per_node', '1', '--master_addr',
                              ADDR[0], '--master_port', str(port), '--no_python', CLI, 'run', g]) for i in (0, 1)],
                   [env(), env()])
        check(all(c == 0 for c, _ in out), 'torchrun --nnodes 2 across namespaces: exit 0 ' + ' | '.join(e[-400:] for _, e in out))
        if all(c == 0 for c, _ in out):
            check(close(weights(os.path.join(work, 'torchrun2')), single, tol),
                  'torchrun --nnodes 2, reader sharded at the source: weights equal one process')
            check("rank 0 of 2 joined the Gloo group at tcp://%s:%d (torchrun's agent store, attempt 0)" % (ADDR[0], port)
                  in out[0][1], "torchrun --nnodes 2: rank 0 joins torchrun's agent store as a client")

        # srun's variables: the master address is the first host of the job's node list.
        g = graph(work, 'slurm', ', world_size: 0, rank: -1')
        out = both([in_ns(i, [CLI, 'run', g, '--quiet']) for i in (0, 1)],
                   [env(SLURM_NTASKS=2, SLURM_PROCID=i, SLURM_LOCALID=0, SLURM_JOB_NODELIST=f'{SUBNET}.[1-2]',
                        MASTER_PORT=port + 1) for i in (0, 1)])
        check(all(c == 0 for c, _ in out), 'Slurm variables across namespaces: exit 0 ' + ' | '.join(e[-400:] for _, e in out))
        if all(c == 0 for c, _ in out):
            check(close(weights(os.path.join(work, 'slurm')), single, tol), 'Slurm variables: weights equal one process')

        # Explicit ranks over tcp:// rendezvous, uninterrupted.
        def tcp_graph(name, p, extra=''):
            return graph(work, name, f', world_size: 2, rendezvous: "tcp://{ADDR[0]}:{p}", rendezvous_timeout: 20{extra}',
                         max_steps=400, every=40)
        g = tcp_graph('tcp', port + 2)
        out = both([explicit(g, i) for i in (0, 1)], [env(), env()])
        check(all(c == 0 for c, _ in out), 'tcp:// rendezvous across namespaces: exit 0 ' + ' | '.join(e[-400:] for _, e in out))
        uninterrupted = weights(os.path.join(work, 'tcp'))
        r = run([CLI, 'run', graph(work, 'single400', max_steps=400, every=40), '--quiet'], env=env())
        check(close(uninterrupted, weights(os.path.join(work, 'single400')), tol),
              'tcp:// rendezvous across namespaces: weights equal one process after 400 steps')

        # Kill rank 1 once rank 0 has a checkpoint past the start: rank 0 must fail, located, soon.
        g = tcp_graph('killed', port + 3, ', resume: auto')
        procs = [subprocess.Popen(explicit(g, i), stderr=subprocess.PIPE,
                                  text=True, env=env(), cwd=WORK) for i in (0, 1)]
        ckpt = os.path.join(work, 'killed', 'ckpt')
        deadline = time.time() + 30
        while time.time() < deadline and not glob.glob(os.path.join(ckpt, 'step-00000080.pt')):
            time.sleep(0.005)
        killed_at = len(glob.glob(os.path.join(ckpt, 'step-*.pt')))
        procs[1].send_signal(signal.SIGKILL)
        t0 = time.time()
        try:
            _, err0 = procs[0].communicate(timeout=30)
        except subprocess.TimeoutExpired:
            procs[0].kill()
            _, err0 = procs[0].communicate()
            err0 += '(hung: killed by the test after 30 s)'
        waited = time.time() - t0
        procs[1].communicate()
        last = max(int(os.path.basename(f)[5:13]) for f in glob.glob(os.path.join(ckpt, 'step-*.pt')))
        print(f'rank 0 after SIGKILL of rank 1 (exit {procs[0].returncode}, {waited:.2f} s):\n{err0.strip()[-700:]}')
        check(procs[0].returncode not in (0, None) and waited < 25, 'survivor exits non-zero within the timeout')
        check('rank 0 of 2' in err0 and ADDR[0] in err0 and 'train' in err0,
              'survivor names the node, its rank and the rendezvous address')
        check(0 < killed_at and last < 400, f'killed mid-run (last checkpoint: step {last})')
        out = both([explicit(g, i)[:-5] + explicit(g, i)[-4:] for i in (0, 1)], [env(), env()])  # without --quiet
        check(all(c == 0 for c, _ in out), 'restart with resume: auto: exit 0 ' + ' | '.join(e[-400:] for _, e in out))
        check(all(f'resuming from {ckpt}/step-{last:08d}.pt' in e for _, e in out),
              f'both ranks resume from the last checkpoint (step {last})')
        check(close(weights(os.path.join(work, 'killed')), uninterrupted, 1e-6),
              'restarted run ends equal to the uninterrupted run')

        # A rank that stops answering (SIGSTOP: its connections stay open) fails the other after the
        # group's timeout (rendezvous_timeout, 3 s here) instead of hanging.
        g = graph(work, 'stopped', f', world_size: 2, rendezvous: "tcp://{ADDR[0]}:{port + 4}", rendezvous_timeout: 3',
                  max_steps=100000, every=0)
        procs = [subprocess.Popen(explicit(g, i), stderr=subprocess.PIPE, text=True, env=env(), cwd=WORK) for i in (0, 1)]
        metrics, deadline = os.path.join(work, 'stopped', 'metrics.csv'), time.time() + 30
        while time.time() < deadline and not (os.path.exists(metrics) and sum(1 for _ in open(metrics)) > 3):
            time.sleep(0.01)  # until both ranks train
        procs[1].send_signal(signal.SIGSTOP)
        t0 = time.time()
        try:
            _, err0 = procs[0].communicate(timeout=20)
        except subprocess.TimeoutExpired:
            procs[0].kill()
            _, err0 = procs[0].communicate()
            err0 += '(hung: killed by the test after 20 s)'
        waited = time.time() - t0
        procs[1].kill()
        procs[1].communicate()
        print(f'rank 0 after SIGSTOP of rank 1 (exit {procs[0].returncode}, {waited:.2f} s):\n{err0.strip()[-500:]}')
        check(procs[0].returncode not in (0, None) and waited < 10 and 'rank 0 of 2' in err0 and
              ('timed out' in err0.lower() or 'timeout' in err0.lower()) and
              'failed in process' in err0,
              'a silent peer fails the survivor after the timeout, located')
    finally:
        HOSTS.remove()
    if not failures:
        shutil.rmtree(work, ignore_errors=True)
    print(f'{len(failures)} failure(s)' + (f'; files kept in {work}' if failures else ''))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
