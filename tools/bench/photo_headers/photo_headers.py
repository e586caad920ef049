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
Target: (a) >= 5 x (b).

  /usr/bin/python3 tools/bench/photo_headers/photo_headers.py --build build --photos 10000 --rounds 7
"""
import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from rounds import loadavg, median, ratio_line  # noqa: E402

PEER = r'''
import os, sys
from PIL import Image
rows = 0
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
print(rows)
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
    embedflow = [os.path.join(args.build, 'bin', 'embedflow'), 'run', graph, '--quiet', '--no-cache', '--no-report',
                 '--threads', str(args.threads), '--out', os.path.join(args.data, 'run')]
    env = dict(os.environ, EMBEDFLOW_PLUGIN_PATH=os.path.join(args.build, 'plugins'))
    print(f'photo_headers: {args.photos} EXIF JPEGs, {args.rounds} rounds, --threads {args.threads}; load {loadavg()}')
    ours, peer, paired = [], [], []
    for r in range(args.rounds):
        t0 = time.perf_counter()
        subprocess.run(embedflow, check=True, env=env, stdout=subprocess.DEVNULL)
        a = time.perf_counter() - t0
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, '-c', PEER, folder], check=True, capture_output=True, text=True).stdout
        b = time.perf_counter() - t0
        if int(out) != args.photos:
            sys.exit(f'the peer read {out.strip()} geotagged photos, expected {args.photos}')
        ours.append(a)
        peer.append(b)
        paired.append(b / a)
        print(f'round {r + 1}: embedflow {a:.3f} s, Python {b:.3f} s, ratio {b / a:.2f}; load {loadavg()}', flush=True)
    print(f'embedflow median {median(ours):.3f} s ({args.photos / median(ours):.0f} photos/s); '
          f'Python median {median(peer):.3f} s ({args.photos / median(peer):.0f} photos/s)')
    print(ratio_line('speed-up (Python / embedflow)', paired, target=5))


if __name__ == '__main__':
    main()
