// The simulated crowd: workers with attribute biases cluster grids of images.
//
// Grids. Each grid holds S images drawn without replacement. With probability `focus_fix` an
// attribute is held to one value in the grid, with `focus_pair` to two values (attributes with
// more than two), else it is free; constraints that leave fewer than S candidates are dropped at
// random until S fit. So grids differ in which attributes vary, which is what context is about;
// with both focus probabilities 0 grids are uniform samples, as in the CEN paper's collection.
// An attribute's salience in a grid is its normalised Gini impurity
//   s_k(g) = (1 - sum_v p_v^2) / (1 - 1/n_k)   in [0, 1]; 0 iff one value only.
//
// Workers. A `noisy_fraction` of them (exactly rounded) cluster at random: m ~ U{1..max_clusters}
// clusters, each image in a uniformly drawn one. The others have a prior bias beta_w ~
// Dirichlet(bias_concentration) over the K attributes and a coarseness c_w ~ U(0, coarsen_max).
// An `open_fraction` of all workers (exactly rounded, drawn from the careful ones) are open-minded:
// their bias comes from Dirichlet(open_concentration) instead, nearly flat, so the grid's context
// rather than a favourite decides what they cluster by (the CEN paper's "workers with weak prior
// preferences", whose attribute activations the context encoder should dictate).
// On grid g such a worker
//   1. with probability `lapse` submits a random clustering as a noisy worker would;
//   2. else picks attribute k with P(k | w, g) ∝ beta_w[k] * exp(context_strength * s_k(g)) over
//      the attributes with s_k(g) > 0 (a constant attribute cannot split a grid);
//   3. groups the images by their value of k, one cluster per value present, then while more than
//      two clusters remain merges two random clusters with probability c_w each time (coarser
//      granularity: "squares vs the rest");
//   4. moves each image to a random cluster of the submission with probability `slip`.
// Cluster ids are renumbered by first appearance in the grid's display order.
//
// Assignment. Every annotation is one (grid, worker) submission; each grid is clustered by
// `workers_per_grid` distinct workers. Each worker does at least min(min_grids_per_worker,
// annotations / workers) of them; the rest go to workers in proportion to log-normal activity
// weights (real crowds are skewed).
#pragma once

#include <cstdint>
#include <vector>

#include "dataset.hpp"

namespace gen_crowd {

struct CrowdOptions {
  std::int64_t workers = 200, grids = 2000, workers_per_grid = 1;
  int rows = 4, cols = 6;  // S = rows * cols
  double noisy_fraction = 0.1;
  // Defaults: strongly biased workers whose favourite attribute is held constant in ~40% of
  // grids, where context decides; the retrieval ceilings (summary.json) are then mixture 0.94,
  // worker only 0.55, context only 0.46 (docs/crowd.md).
  double bias_concentration = 0.05;
  double open_fraction = 0.0, open_concentration = 5.0;
  double context_strength = 6.0;
  double focus_fix = 0.4, focus_pair = 0.2;
  double lapse = 0.03, slip = 0.02, coarsen_max = 0.5;
  int max_clusters = 10;
  std::int64_t min_grids_per_worker = 10;
  std::uint64_t seed = 1;
};

struct Worker {
  bool noisy = false;
  bool open = false;  // bias drawn from the flat Dirichlet(open_concentration)
  std::vector<double> bias;  // sums to 1; all 0 for noisy workers (they use no attribute)
  double coarseness = 0;
  std::int64_t annotations = 0;
};

struct Grid {
  std::vector<std::size_t> images;  // dataset rows, in display order
  std::vector<double> salience;     // per attribute
  std::vector<int> allowed;         // per attribute: values the sampler allowed (n_k when free)
};

struct Submission {
  std::int64_t worker = 0, grid = 0;
  int attribute = -1;               // -1: random clustering (noisy worker or lapse)
  bool lapse = false;
  int clusters = 0;                 // distinct clusters in the submission
  std::vector<int> cluster;         // per grid position
  std::vector<double> p;            // P(k | w, g) the worker drew from (all 0 when random)
};

struct Crowd {
  std::vector<Worker> workers;
  std::vector<Grid> grids;
  std::vector<Submission> submissions;  // grid by grid, workers_per_grid each
};

// Throws std::invalid_argument for impossible options (fewer images than S, workers_per_grid >
// workers, ...).
Crowd simulate(const Dataset& data, const CrowdOptions& o);

double salience(const Dataset& data, const std::vector<std::size_t>& images, std::size_t attribute);

// P(k | w, g) for a careful worker (all 0 for a noisy one or a grid where nothing varies).
std::vector<double> choice_probabilities(const Worker& worker, const Grid& grid, double context_strength);
void choice_probabilities(const Worker& worker, const Grid& grid, double context_strength, std::vector<double>& p);

// How often the attribute a submission used can be predicted, in expectation over the
// simulator's own draws, by the best predictor that sees
//   mixture:      the worker and the grid (argmax_k P(k | w, g));
//   worker_only:  the worker only (argmax_k of P(k | w, g) averaged over all grids);
//   context_only: the grid only (argmax_k of P(k | w, g) averaged over the careful workers).
// Over submissions with an attribute (noisy workers' and lapses excluded). These bound what the
// CEN mixture, worker and context variants can reach in attribute retrieval.
struct Ceilings {
  double mixture = 0, worker_only = 0, context_only = 0;
  std::int64_t attributed = 0;
};
Ceilings retrieval_ceilings(const Crowd& crowd, double context_strength);

}  // namespace gen_crowd
