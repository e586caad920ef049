#!/usr/bin/python3
"""EXIF header reading of a photo folder: geo.photo_folder against a Python peer, interleaved.

  (a) embedflow: geo.photo_folder (header_index: off, so every header is read each time) ->
      core.sink, at --threads 2, timed from the CLI's start to its exit (starting the CLI and
      loading plugins included);
  (b) Python, one process: for every .jpg under the folder, PIL's Image.open(p).getexif() and its
      GPS IFD (get_ifd(0x8825)), the same fields taken as geo.photo_folder takes them (latitude,
      longitude and references, DateTimeOriginal and OffsetTimeOriginal from the EXIF IFD,
      Artist, GPSHPositioningError), timed from the interpreter's start.

Photos: gen_photos --exif renders --photos JPEGs (500 x 375) into --data once. The page cache is
warm for both sides after the first round (both read the same files). The sides take turns for
--rounds rounds; the ratio (b)/(a) of each round is paired and decided by tools/bench/rounds.py.

Two ratios: header reading (the reader's own logged time for listing the folder and reading
every header, against the peer's walk-and-read loop timed inside its process), which the target
applies to: (a) >= 5 x (b); and process start to exit, start-up included (embedflow loads its
plugins, LibTorch among them, before the graph runs; Python imports PIL), reported beside it.

  /usr/bin/python3 tools/bench/photo_headers/photo_headers.py --build build --photos 10000 --rounds 7
"""
import argparse
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from rounds import loadavg, median, ratio_line  # noqa: E402

PEER = r'''
import os, sys, time
from PIL import Image
rows = 0
t0 = time.perf_counter()
for root, _, files in os.walk(sys.argv[1]):
    for name in sorted(files):
        if not name.lower().endswith((".jpg", ".jpeg")):
            continue
        with Image.open(os.path.join(root, name)) as im:
            exif = im.getexif()
            gps = exif.get_ifd(0x8825)
            sub = exif.get_ifd(0x8769)
            lat, lon = gps.get(2), gps.get(4)
            if not lat or not lon:
                continue
            sign_lat = -1 if gps.get(1) == "S" else 1
            sign_lon = -1 if gps.get(3) == "W" else 1
            fields = (sign_lat * (lat[0] + lat[1] / 60 + lat[2] / 3600), sign_lon * (lon[0] + lon[1] / 60 + lon[2] / 3600),
                      sub.get(0x9003), sub.get(0x9011), exif.get(0x013B), gps.get(0x1F))
            rows += 1
print(rows, time.perf_counter() - t0)
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--build', default='build')
    ap.add_argument('--photos', type=int, default=10000)
    ap.add_argument('--rounds', type=int, default=7)
    ap.add_argument('--data', default='/tmp/embedflow-photo-headers')
    ap.add_argument('--threads', type=int, default=2)
    args = ap.parse_args()
    folder = os.path.join(args.data, f'img{args.photos}')
    if not os.path.isdir(folder):
        subprocess.run([os.path.join(args.build, 'bin', 'gen_photos'), '--rows', str(args.photos), '--seed', '1', '--out',
                        os.path.join(args.data, f'meta{args.photos}.csv'), '--images', folder, '--exif'], check=True)
    graph = os.path.join(args.data, 'photo_headers.yaml')
    with open(graph, 'w') as f:
        f.write('nodes:\n'
                f'  photos: {{type: geo.photo_folder, params: {{dir: {folder}, header_index: "off"}}}}\n'
                '  sink: {type: core.sink, params: {mode: count}}\n'
                'edges: [photos.out -> sink.in]\n')
    embedflow = [os.path.join(args.build, 'bin', 'embedflow'), 'run', graph, '--no-cache', '--no-report',
                 '--threads', str(args.threads), '--out', os.path.join(args.data, 'run')]
    env = dict(os.environ, EMBEDFLOW_PLUGIN_PATH=os.path.join(args.build, 'plugins'))
    print(f'photo_headers: {args.photos} EXIF JPEGs, {args.rounds} rounds, --threads {args.threads}; load {loadavg()}')
    ours, peer, paired = [], [], []
    ours_read, peer_read, paired_read = [], [], []
    for r in range(args.rounds):
        t0 = time.perf_counter()
        log = subprocess.run(embedflow, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True).stderr
        a = time.perf_counter() - t0
        # The reader's own timing: listing the folder and reading the headers.
        m = re.search(r'listed in ([0-9.e-]+) s, read in ([0-9.e-]+) s', log)
        if not m:
            sys.exit('geo.photo_folder did not log its timing:\n' + log)
        a_read = float(m.group(1)) + float(m.group(2))
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, '-c', PEER, folder], check=True, capture_output=True, text=True).stdout
        b = time.perf_counter() - t0
        rows, b_read = out.split()
        if int(rows) != args.photos:
            sys.exit(f'the peer read {rows} geotagged photos, expected {args.photos}')
        b_read = float(b_read)
        ours.append(a)
        peer.append(b)
        paired.append(b / a)
        ours_read.append(a_read)
        peer_read.append(b_read)
        paired_read.append(b_read / a_read)
        print(f'round {r + 1}: header reading: embedflow {a_read:.3f} s, Python {b_read:.3f} s, ratio {b_read / a_read:.2f}; '
              f'process start to exit: embedflow {a:.3f} s, Python {b:.3f} s, ratio {b / a:.2f}; load {loadavg()}', flush=True)
    print(f'header reading: embedflow median {median(ours_read):.3f} s ({args.photos / median(ours_read):.0f} photos/s); '
          f'Python median {median(peer_read):.3f} s ({args.photos / median(peer_read):.0f} photos/s)')
    print(ratio_line('header reading speed-up (Python / embedflow)', paired_read, target=5))
    print(f'process start to exit: embedflow median {median(ours):.3f} s, Python median {median(peer):.3f} s')
    print(ratio_line('end-to-end speed-up (Python / embedflow), start-up included', paired, target=None))


if __name__ == '__main__':
    main()
