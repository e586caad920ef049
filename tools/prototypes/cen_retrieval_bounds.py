#!/usr/bin/python3
"""Where CEN-mixture's attribute retrieval loses, against bounds that know the simulator.

Reads gen_crowd's truth (grids.csv, truth.csv, workers.csv) and a cen_crowd run's CEN-mixture
exports (test_submissions.h5: worker and context logits z^w, z^g; retrieval_dimensions.csv: the
dimension -> attribute mapping fitted on the training submissions) and prints, over the test
submissions that used an attribute:

  cen                    argmax of the CEN's a (what crowd.attribute_retrieval scores)
  cen worker + true ctx  the CEN's z^w (per attribute: logsumexp over its mapped dimensions) plus
                         the simulator's context term tau s_k(g) (-inf where s_k(g) = 0)
  true worker + cen ctx  log beta_w (the simulator's true bias) plus the CEN's z^g
  finite-data oracle     Bayes posterior predictive of a model that knows tau, every grid's
                         saliences, the Dirichlet prior and the attribute each *training*
                         submission used: the bias is estimated from the worker's own training
                         submissions (importance sampling over the prior), so it shows what the
                         amount of data allows
  true P                 argmax of the P(k | w, g) the simulator drew from (the ceiling)

  /usr/bin/python3 tools/prototypes/cen_retrieval_bounds.py out/crowd_cen out/cen_crowd/mixture
"""
import argparse
import csv
import json

import h5py
import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("crowd", help="gen_crowd --out directory")
    ap.add_argument("run", help="a cen_crowd run's mixture directory")
    ap.add_argument("--samples", type=int, default=200000, help="prior samples of the oracle")
    a = ap.parse_args()
    summary = json.load(open(a.crowd + "/summary.json"))
    tau, alpha = summary["options"]["context_strength"], summary["options"]["bias_concentration"]
    names = json.load(open(a.crowd + "/attributes.json"))["attributes"]
    names = [n["name"] if isinstance(n, dict) else n for n in names]
    k_attr = len(names)
    vec = lambda r, prefix: np.array([float(r[prefix + n]) for n in names])
    salience = {int(r["grid"]): vec(r, "salience_") for r in csv.DictReader(open(a.crowd + "/grids.csv"))}
    truth = {(int(r["worker"]), int(r["grid"])): (int(r["attribute"]), vec(r, "p_")) for r in csv.DictReader(open(a.crowd + "/truth.csv"))}
    bias = {int(r["worker"]): vec(r, "bias_") for r in csv.DictReader(open(a.crowd + "/workers.csv"))}
    dims = [names.index(r["mapped_attribute"]) if r["mapped_attribute"] in names else -1
            for r in csv.DictReader(open(a.run + "/retrieval_dimensions.csv"))]
    d = h5py.File(a.run + "/test_submissions.h5")["data"]
    workers, grids, zw, zg, act = (d[k][:] for k in ("worker", "grid", "worker_attributes", "context_attributes", "attributes"))
    test = set(zip(workers.tolist(), grids.tolist()))

    def per_attribute(z):
        out = np.full(k_attr, -np.inf)
        for dim, k in enumerate(dims):
            if k >= 0:
                out[k] = np.logaddexp(out[k], z[dim])
        return out

    def context_term(s):
        return np.where(s > 0, tau * s, -np.inf)

    # The oracle's prior samples and each worker's training choices.
    rng = np.random.default_rng(0)
    beta = rng.gamma(alpha, size=(a.samples, k_attr))
    beta /= np.maximum(beta.sum(1, keepdims=True), 1e-300)

    def choice(s):
        w = beta * np.exp(tau * s) * (s > 0)
        return w / np.maximum(w.sum(1, keepdims=True), 1e-300)

    training = {}
    for (w, g), (used, _) in truth.items():
        if (w, g) not in test and used >= 0:
            training.setdefault(w, []).append((g, used))
    hits = dict.fromkeys(["cen", "cen worker + true ctx", "true worker + cen ctx", "finite-data oracle", "true P"], 0)
    n = 0
    for i, (w, g) in enumerate(zip(workers.tolist(), grids.tolist())):
        used, p = truth[(w, g)]
        if used < 0:
            continue
        n += 1
        s = salience[g]
        hits["cen"] += dims[int(act[i].argmax())] == used
        hits["cen worker + true ctx"] += np.argmax(per_attribute(zw[i]) + context_term(s)) == used
        hits["true worker + cen ctx"] += np.argmax(np.log(bias[w] + 1e-300) + per_attribute(zg[i])) == used
        log_like = np.zeros(a.samples)
        for gg, k in training.get(w, []):
            log_like += np.log(choice(salience[gg])[:, k] + 1e-300)
        weight = np.exp(log_like - log_like.max())
        hits["finite-data oracle"] += np.argmax(weight @ choice(s)) == used
        hits["true P"] += p.argmax() == used
    print(f"{n} test submissions that used an attribute")
    for name, h in hits.items():
        print(f"  {name:24s} {h / n:.3f}")


if __name__ == "__main__":
    main()
