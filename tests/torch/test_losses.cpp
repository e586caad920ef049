// Every loss component against (1) a tiny case computed by hand and (2) PyTorch's Python
// functions (F.triplet_margin_loss, F.pairwise_distance, autograd) or NumPy loops on fixed random
// tensors, values and gradients. The losses run through evaluate_loss: the component built from
// its YAML spec exactly as a graph would, with an identity model so the inputs are embeddings.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <sstream>

#include "cli.hpp"
#include "torch_test_util.hpp"
#include "torch_types.hpp"

using namespace embedflow;
using embedflow::test::run_python;
using embedflow::torchfam::evaluate_loss;
using embedflow::test::spec;
using embedflow::test::num;

namespace {


Array matrix(std::int64_t rows, std::int64_t cols, std::vector<float> v) { return Array::from_vector<float>({rows, cols}, std::move(v)); }

// The four points of the hand-computed label-batch cases: labels 0, 0, 1, 1.
Record label_batch() {
  Record r;
  r.set("image", matrix(4, 2, {0, 0, 1, 0, 0, 2, 0, 5}));
  r.set("label", Array::from_vector<std::int64_t>({4}, {0, 0, 1, 1}));
  return r;
}

Record pair_batch() {
  Record r;
  r.set("a_image", matrix(2, 2, {0, 0, 0, 0}));
  r.set("b_image", matrix(2, 2, {3, 4, 0.6f, 0.8f}));  // d = 5 (similar), d = 1 (dissimilar)
  r.set("pair_label", Array::from_vector<float>({2}, {1, 0}));
  return r;
}

}  // namespace

TEST_CASE("pair losses by hand", "[torch][loss]") {
  const Record b = pair_batch();
  // squared: (1 * 5^2 + (2 - 1)^2) / 2; unsquared: (5 + (2 - 1)) / 2.
  CHECK(evaluate_loss(spec("torch.contrastive", {{"margin", num(2)}}), b) == Approx(13.0).epsilon(1e-5));
  CHECK(evaluate_loss(spec("torch.contrastive", {{"margin", num(2)}, {"squared", Value::boolean(false)}}), b) ==
        Approx(3.0).epsilon(1e-5));
  // gamma 2, m_p 1, m_n 3: (2 * (5 - 1) + (3 - 1)) / 2 = 5; squared: (2 * 16 + 4) / 2 = 18.
  Value::Map dual{{"positive_margin", num(1)}, {"negative_margin", num(3)}, {"positive_weight", num(2)}};
  CHECK(evaluate_loss(spec("torch.dual_margin_contrastive", dual), b) == Approx(5.0).epsilon(1e-5));
  dual.emplace_back("squared", Value::boolean(true));
  CHECK(evaluate_loss(spec("torch.dual_margin_contrastive", dual), b) == Approx(18.0).epsilon(1e-5));
}

TEST_CASE("triplet margin by hand", "[torch][loss]") {
  Record r;
  r.set("anchor_image", matrix(2, 2, {0, 0, 0, 0}));
  r.set("positive_image", matrix(2, 2, {1, 0, 0, 3}));
  r.set("negative_image", matrix(2, 2, {0, 2, 4, 0}));
  // d_ap = 1, 3; d_an = 2, 4; margin 1.5: both hinge terms 0.5.
  CHECK(evaluate_loss(spec("torch.triplet_margin", {{"margin", num(1.5)}}), r) == Approx(0.5).epsilon(1e-5));
  CHECK(evaluate_loss(spec("torch.triplet_margin", {{"margin", num(1.5)}, {"soft", Value::boolean(true)}}), r) ==
        Approx(std::log1p(std::exp(0.5))).epsilon(1e-5));
  // swap: d_pn = sqrt(5), 5, so the first triplet's d_an becomes min(2, sqrt 5) = 2: unchanged.
  CHECK(evaluate_loss(spec("torch.triplet_margin", {{"margin", num(1.5)}, {"swap", Value::boolean(true)}}), r) ==
        Approx(0.5).epsilon(1e-5));
}

TEST_CASE("mining and all-pairs losses by hand", "[torch][loss]") {
  const Record b = label_batch();
  const double s5 = std::sqrt(5.0);
  // Distances: d01 = 1, d02 = 2, d03 = 5, d12 = sqrt 5, d13 = sqrt 26, d23 = 3. Margin 0.5.
  // Batch hard, per anchor (farthest positive, closest negative): 0: (1, 2) -> 0; 1: (1, sqrt 5) -> 0;
  // 2: (3, 2) -> 1.5; 3: (3, 5) -> 0. Mean 0.375.
  CHECK(evaluate_loss(spec("torch.batch_hard_triplet", {{"margin", num(0.5)}}), b) == Approx(0.375).epsilon(1e-5));
  // Semi-hard, per anchor-positive pair: (0,1): closest negative beyond 1 is 2 -> 0; (1,0): sqrt 5 -> 0;
  // (2,3): none beyond 3, farthest is sqrt 5 -> 3 - sqrt 5 + 0.5; (3,2): 5 -> 0.
  CHECK(evaluate_loss(spec("torch.semi_hard_triplet", {{"margin", num(0.5)}}), b) ==
        Approx((3.0 - s5 + 0.5) / 4.0).epsilon(1e-5));
  // mu 0.25, l 3 over the 6 pairs: 0.25*1 + 0.75*(3-2) + 0 + 0.75*(3-sqrt 5) + 0 + 0.25*9.
  CHECK(evaluate_loss(spec("torch.all_pairs_contrastive", {{"mu", num(0.25)}, {"margin", num(3)}}), b) ==
        Approx((0.25 + 0.75 + 0.75 * (3.0 - s5) + 2.25) / 6.0).epsilon(1e-5));
  // L2: 0.1 * mean(0, 1, 4, 25).
  CHECK(evaluate_loss(spec("torch.l2_embedding", {{"weight", num(0.1)}}), b) == Approx(0.75).epsilon(1e-6));
  // A sum shares the forward pass: batch hard + 2 * L2.
  Value sum = spec("torch.sum", {{"a", spec("torch.batch_hard_triplet", {{"margin", num(0.5)}})},
                                 {"b", spec("torch.l2_embedding", {{"weight", num(0.1)}})},
                                 {"weights", Value::list({num(1), num(2)})}});
  CHECK(evaluate_loss(sum, b) == Approx(0.375 + 1.5).epsilon(1e-5));

  // Unlabelled points (label -1) take part in no pair: adding one far away changes nothing.
  Record u;
  u.set("image", matrix(5, 2, {0, 0, 1, 0, 0, 2, 0, 5, 0, 0.5f}));
  u.set("label", Array::from_vector<std::int64_t>({5}, {0, 0, 1, 1, -1}));
  CHECK(evaluate_loss(spec("torch.semi_hard_triplet", {{"margin", num(0.5)}}), u) ==
        Approx((3.0 - s5 + 0.5) / 4.0).epsilon(1e-5));
  CHECK(evaluate_loss(spec("torch.all_pairs_contrastive", {{"mu", num(0.25)}, {"margin", num(3)}}), u) ==
        Approx((0.25 + 0.75 + 0.75 * (3.0 - s5) + 2.25) / 6.0).epsilon(1e-5));
  // Batch hard skips the unlabelled anchor: the mean is over the 4 labelled ones.
  CHECK(evaluate_loss(spec("torch.batch_hard_triplet", {{"margin", num(0.5)}}), u) == Approx(0.375).epsilon(1e-5));

  // The same relations as a pair_labels matrix (image.batch_pairs' matrix mode), with -1 for the
  // unknown pairs of the fifth point; it takes precedence over label.
  Record m;
  m.set("image", u.get("image"));
  m.set("label", Array::from_vector<std::int64_t>({5}, {9, 9, 9, 9, 9}));  // ignored
  m.set("pair_labels", Array::from_vector<float>({5, 5}, {1, 1, 0, 0, -1,  //
                                                          1, 1, 0, 0, -1,  //
                                                          0, 0, 1, 1, -1,  //
                                                          0, 0, 1, 1, -1,  //
                                                          -1, -1, -1, -1, 1}));
  CHECK(evaluate_loss(spec("torch.batch_hard_triplet", {{"margin", num(0.5)}}), m) == Approx(0.375).epsilon(1e-5));
  CHECK(evaluate_loss(spec("torch.semi_hard_triplet", {{"margin", num(0.5)}}), m) ==
        Approx((3.0 - s5 + 0.5) / 4.0).epsilon(1e-5));
  CHECK(evaluate_loss(spec("torch.all_pairs_contrastive", {{"mu", num(0.25)}, {"margin", num(3)}}), m) ==
        Approx((0.25 + 0.75 + 0.75 * (3.0 - s5) + 2.25) / 6.0).epsilon(1e-5));
}

TEST_CASE("all-pairs contrastive: gradients by hand, none for the hinge at zero distance", "[torch][loss]") {
  // Points 0 and 1 coincide with different labels; point 2 shares point 0's label at distance 1.
  // mu 0.5, l 2: pairs (0,1) d=0 -> 0.5*2; (0,2) similar d=1 -> 0.5*1; (1,2) d=1 -> 0.5*(2-1).
  Record r;
  r.set("image", matrix(3, 2, {1, 1, 1, 1, 2, 1}));
  r.set("label", Array::from_vector<std::int64_t>({3}, {0, 1, 0}));
  Record g;
  CHECK(evaluate_loss(spec("torch.all_pairs_contrastive", {{"mu", num(0.5)}, {"margin", num(2)}}), r, &g) ==
        Approx((1.0 + 0.5 + 0.5) / 3.0).epsilon(1e-6));
  // d/dx of the mean over 3 pairs: similar (0,2): 0.5 * 2 (x0 - x2) = (-1, 0) on x0, (1, 0) on x2;
  // dissimilar (1,2) inside the margin: -0.5 (x1 - x2) / d = (0.5, 0) on x1, (-0.5, 0) on x2;
  // the coincident pair (0,1) contributes nothing (a subgradient of 0, as cdist's).
  std::vector<double> grad;
  for (std::int64_t i = 0; i < g.get("image").numel(); ++i) grad.push_back(g.get("image").as_double(i));
  const std::vector<double> want{-1.0 / 3, 0, 0.5 / 3, 0, 0.5 / 3, 0};
  REQUIRE(grad.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(grad[i] == Approx(want[i]).margin(1e-6));
}

TEST_CASE("a loss names the field it is missing", "[torch][loss]") {
  Record r = label_batch();
  CHECK_THROWS_WITH(evaluate_loss(spec("torch.contrastive"), r),
                    Catch::Contains("torch.contrastive needs the batch field 'a_image'"));
}

namespace {

std::string json_matrix(const std::vector<float>& v, std::int64_t cols) {
  std::ostringstream o;
  o.precision(9);
  o << "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i % static_cast<std::size_t>(cols) == 0) o << (i ? "],[" : "[");
    else o << ",";
    o << v[i];
  }
  return o.str() + "]]";
}

std::vector<double> floats_of(const Array& a) {
  std::vector<double> v;
  for (std::int64_t i = 0; i < a.numel(); ++i) v.push_back(a.as_double(i));
  return v;
}

}  // namespace

TEST_CASE("losses and gradients match PyTorch and NumPy on fixed random tensors", "[torch][loss][python]") {
  const std::int64_t B = 12, D = 5;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 1.f);
  auto random = [&] {
    std::vector<float> v(static_cast<std::size_t>(B * D));
    for (auto& x : v) x = normal(rng);
    return v;
  };
  const std::vector<float> A = random(), P = random(), N = random();
  std::vector<float> z(static_cast<std::size_t>(B));
  std::vector<std::int64_t> labels(static_cast<std::size_t>(B));
  for (std::int64_t i = 0; i < B; ++i) {
    z[static_cast<std::size_t>(i)] = static_cast<float>(i % 3 == 0);
    labels[static_cast<std::size_t>(i)] = i % 4;
  }

  // Python computes every reference in one process (PyTorch import dominates its run time).
  std::string script = R"PY(
import json, sys, numpy as np, torch
import torch.nn.functional as F
torch.set_default_dtype(torch.float64)
A = torch.tensor()PY" + json_matrix(A, D) + R"PY(, requires_grad=True)
P = torch.tensor()PY" + json_matrix(P, D) + R"PY(, requires_grad=True)
N = torch.tensor()PY" + json_matrix(N, D) + R"PY(, requires_grad=True)
z = torch.tensor([)PY";
  for (std::int64_t i = 0; i < B; ++i) script += cat(i ? "," : "", z[static_cast<std::size_t>(i)]);
  script += "])\nlabels = np.array([";
  for (std::int64_t i = 0; i < B; ++i) script += cat(i ? "," : "", labels[static_cast<std::size_t>(i)]);
  script += R"PY(])
out = {}
def emit(name, loss, *leaves):
    for t in (A, P, N):
        t.grad = None
    loss.backward()
    out[name] = [loss.item()] + [x for t in leaves for x in t.grad.flatten().tolist()]
d = F.pairwise_distance(A, P)
emit('contrastive', (z * d**2 + (1 - z) * torch.clamp(1.5 - d, min=0)**2).mean(), A, P)
d = F.pairwise_distance(A, P)
emit('contrastive_plain', (z * d + (1 - z) * torch.clamp(1.5 - d, min=0)).mean(), A, P)
d = F.pairwise_distance(A, P)
emit('dual', (0.7 * z * torch.clamp(d - 0.5, min=0) + (1 - z) * torch.clamp(2.5 - d, min=0)).mean(), A, P)
emit('triplet', F.triplet_margin_loss(A, P, N, margin=0.8), A, P, N)
emit('triplet_swap', F.triplet_margin_loss(A, P, N, margin=0.8, swap=True), A, P, N)
emit('triplet_soft', F.softplus(F.pairwise_distance(A, P) - F.pairwise_distance(A, N) + 0.3).mean(), A, P, N)
# Mining losses: NumPy loops in double precision, independent of the tensor formulation.
X = A.detach().numpy()
Dm = np.sqrt(((X[:, None, :] - X[None, :, :])**2).sum(-1))
n = len(X)
terms = []
for a in range(n):
    pos = [Dm[a, p] for p in range(n) if p != a and labels[p] == labels[a]]
    neg = [Dm[a, q] for q in range(n) if labels[q] != labels[a]]
    if pos and neg:
        terms.append(max(0.0, max(pos) - min(neg) + 0.6))
out['batch_hard'] = [float(np.mean(terms))]
terms = []
for a in range(n):
    neg = [Dm[a, q] for q in range(n) if labels[q] != labels[a]]
    for p in range(n):
        if p == a or labels[p] != labels[a] or not neg:
            continue
        beyond = [x for x in neg if x > Dm[a, p]]
        dn = min(beyond) if beyond else max(neg)
        terms.append(max(0.0, Dm[a, p] - dn + 0.6))
out['semi_hard'] = [float(np.mean(terms))]
terms = []
for i in range(n):
    for j in range(i + 1, n):
        s = 1.0 if labels[i] == labels[j] else 0.0
        terms.append(0.3 * s * Dm[i, j]**2 + 0.7 * (1 - s) * max(0.0, 2.0 - Dm[i, j]))
out['all_pairs'] = [float(np.mean(terms))]
# Batch hard with autograd, for its gradient: explicit per-anchor torch ops.
# + 1e-12: sqrt has an infinite slope at the zero diagonal (unused, but 0 * inf = NaN).
Dt = torch.sqrt(((A[:, None, :] - A[None, :, :])**2).sum(-1) + 1e-12)
lt = torch.tensor(labels)
terms = []
for a in range(n):
    pm = (lt == lt[a]) & (torch.arange(n) != a)
    nm = lt != lt[a]
    terms.append(torch.clamp(Dt[a][pm].max() - Dt[a][nm].min() + 0.6, min=0))
emit('batch_hard_grad', torch.stack(terms).mean(), A)
# All pairs with autograd through cdist (independent of the loss's Gram matrix and analytic
# backward pass), for its gradient.
Dc = torch.cdist(A, A, compute_mode='donot_use_mm_for_euclid_dist')
iu = torch.triu_indices(n, n, 1)
s = (lt[iu[0]] == lt[iu[1]]).to(A.dtype)
dd = Dc[iu[0], iu[1]]
emit('all_pairs_grad', (0.3 * s * dd**2 + 0.7 * (1 - s) * torch.clamp(2.0 - dd, min=0)).mean(), A)
emit('l2', 0.05 * (A**2).sum(1).mean(), A)
print(json.dumps(out))
)PY";
  auto res = run_python(script);
  INFO(res.err);
  REQUIRE(res.exit_code == 0);
  // Parse {"name": [values...], ...} without a JSON library: names are simple and values floats.
  std::map<std::string, std::vector<double>> ref;
  {
    std::string s = res.out;
    std::size_t pos = 0;
    while ((pos = s.find('"', pos)) != std::string::npos) {
      std::size_t end = s.find('"', pos + 1);
      std::string name = s.substr(pos + 1, end - pos - 1);
      std::size_t open = s.find('[', end), close = s.find(']', open);
      std::vector<double> v;
      std::istringstream items(s.substr(open + 1, close - open - 1));
      std::string item;
      while (std::getline(items, item, ',')) v.push_back(std::stod(item));
      ref[name] = v;
      pos = close;
    }
  }
  REQUIRE(ref.size() == 12);

  Record pairs;
  pairs.set("a_image", matrix(B, D, A));
  pairs.set("b_image", matrix(B, D, P));
  pairs.set("pair_label", Array::from_vector<float>({B}, z));
  Record triplets;
  triplets.set("anchor_image", matrix(B, D, A));
  triplets.set("positive_image", matrix(B, D, P));
  triplets.set("negative_image", matrix(B, D, N));
  Record labelled;
  labelled.set("image", matrix(B, D, A));
  labelled.set("label", Array::from_vector<std::int64_t>({B}, labels));

  // Value and gradients (w.r.t. the named fields, in order) against the reference.
  auto compare = [&](const std::string& name, const Value& s, const Record& batch, std::vector<std::string> fields) {
    INFO(name);
    Record grads;
    double v = evaluate_loss(s, batch, &grads);
    const auto& r = ref.at(name);
    CHECK(v == Approx(r[0]).epsilon(2e-5).margin(1e-6));
    std::size_t k = 1;
    for (const auto& f : fields) {
      for (double g : floats_of(grads.get(f))) {
        REQUIRE(k < r.size());
        CHECK(g == Approx(r[k]).epsilon(1e-3).margin(2e-5));
        ++k;
      }
    }
    CHECK(k == r.size());
  };
  compare("contrastive", spec("torch.contrastive", {{"margin", num(1.5)}}), pairs, {"a_image", "b_image"});
  compare("contrastive_plain", spec("torch.contrastive", {{"margin", num(1.5)}, {"squared", Value::boolean(false)}}), pairs,
          {"a_image", "b_image"});
  compare("dual",
          spec("torch.dual_margin_contrastive",
               {{"positive_margin", num(0.5)}, {"negative_margin", num(2.5)}, {"positive_weight", num(0.7)}}),
          pairs, {"a_image", "b_image"});
  compare("triplet", spec("torch.triplet_margin", {{"margin", num(0.8)}}), triplets,
          {"anchor_image", "positive_image", "negative_image"});
  compare("triplet_swap", spec("torch.triplet_margin", {{"margin", num(0.8)}, {"swap", Value::boolean(true)}}), triplets,
          {"anchor_image", "positive_image", "negative_image"});
  compare("triplet_soft", spec("torch.triplet_margin", {{"margin", num(0.3)}, {"soft", Value::boolean(true)}}), triplets,
          {"anchor_image", "positive_image", "negative_image"});
  compare("batch_hard", spec("torch.batch_hard_triplet", {{"margin", num(0.6)}}), labelled, {});
  compare("batch_hard_grad", spec("torch.batch_hard_triplet", {{"margin", num(0.6)}}), labelled, {"image"});
  compare("semi_hard", spec("torch.semi_hard_triplet", {{"margin", num(0.6)}}), labelled, {});
  compare("all_pairs", spec("torch.all_pairs_contrastive", {{"mu", num(0.3)}, {"margin", num(2.0)}}), labelled, {});
  compare("all_pairs_grad", spec("torch.all_pairs_contrastive", {{"mu", num(0.3)}, {"margin", num(2.0)}}), labelled,
          {"image"});
  compare("l2", spec("torch.l2_embedding", {{"weight", num(0.05)}}), labelled, {"image"});
}
