#!/usr/bin/env python3
"""faiss and numpy peers for tools/bench/retrieval.

Reads the raw arrays bench_retrieval wrote into DIR (float32 features, int64 labels, optional
cameras; with CHECK, also our per-query first ranks and full-gallery APs) and runs one timed
round of one peer (loading is outside the timing):

  MODE faiss: IndexFlatL2 (METRIC l2) or IndexFlatIP on unit rows (METRIC cosine), add the gallery,
    search the top K for every query; numpy over the lists: the re-id rule (same identity AND
    camera dropped) or the query itself dropped (SELF), CMC rank-1, P@1, and AP@K (positives
    beyond K count as misses: a lower bound of the full-gallery AP). With K = R (the largest
    positive count) R-precision and MAP@R over the lists are exact, as scikit-learn's or
    pytorch-metric-learning's top-R evaluation computes them.
  MODE numpy: the full ranking: float32 distances by blocks of queries (BLAS), a full argsort of
    each row, and the full-gallery mAP, P@1, R-precision and MAP@R.

Both use THREADS threads (faiss's OpenMP; OpenBLAS through OPENBLAS_NUM_THREADS set by the
caller). With CHECK = N (not "none"), after the timed round it checks ours: first ranks against
faiss's lists, and the full-gallery AP of N random queries recomputed exactly (float64 scores,
stable argsort). Prints one JSON object.

usage: retrieval_peer.py DIR QUERIES GALLERY DIM K THREADS METRIC SELF CAMERAS MODE CHECK
"""
import json
import sys
import time

import numpy as np


def unit(x):
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(n > 0, n, 1)


def main():
    d = sys.argv[1]
    nq, ng, dim, k, threads = map(int, sys.argv[2:7])
    metric, self_retrieval, cameras, mode, check = sys.argv[7], sys.argv[8] == "1", sys.argv[9] == "1", sys.argv[10], sys.argv[11]
    load = lambda name, dtype: np.fromfile(f"{d}/{name}", dtype=dtype)
    xq = load("query.f32", np.float32).reshape(nq, dim)
    lq = load("query_label.i64", np.int64)
    xg = xq if self_retrieval else load("gallery.f32", np.float32).reshape(ng, dim)
    lg = lq if self_retrieval else load("gallery_label.i64", np.int64)
    cq = load("query_camera.i64", np.int64) if cameras else np.zeros(nq, np.int64)
    cg = load("gallery_camera.i64", np.int64) if cameras else np.zeros(ng, np.int64)

    # Valid positives per query (the AP denominator), counted outside the timing.
    per_label = np.bincount(lg, minlength=max(lg.max(), lq.max()) + 1)
    if cameras:
        positives = np.empty(nq, np.int64)
        for cam in np.unique(cg):
            counts = np.bincount(lg[cg == cam], minlength=len(per_label))
            positives[cq == cam] = per_label[lq[cq == cam]] - counts[lq[cq == cam]]
    else:
        positives = per_label[lq] - (1 if self_retrieval else 0)
    ok = positives > 0
    result = {}

    def invalid(idx, q_rows):
        bad = (lg[idx] == lq[q_rows, None]) & (cg[idx] == cq[q_rows, None]) if cameras else np.zeros(idx.shape, bool)
        if self_retrieval:
            bad |= idx == q_rows[:, None]
        return bad

    if mode == "faiss":
        import faiss
        faiss.omp_set_num_threads(threads)
        t0 = time.perf_counter()
        if metric == "cosine":
            index = faiss.IndexFlatIP(dim)
            index.add(unit(xg))
            xs = unit(xq)
        else:
            index = faiss.IndexFlatL2(dim)
            index.add(xg)
            xs = xq
        t1 = time.perf_counter()
        # The query itself comes first in self-retrieval: one more neighbour keeps K others.
        _, idx = index.search(xs, k + (1 if self_retrieval else 0))
        t2 = time.perf_counter()
        rows = np.arange(nq)
        valid = ~invalid(idx, rows) & (idx >= 0)
        match = (lg[idx] == lq[:, None]) & valid
        pos = np.cumsum(valid, axis=1)                 # 1-based positions among valid items
        first = np.where(match.any(1), np.argmax(match, axis=1), -1)
        first_rank = np.where(first >= 0, pos[rows, np.maximum(first, 0)], 0)
        cum = np.cumsum(match, axis=1)
        precision = np.where(match, cum / np.maximum(pos, 1), 0.0)
        within_r = match & (pos <= positives[:, None])
        ap_at_k = precision.sum(1)[ok] / positives[ok]
        map_at_r = (np.where(within_r, precision, 0.0).sum(1)[ok] / positives[ok]).mean()
        r_precision = (within_r.sum(1)[ok] / positives[ok]).mean()
        t3 = time.perf_counter()
        result.update(peer_add_s=t1 - t0, peer_search_s=t2 - t1, peer_metrics_s=t3 - t2, peer_total_s=t3 - t0,
                      peer_rank1=float(np.mean(first_rank[ok] == 1)), peer_p_at_1=float(np.mean(first_rank[ok] == 1)),
                      peer_r_precision=float(r_precision), peer_map_at_r=float(map_at_r),
                      peer_map_at_k=float(ap_at_k.mean()), faiss=faiss.__version__)
    else:
        t0 = time.perf_counter()
        gs = unit(xg) if metric == "cosine" else xg
        gn = (gs * gs).sum(1)
        aps, p1, rp, mapr = [], [], [], []
        block = max(1, min(nq, (1 << 25) // max(ng, 1)))
        for b in range(0, nq, block):
            rows = np.arange(b, min(nq, b + block))
            qs = unit(xq[rows]) if metric == "cosine" else xq[rows]
            if metric == "cosine":
                dist = 1 - qs @ gs.T
            else:
                dist = (qs * qs).sum(1)[:, None] + gn[None, :] - 2 * qs @ gs.T
            order = np.argsort(dist, axis=1, kind="stable")
            valid = ~invalid(order, rows)
            match = (lg[order] == lq[rows, None]) & valid
            pos = np.cumsum(valid, axis=1)
            cum = np.cumsum(match, axis=1)
            precision = np.where(match, cum / np.maximum(pos, 1), 0.0)
            P = positives[rows]
            keep = P > 0
            within_r = match & (pos <= P[:, None])
            aps.append(precision.sum(1)[keep] / P[keep])
            mapr.append(np.where(within_r, precision, 0.0).sum(1)[keep] / P[keep])
            rp.append(within_r.sum(1)[keep] / P[keep])
            first = np.argmax(match, axis=1)
            p1.append((pos[np.arange(len(rows)), first] == 1)[keep])
        t1 = time.perf_counter()
        result.update(peer_total_s=t1 - t0, peer_map=float(np.concatenate(aps).mean()),
                      peer_p_at_1=float(np.concatenate(p1).mean()), peer_r_precision=float(np.concatenate(rp).mean()),
                      peer_map_at_r=float(np.concatenate(mapr).mean()), numpy=np.__version__)

    if check != "none" and mode == "faiss":
        ours_first = load("ours_first_rank.i64", np.int64)
        ours_ap = load("ours_ap.f64", np.float64)
        # First ranks: where faiss's list holds the first match, ours must place it at the same
        # position (float32 near-ties in faiss may swap neighbours: counted).
        seen = first_rank > 0
        result["first_rank_mismatches"] = int(np.sum(first_rank[seen] != ours_first[seen]))
        result["first_rank_compared"] = int(seen.sum())
        rng = np.random.default_rng(1)
        worst = 0.0
        g64 = xg.astype(np.float64)
        for q in rng.choice(nq, size=min(int(check), nq), replace=False):
            keep = np.ones(ng, bool)
            if cameras:
                keep &= ~((lg == lq[q]) & (cg == cq[q]))
            if self_retrieval:
                keep[q] = False
            x = xq[q].astype(np.float64)
            if metric == "cosine":
                gk = g64[keep]
                score = 1 - (gk @ x) / np.sqrt((gk * gk).sum(1) * (x @ x))
            else:
                diff = g64[keep] - x
                score = (diff * diff).sum(1)
            order = np.argsort(score, kind="stable")
            hits = np.nonzero(lg[keep][order] == lq[q])[0] + 1
            if len(hits):
                exact = float(np.mean(np.arange(1, len(hits) + 1) / hits))
                worst = max(worst, abs(exact - ours_ap[q]))
        result["exact_ap_max_abs_diff"] = worst
        result["exact_ap_sample"] = int(min(int(check), nq))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
