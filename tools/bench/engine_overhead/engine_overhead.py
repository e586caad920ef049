#!/usr/bin/python3
"""Engine overhead against raw oneTBB, in interleaved rounds.

Each round runs bench_engine_overhead's three sides back to back in fresh processes, in an order
that rotates each round: the plain loop (the work alone), a raw oneTBB chain (input_node ->
limiter_node(64) -> three function_nodes) and the embedflow chain (source -> f1 -> f2 -> f3,
max_in_flight 64). What a chain adds is its process CPU time minus the loop's, per message per
stage (three stages). The target: embedflow's added CPU at most 1.3x raw oneTBB's, at one thread
and no worse at two; decided from the paired rounds with tools/bench/rounds.py (as the ratio
oneTBB / embedflow >= 1 / 1.3).

CPU rather than wall time: on this machine's autogroup scheduling a second thread may gain nothing
under load, and a chain's wall time at two threads measures how the kernel shares the cores as
much as the engine.

  /usr/bin/python3 tools/bench/engine_overhead/engine_overhead.py --build build --rounds 7
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from rounds import loadavg, median, ratio_line  # noqa: E402

TARGET = 1.3
SIDES = ['loop', 'tbb', 'graph']


def run(binary, side, threads, records):
    out = subprocess.run([binary, '--side', side, '--threads', str(threads), '--records', str(records)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--build', default='build')
    ap.add_argument('--records', type=int, default=2_000_000)
    ap.add_argument('--rounds', type=int, default=7)
    ap.add_argument('--threads', default='1,2')
    args = ap.parse_args()
    binary = os.path.join(args.build, 'bin', 'bench_engine_overhead')
    print(f'engine_overhead: {args.records} records, 3 stages, {args.rounds} rounds; load {loadavg()}')
    for threads in [int(t) for t in args.threads.split(',')]:
        added = {'tbb': [], 'graph': []}
        for r in range(args.rounds):
            order = SIDES[r % 3:] + SIDES[:r % 3]
            res = {side: run(binary, side, threads, args.records) for side in order}
            sums = {res[s]['checksum'] for s in SIDES}
            if len(sums) != 1:
                sys.exit(f'the sides disagree: {sums}')
            for side in ('tbb', 'graph'):
                added[side].append((res[side]['cpu_s'] - res['loop']['cpu_s']) * 1e9 / args.records / 3)
        print(f'threads {threads}: added CPU per message per stage, ns')
        for side, name in (('tbb', 'raw oneTBB'), ('graph', 'embedflow')):
            print(f'  {name:10s} ' + ', '.join(f'{v:.0f}' for v in added[side]) + f'; median {median(added[side]):.0f}')
        paired = [t / g for t, g in zip(added['tbb'], added['graph'])]
        print('  ' + ratio_line('oneTBB/embedflow', paired, round(1 / TARGET, 3)) +
              f'  (embedflow/oneTBB median {1 / median(paired):.2f}x, target <= {TARGET}x)')
    print(f'load after: {loadavg()}')


if __name__ == '__main__':
    main()
