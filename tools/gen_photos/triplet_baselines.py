#!/usr/bin/python3
"""Scores gen_photos' judged triplets with two reference rules, per half and per kind.

    python3 tools/gen_photos/triplet_baselines.py DIR [--triplet-truth triplets_truth.csv]

DIR holds what gen_photos wrote: meta.csv (positions), img/<id>.jpg (or the metadata's image
column), triplets_truth.csv and, optionally, split.csv. The rules:
  - nearest in metres: the photo taken nearer the query (haversine on the metadata's lat/lon) is
    the more similar -- what geotags can teach;
  - colour histogram: 16x8 hue-saturation histogram of the decoded JPEG, cosine similarity.
With split.csv, also the histogram's P@1 on the landmark split (queries against the gallery).
Needs numpy and PIL (Debian's python3-numpy, python3-pil).
"""
import argparse
import collections
import csv
import math
import os

import numpy as np
from PIL import Image


def haversine(a, b):
    p = math.pi / 180
    h = math.sin((b[0] - a[0]) * p / 2) ** 2 + math.cos(a[0] * p) * math.cos(b[0] * p) * math.sin((b[1] - a[1]) * p / 2) ** 2
    return 2 * 6371000.0 * math.asin(math.sqrt(h))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('dir')
    ap.add_argument('--triplet-truth', default='triplets_truth.csv')
    args = ap.parse_args()
    d = args.dir
    at, path = {}, {}
    for r in csv.DictReader(open(os.path.join(d, 'meta.csv'), newline='')):
        i = int(r['id'])
        at[i] = (float(r['lat']), float(r['lon']))
        if r.get('image'):
            path[i] = os.path.join(d, r['image'])
    hists = {}

    def hist(i):
        if i not in hists:
            hsv = np.asarray(Image.open(path.get(i, os.path.join(d, 'img', f'{i}.jpg'))).convert('HSV')).reshape(-1, 3).astype(np.int64)
            h = np.zeros((16, 8))
            np.add.at(h, (hsv[:, 0] * 16 // 256, hsv[:, 1] * 8 // 256), 1)
            v = h.ravel()
            hists[i] = v / np.linalg.norm(v)
        return hists[i]

    score = collections.defaultdict(lambda: [0, 0, 0])
    for r in csv.DictReader(open(os.path.join(d, args.triplet_truth), newline='')):
        q, p, n = int(r['query']), int(r['positive']), int(r['negative'])
        for key in (r['half'], r['half'] + ':' + r['kind']):
            s = score[key]
            s[0] += haversine(at[q], at[p]) < haversine(at[q], at[n])
            s[1] += hist(q) @ hist(p) > hist(q) @ hist(n)
            s[2] += 1
    print(f'{"triplets":26s} {"n":>5s} {"nearest in metres":>18s} {"colour histogram":>17s}')
    for key, (o, h, n) in sorted(score.items()):
        print(f'{key:26s} {n:5d} {o / n:18.3f} {h / n:17.3f}')
    split = os.path.join(d, 'split.csv')
    if os.path.exists(split):
        rows = list(csv.DictReader(open(split, newline='')))
        gallery = [(int(r['id']), r['label']) for r in rows if r['role'] == 'gallery']
        queries = [(int(r['id']), r['label']) for r in rows if r['role'] == 'query']
        g = np.stack([hist(i) for i, _ in gallery])
        hits = sum(gallery[int(np.argmax(g @ hist(i)))][1] == label for i, label in queries)
        largest = max(collections.Counter(label for _, label in gallery).values()) / len(gallery)
        print(f'landmark split: colour histogram P@1 {hits / len(queries):.3f} over {len(queries)} queries '
              f'(largest scene: {largest:.3f} of the gallery)')


if __name__ == '__main__':
    main()
