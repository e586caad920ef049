"""Peer for tools/bench/geo_pairs: scikit-learn BallTree(metric="haversine") on the same subset.

Reads <prefix>.lat.f64 / .lon.f64 (degrees) and <prefix>.counts.i64 (embedflow's per-point
counts within the radius, itself included), times the tree build and
query_radius(count_only=True), checks that every count agrees, and prints "key value" lines.
"""
import sys
import time

import numpy as np
from sklearn.neighbors import BallTree

prefix, radius = sys.argv[1], float(sys.argv[2])
lat = np.fromfile(prefix + ".lat.f64", dtype=np.float64)
lon = np.fromfile(prefix + ".lon.f64", dtype=np.float64)
ours = np.fromfile(prefix + ".counts.i64", dtype=np.int64)
pts = np.radians(np.stack([lat, lon], 1))
t0 = time.perf_counter()
tree = BallTree(pts, metric="haversine")
t1 = time.perf_counter()
counts = tree.query_radius(pts, r=radius / 6371000.0, count_only=True)
t2 = time.perf_counter()
n = len(pts)
print("peer_points", n)
print("peer_build_s %.3f" % (t1 - t0))
print("peer_query_s %.3f" % (t2 - t1))
print("peer_us_per_point %.4f" % (1e6 * (t2 - t0) / n))
print("peer_pairs", (int(counts.sum()) - n) // 2)
differ = int(np.count_nonzero(counts != ours))
print("peer_counts_differ", differ)
sys.exit(1 if differ else 0)
