#!/usr/bin/env python3
"""h5py peer for tools/bench/hdf5_replay: reads the stream file the C++ part wrote, in batches
of 256 (image and label slices), the way a PyTorch Dataset over HDF5 would. Prints one JSON line:
best seconds over the repeats, rows read and a checksum of the labels (to match the C++ side)."""
import json
import sys
import time

import h5py


def main():
    path, group, batch, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    best = None
    checksum = 0
    rows = 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        with h5py.File(path, "r") as f:
            images, labels = f[group]["image"], f[group]["label"]
            n = images.shape[0]
            checksum = 0
            rows = 0
            for i in range(0, n, batch):
                x = images[i:i + batch]
                y = labels[i:i + batch]
                rows += x.shape[0]
                checksum += int(y[-1]) + int(x[-1, 14, 14])
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    print(json.dumps({"seconds": best, "rows": rows, "checksum": checksum}))


if __name__ == "__main__":
    main()
