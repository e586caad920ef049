// torch.index_hard_negatives step by step (LossSequence keeps the component across steps, as
// torch.train does; the model is the identity, so an item's "image" is its embedding): the mined
// negatives of a flat index against a brute-force nearest-different-label search over the same
// embeddings, the loss against a hand computation of the triplet margin loss over the batch's
// triplets and the mined ones, the index refreshed exactly every N steps (stale in between), hnsw
// agreeing with flat on a small set, a resume from the state continuing identically, and errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "cli.hpp"
#include "torch_test_util.hpp"
#include "torch_types.hpp"

using namespace embedflow;
using namespace embedflow::test;
namespace fs = std::filesystem;
using embedflow::test::num;
using embedflow::test::spec;
using embedflow::torchfam::LossSequence;

namespace {

constexpr std::int64_t kDim = 4;

struct Items {
  std::vector<std::int64_t> ids, labels;
  std::vector<float> x;  // [n, kDim]
};

Items random_items(std::int64_t first_id, std::int64_t n, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  Items it;
  for (std::int64_t i = 0; i < n; ++i) {
    it.ids.push_back(first_id + i);
    it.labels.push_back(i % 4);
    for (std::int64_t d = 0; d < kDim; ++d) it.x.push_back(normal(gen));
  }
  return it;
}

Record batch_of(const Items& it) {
  const auto n = static_cast<std::int64_t>(it.ids.size());
  Record r;
  r.set("image", Array::from_vector<float>({n, kDim}, it.x));
  r.set("id", Array::from_vector<std::int64_t>({n}, it.ids));
  r.set("label", Array::from_vector<std::int64_t>({n}, it.labels));
  return r;
}

std::vector<double> unit(const std::vector<float>& x, std::int64_t row) {
  std::vector<double> v(x.begin() + row * kDim, x.begin() + (row + 1) * kDim);
  double norm = 0;
  for (double e : v) norm += e * e;
  for (double& e : v) e /= std::sqrt(norm);
  return v;
}

double distance(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t d = 0; d < a.size(); ++d) s += (a[d] - b[d]) * (a[d] - b[d]);
  return std::sqrt(s);
}

// The oracle: for each anchor of `batch`, the ids of its k nearest items of `indexed` (L2 between
// normalised rows) whose label differs and which are not in the batch, by brute force.
std::vector<std::int64_t> brute_force(const Items& batch, const std::vector<Items>& indexed, std::int64_t k) {
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < batch.ids.size(); ++i) {
    const auto a = unit(batch.x, static_cast<std::int64_t>(i));
    std::vector<std::pair<double, std::int64_t>> c;
    for (const Items& set : indexed)
      for (std::size_t j = 0; j < set.ids.size(); ++j)
        if (set.labels[j] != batch.labels[i] &&
            std::find(batch.ids.begin(), batch.ids.end(), set.ids[j]) == batch.ids.end())
          c.emplace_back(distance(a, unit(set.x, static_cast<std::int64_t>(j))), set.ids[j]);
    std::sort(c.begin(), c.end());
    for (std::int64_t j = 0; j < k; ++j) out.push_back(j < static_cast<std::int64_t>(c.size()) ? c[j].second : -1);
  }
  return out;
}

std::vector<std::int64_t> ints_of(const Array& a) {
  std::vector<std::int64_t> v;
  for (std::int64_t i = 0; i < a.numel(); ++i) v.push_back(static_cast<std::int64_t>(a.as_double(i)));
  return v;
}

Value miner_spec(std::int64_t every, std::int64_t k, const std::string& index = "flat") {
  return spec("torch.index_hard_negatives", {{"every", Value::integer(every)},
                                              {"k", Value::integer(k)},
                                              {"index", Value::string(index)},
                                              {"loss", spec("torch.batch_triplet_margin", {{"margin", num(0.5)}})}});
}

// PML's TripletMarginLoss (margin m, AvgNonZeroReducer) over the triplets (a, p, n): p another
// batch row of a's label, n a batch row of another label or one of a's mined items (current
// embeddings, looked up by id in `items`).
double triplet_by_hand(const Items& batch, const std::vector<std::int64_t>& mined, std::int64_t k, const Items& items,
                       double m) {
  double sum = 0;
  int positive_terms = 0;
  const auto n = static_cast<std::int64_t>(batch.ids.size());
  for (std::int64_t a = 0; a < n; ++a) {
    std::vector<std::vector<double>> negatives;
    for (std::int64_t j = 0; j < n; ++j)
      if (batch.labels[j] != batch.labels[a]) negatives.push_back(unit(batch.x, j));
    for (std::int64_t j = 0; j < k; ++j) {
      const std::int64_t id = mined[static_cast<std::size_t>(a * k + j)];
      if (id < 0) continue;
      const auto row = std::find(items.ids.begin(), items.ids.end(), id) - items.ids.begin();
      negatives.push_back(unit(items.x, row));
    }
    for (std::int64_t p = 0; p < n; ++p) {
      if (p == a || batch.labels[p] != batch.labels[a]) continue;
      const double ap = distance(unit(batch.x, a), unit(batch.x, p));
      for (const auto& neg : negatives) {
        const double t = ap - distance(unit(batch.x, a), neg) + m;
        if (t > 0) {
          sum += t;
          ++positive_terms;
        }
      }
    }
  }
  return positive_terms ? sum / positive_terms : 0.0;
}

}  // namespace

TEST_CASE("index hard negatives: a flat index mines what a brute-force search finds, and the loss takes them",
          "[torch][index_mining]") {
  const Items a = random_items(0, 12, 1), b = random_items(100, 12, 2);
  LossSequence seq(miner_spec(1, 3));
  CHECK(seq.state().fields().empty());
  // Step 1: the set is the batch itself: nothing outside it to mine; the loss is the batch's own.
  const double first = seq.step(batch_of(a));
  CHECK(ints_of(seq.state().get("mined")) == std::vector<std::int64_t>(36, -1));
  CHECK(first == Approx(triplet_by_hand(a, std::vector<std::int64_t>(36, -1), 3, a, 0.5)).epsilon(1e-5));
  // Step 2: refreshed over a and b; b's anchors mine among a.
  const double second = seq.step(batch_of(b));
  const std::vector<std::int64_t> want = brute_force(b, {a}, 3);
  CHECK(std::count(want.begin(), want.end(), -1) == 0);
  CHECK(ints_of(seq.state().get("mined")) == want);
  const double by_hand = triplet_by_hand(b, want, 3, a, 0.5);
  CHECK(by_hand != Approx(triplet_by_hand(b, std::vector<std::int64_t>(36, -1), 3, a, 0.5)));  // the mined ones count
  CHECK(second == Approx(by_hand).epsilon(1e-5));
  // The mined items are embedded with autograd: the gradient reaches b's embeddings (the model's
  // input here), and torch.train's would reach the model through the negatives too.
  Record grads;
  seq.step(batch_of(b), &grads);
  double norm = 0;
  for (std::int64_t i = 0; i < grads.get("image").numel(); ++i) norm += std::abs(grads.get("image").as_double(i));
  CHECK(norm > 0);
  Record s = seq.state();
  CHECK(ints_of(s.get("indexed_ids")).size() == 24);
  CHECK(s.get("indexed_embeddings").shape() == std::vector<std::int64_t>{24, kDim});
}

TEST_CASE("index hard negatives: refreshed exactly every N steps, stale in between", "[torch][index_mining]") {
  const Items a = random_items(0, 12, 3), b = random_items(100, 12, 4);
  Items moved = random_items(0, 12, 5);  // the same ids and labels as a, elsewhere
  LossSequence seq(miner_spec(3, 2));
  auto steps = [&] { return ints_of(seq.state().get("steps")); };  // {step, step of the last refresh}
  seq.step(batch_of(a));  // step 1: refresh
  CHECK(steps() == std::vector<std::int64_t>{1, 1});
  seq.step(batch_of(moved));  // step 2: a's items now sit at `moved`, the index still holds a
  CHECK(steps() == std::vector<std::int64_t>{2, 1});
  seq.step(batch_of(b));  // step 3: b mines from the stale index: a's old embeddings
  CHECK(steps() == std::vector<std::int64_t>{3, 1});
  const std::vector<std::int64_t> stale = brute_force(b, {a}, 2), fresh = brute_force(b, {moved}, 2);
  REQUIRE(stale != fresh);  // the two searches disagree, so the test can tell them apart
  CHECK(ints_of(seq.state().get("mined")) == stale);
  CHECK(ints_of(seq.state().get("indexed_ids")).size() == 12);  // b is not indexed yet
  seq.step(batch_of(b));  // step 4 = 1 + 3: refresh over moved and b
  CHECK(steps() == std::vector<std::int64_t>{4, 4});
  CHECK(ints_of(seq.state().get("mined")) == fresh);
  CHECK(ints_of(seq.state().get("indexed_ids")).size() == 24);
  // Validation's loss metric mines from the index and changes nothing.
  const Record before = seq.state();
  seq.evaluate(batch_of(a));
  CHECK(ints_of(seq.state().get("steps")) == ints_of(before.get("steps")));
  CHECK(ints_of(seq.state().get("mined")) == ints_of(before.get("mined")));
}

TEST_CASE("index hard negatives: hnsw finds what flat finds on a small set", "[torch][index_mining]") {
  const Items a = random_items(0, 40, 6), b = random_items(100, 12, 7);
  LossSequence flat(miner_spec(1, 3, "flat")), hnsw(miner_spec(1, 3, "hnsw"));
  for (LossSequence* s : {&flat, &hnsw}) {
    s->step(batch_of(a));
    s->step(batch_of(b));
  }
  CHECK(ints_of(hnsw.state().get("mined")) == ints_of(flat.state().get("mined")));
  CHECK(ints_of(flat.state().get("mined")) == brute_force(b, {a}, 3));
}

TEST_CASE("index hard negatives: resuming from the state continues identically", "[torch][index_mining]") {
  std::vector<Items> batches;
  for (std::uint32_t i = 0; i < 6; ++i) batches.push_back(random_items(100 * (i % 3), 12, 10 + i));
  LossSequence straight(miner_spec(2, 2));
  std::vector<double> want;
  std::vector<std::vector<std::int64_t>> want_mined;
  for (const Items& b : batches) {
    want.push_back(straight.step(batch_of(b)));
    want_mined.push_back(ints_of(straight.state().get("mined")));
  }
  LossSequence first(miner_spec(2, 2));
  for (std::size_t i = 0; i < 3; ++i) CHECK(first.step(batch_of(batches[i])) == want[i]);
  LossSequence resumed(miner_spec(2, 2));
  resumed.load_state(first.state());  // after step 3: the next refresh falls on step 5
  for (std::size_t i = 3; i < 6; ++i) {
    INFO("step " << i + 1);
    CHECK(resumed.step(batch_of(batches[i])) == want[i]);
    CHECK(ints_of(resumed.state().get("mined")) == want_mined[i]);
  }
}

TEST_CASE("index hard negatives: errors name the loss and what is wrong", "[torch][index_mining]") {
  Record no_id = batch_of(random_items(0, 8, 1));
  no_id.erase("id");
  CHECK_THROWS_WITH(LossSequence(miner_spec(1, 2)).step(no_id), Catch::Contains("needs the batch field 'id'"));
  Record float_id = batch_of(random_items(0, 8, 1));
  float_id.set("id", Array::from_vector<float>({8}, std::vector<float>(8, 1.0f)));
  CHECK_THROWS_WITH(LossSequence(miner_spec(1, 2)).step(float_id), Catch::Contains("id must be an integer field"));
  const Value swap = spec("torch.index_hard_negatives",
                          {{"loss", spec("torch.batch_triplet_margin", {{"swap", Value::boolean(true)}})}});
  CHECK_THROWS_WITH(LossSequence{swap}, Catch::Contains("swap"));
  LossSequence seq(miner_spec(1, 2));
  seq.step(batch_of(random_items(0, 8, 1)));
  Record state = seq.state();
  LossSequence other_k(miner_spec(1, 3));
  CHECK_THROWS_WITH(other_k.load_state(state), Catch::Contains("not k = 3 per anchor"));
}

// Two ranks over a file store: the trainer's cross-rank mining (gather_embeddings auto) would hand
// the loss both ranks' embeddings for one rank's images, which is refused on each rank with what
// to set; with gather_embeddings: off each rank mines its own set and both train to the end.
TEST_CASE("index hard negatives: data-parallel ranks mine their own rows, gathered batches are refused",
          "[torch][index_mining][gather]") {
  fs::path dir = scratch_dir("torch-index-mining-ranks");
  auto graph = [&](const std::string& run) {
    return "# index mining, two ranks\nseed: 3\nnodes:\n"
           "  data:  {type: io.hdf5_reader, params: {path: " + torch_data("train.h5") + ", fields: [id, label, image], batch_size: 64}}\n"
           "  train: {type: torch.train, params: {model: {type: torch.mlp, hidden: [32], embedding_dim: 8}, "
           "loss: {type: torch.index_hard_negatives, k: 2, every: 2, loss: {type: torch.batch_triplet_margin, margin: 0.2}}, "
           "optimizer: {type: torch.sgd, lr: 0.05}, max_steps: 4, log_every: 1, threads: 1, world_size: 2, "
           "rendezvous_timeout: 20, log_dir: " + (dir / run).string() + "}}\n"
           "edges: [data.out -> train.in]\n";
  };
  auto two_ranks = [&](const std::string& run, const std::string& gather) {
    write_file(dir / (run + "0.yaml"), graph(run + "0"));
    write_file(dir / (run + "1.yaml"), graph(run + "1"));
    const std::string store = "train.rendezvous=file://" + (dir / (run + "-store")).string();
    auto rank1 = embedflow::test::spawn_cli({"run", (dir / (run + "1.yaml")).string(), "--quiet", "--set", "train.rank=1",
                                             "--set", store, "--set", "train.gather_embeddings=" + gather});
    auto rank0 = run_cli({"run", (dir / (run + "0.yaml")).string(), "--quiet", "--set", "train.rank=0", "--set", store,
                          "--set", "train.gather_embeddings=" + gather});
    return std::make_pair(rank0, embedflow::test::wait_child(rank1));
  };
  auto [gathered0, gathered1] = two_ranks("gathered", "auto");
  INFO(gathered0.err << gathered1.err);
  CHECK(gathered0.exit_code != 0);
  CHECK(gathered1.exit_code != 0);
  CHECK_THAT(gathered0.err, Catch::Contains("torch.index_hard_negatives") && Catch::Contains("gather_embeddings: off"));
  auto [own0, own1] = two_ranks("own", "off");
  INFO(own0.err << own1.err);
  REQUIRE(own0.exit_code == 0);
  REQUIRE(own1.exit_code == 0);
  CHECK(read_metrics(dir / "own0" / "metrics.csv").size() == 4);
}
