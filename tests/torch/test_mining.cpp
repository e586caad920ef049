// Miners (torch.*_miner) and the label-batch losses that take them (torch.batch_contrastive,
// torch.batch_triplet_margin) against (1) a tiny case computed by hand and (2) pytorch-metric-
// learning's own classes, whose outputs on fixed random embeddings are recorded in
// fixtures/pml_mining.json (fixtures/make_pml_mining.py says how, with PML's version and commit):
// the mined index sets exactly, loss values and gradients to 1e-5. Components are built from
// their YAML specs (mine_indices, evaluate_loss: the identity as the model).
#include <catch2/catch.hpp>

#include <embedflow/yaml.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <tuple>

#include "cli.hpp"
#include "torch_test_util.hpp"
#include "torch_types.hpp"

using namespace embedflow;
using embedflow::test::num;
using embedflow::test::spec;
using embedflow::test::str;
using embedflow::torchfam::evaluate_loss;
using embedflow::torchfam::mine_indices;
using json = nlohmann::json;

namespace {

// The points of the hand-computed cases, labels 0, 0, 1, 1: d01 = 1, d02 = 2, d03 = 5,
// d12 = sqrt 5, d13 = sqrt 26, d23 = 3 (unnormalised: normalize_embeddings false).
Record hand_batch() {
  Record r;
  r.set("image", Array::from_vector<float>({4, 2}, {0, 0, 1, 0, 0, 2, 0, 5}));
  r.set("label", Array::from_vector<std::int64_t>({4}, {0, 0, 1, 1}));
  return r;
}

using Triplet = std::tuple<std::int64_t, std::int64_t, std::int64_t>;
using Pair = std::pair<std::int64_t, std::int64_t>;

std::vector<std::int64_t> ints_of(const Array& a) {
  std::vector<std::int64_t> v;
  for (std::int64_t i = 0; i < a.numel(); ++i) v.push_back(a.as_int(i));
  return v;
}

std::vector<Triplet> sorted_triplets(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& p,
                                     const std::vector<std::int64_t>& n) {
  REQUIRE(a.size() == p.size());
  REQUIRE(a.size() == n.size());
  std::vector<Triplet> t;
  for (std::size_t i = 0; i < a.size(); ++i) t.emplace_back(a[i], p[i], n[i]);
  std::sort(t.begin(), t.end());
  return t;
}

std::vector<Pair> sorted_pairs(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b) {
  REQUIRE(a.size() == b.size());
  std::vector<Pair> t;
  for (std::size_t i = 0; i < a.size(); ++i) t.emplace_back(a[i], b[i]);
  std::sort(t.begin(), t.end());
  return t;
}

std::vector<Triplet> mined_triplets(const Value& miner, const Record& batch) {
  Record t = mine_indices(miner, batch);
  return sorted_triplets(ints_of(t.get("a")), ints_of(t.get("p")), ints_of(t.get("n")));
}

const json& fixtures() {
  static const json doc = [] {
    std::ifstream in(embedflow::test::source_dir() + "/tests/torch/fixtures/pml_mining.json");
    REQUIRE(in.good());
    return json::parse(in);
  }();
  return doc;
}

// A fixture input (or a step of one) as a label batch: image = the embeddings, label.
Record fixture_batch(const json& embeddings, const json& labels) {
  const auto rows = static_cast<std::int64_t>(labels.size());
  std::vector<float> x = embeddings.get<std::vector<float>>();
  Record r;
  r.set("image", Array::from_vector<float>({rows, static_cast<std::int64_t>(x.size()) / rows}, x));
  r.set("label", Array::from_vector<std::int64_t>({rows}, labels.get<std::vector<std::int64_t>>()));
  return r;
}

Value fixture_spec(const json& c) { return parse_yaml(c.at("spec").get<std::string>(), c.at("name").get<std::string>()); }

}  // namespace

TEST_CASE("miners by hand", "[torch][miner]") {
  const Record b = hand_batch();
  const Value unnormalised = Value::boolean(false);
  // Batch hard, per anchor: the farthest positive and the closest negative.
  CHECK(mined_triplets(spec("torch.batch_hard_miner", {{"normalize_embeddings", unnormalised}}), b) ==
        std::vector<Triplet>{{0, 1, 2}, {1, 0, 2}, {2, 3, 0}, {3, 2, 0}});
  // d_an - d_ap of the 8 triplets: (0,1,2) 1, (0,1,3) 4, (1,0,2) sqrt5 - 1, (1,0,3) sqrt26 - 1,
  // (2,3,0) -1, (2,3,1) sqrt5 - 3, (3,2,0) 2, (3,2,1) sqrt26 - 3; margin 2.5.
  auto triplet_margin = [&](const char* type) {
    return mined_triplets(spec("torch.triplet_margin_miner", {{"margin", num(2.5)}, {"type_of_triplets", str(type)},
                                                              {"normalize_embeddings", unnormalised}}),
                          b);
  };
  CHECK(triplet_margin("hard") == std::vector<Triplet>{{2, 3, 0}, {2, 3, 1}});
  CHECK(triplet_margin("semihard") == std::vector<Triplet>{{0, 1, 2}, {1, 0, 2}, {3, 2, 0}, {3, 2, 1}});
  CHECK(triplet_margin("easy") == std::vector<Triplet>{{0, 1, 3}, {1, 0, 3}});
  CHECK(triplet_margin("all").size() == 6);
  // Pair margin 0.5 / 2.1: every positive pair (1 and 3 are beyond 0.5); negatives within 2.1: (0,2), (2,0).
  Record pm = mine_indices(spec("torch.pair_margin_miner", {{"pos_margin", num(0.5)}, {"neg_margin", num(2.1)},
                                                            {"normalize_embeddings", unnormalised}}),
                           b);
  CHECK(sorted_pairs(ints_of(pm.get("a1")), ints_of(pm.get("p"))) == std::vector<Pair>{{0, 1}, {1, 0}, {2, 3}, {3, 2}});
  CHECK(sorted_pairs(ints_of(pm.get("a2")), ints_of(pm.get("n"))) == std::vector<Pair>{{0, 2}, {2, 0}});
  // Semi-hard (the closest positive, then the closest negative farther than it): anchor 0: 1 at
  // 1, then 2 at 2; anchor 1: 0 at 1, then 2 at sqrt 5; anchor 2: 3 at 3, but both negatives are
  // closer (2, sqrt 5), so anchor 2 is dropped; anchor 3: 2 at 3, then 0 at 5.
  Record sh = mine_indices(spec("torch.batch_easy_hard_miner", {{"normalize_embeddings", unnormalised}}), b);
  CHECK(sorted_pairs(ints_of(sh.get("a1")), ints_of(sh.get("p"))) == std::vector<Pair>{{0, 1}, {1, 0}, {3, 2}});
  CHECK(sorted_pairs(ints_of(sh.get("a2")), ints_of(sh.get("n"))) == std::vector<Pair>{{0, 2}, {1, 2}, {3, 0}});
}

TEST_CASE("label-batch losses by hand", "[torch][miner][loss]") {
  const Record b = hand_batch();
  const double s5 = std::sqrt(5.0);
  // Contrastive, pos_margin 0, neg_margin 2.5, every pair: positives (0,1), (1,0), (2,3), (3,2) at
  // 1, 1, 3, 3 average 2; negatives max(0, 2.5 - d): 0.5 twice, 2.5 - sqrt 5 twice, four zeros,
  // averaged over the four above 0.
  CHECK(evaluate_loss(spec("torch.batch_contrastive", {{"neg_margin", num(2.5)}, {"normalize_embeddings", Value::boolean(false)}}),
                      b) == Approx(2.0 + (1.0 + 2 * (2.5 - s5)) / 4).epsilon(1e-6));
  // Triplets of the batch-hard miner, margin 0.5: only (2,3,0) violates it, by 3 - 2 + 0.5.
  // avg_non_zero: 1.5; mean over the 4 triplets: 0.375, the value of torch.batch_hard_triplet.
  Value hard = spec("torch.batch_triplet_margin", {{"margin", num(0.5)}, {"normalize_embeddings", Value::boolean(false)},
                                                   {"miner", spec("torch.batch_hard_miner", {{"normalize_embeddings", Value::boolean(false)}})}});
  CHECK(evaluate_loss(hard, b) == Approx(1.5).epsilon(1e-6));
  hard.set("reducer", str("mean"));
  CHECK(evaluate_loss(hard, b) == Approx(0.375).epsilon(1e-6));
  CHECK(evaluate_loss(spec("torch.batch_hard_triplet", {{"margin", num(0.5)}}), b) == Approx(0.375).epsilon(1e-6));
}

TEST_CASE("miners equal pytorch-metric-learning's on fixed embeddings", "[torch][miner][pml]") {
  const json& doc = fixtures();
  INFO("fixtures of PML " << doc.at("pml_version").get<std::string>() << " (" << doc.at("pml_commit").get<std::string>() << ")");
  REQUIRE(doc.at("miners").size() == 40);
  for (const json& c : doc.at("miners")) {
    INFO(c.at("name").get<std::string>() << ": PML " << c.at("pml").get<std::string>() << " vs " << c.at("spec").get<std::string>());
    const json& input = doc.at("inputs").at(c.at("input").get<std::string>());
    const Record mined = mine_indices(fixture_spec(c), fixture_batch(input.at("embeddings"), input.at("labels")));
    const json& want = c.at("tuple");
    auto got = [&](const char* f) { return ints_of(mined.get(f)); };
    auto ref = [&](const char* f) { return want.at(f).get<std::vector<std::int64_t>>(); };
    if (want.contains("a")) {
      REQUIRE(mined.find("a"));
      CHECK(sorted_triplets(got("a"), got("p"), got("n")) == sorted_triplets(ref("a"), ref("p"), ref("n")));
    } else {
      REQUIRE(mined.find("a1"));
      CHECK(sorted_pairs(got("a1"), got("p")) == sorted_pairs(ref("a1"), ref("p")));
      CHECK(sorted_pairs(got("a2"), got("n")) == sorted_pairs(ref("a2"), ref("n")));
    }
  }
}

TEST_CASE("label-batch losses equal pytorch-metric-learning's: values and gradients", "[torch][miner][loss][pml]") {
  const json& doc = fixtures();
  REQUIRE(doc.at("losses").size() == 32);
  for (const json& c : doc.at("losses")) {
    INFO(c.at("name").get<std::string>() << ": PML " << c.at("pml").get<std::string>() << " vs " << c.at("spec").get<std::string>());
    const json& input = doc.at("inputs").at(c.at("input").get<std::string>());
    Record grads;
    const double value = evaluate_loss(fixture_spec(c), fixture_batch(input.at("embeddings"), input.at("labels")), &grads);
    CHECK(value == Approx(c.at("value").get<double>()).epsilon(1e-5).margin(1e-5));
    const std::vector<double> want = c.at("grad").get<std::vector<double>>();
    const Array& g = grads.get("image");
    REQUIRE(g.numel() == static_cast<std::int64_t>(want.size()));
    for (std::size_t i = 0; i < want.size(); ++i) {
      INFO("gradient element " << i);
      CHECK(g.as_double(static_cast<std::int64_t>(i)) == Approx(want[i]).epsilon(1e-5).margin(1e-5));
    }
  }
}

TEST_CASE("miners and label-batch losses name what is wrong with the batch", "[torch][miner]") {
  Record b = hand_batch();
  b.set("label", Array::from_vector<std::int64_t>({3}, {0, 0, 1}));
  CHECK_THROWS_WITH(mine_indices(spec("torch.batch_hard_miner"), b), Catch::Contains("label has 3 entries for 4 images"));
  CHECK_THROWS_WITH(evaluate_loss(spec("torch.batch_contrastive"), b), Catch::Contains("label has 3 entries for 4 images"));
  b.set("label", Array::from_vector<float>({4}, {0, 0, 1, 1}));
  CHECK_THROWS_WITH(evaluate_loss(spec("torch.batch_triplet_margin"), b), Catch::Contains("label must be an integer field"));
  Record unlabelled;
  unlabelled.set("image", hand_batch().get("image"));
  CHECK_THROWS_WITH(evaluate_loss(spec("torch.batch_triplet_margin", {{"miner", spec("torch.pair_margin_miner")}}), unlabelled),
                    Catch::Contains("torch.batch_triplet_margin needs the batch field 'label'"));
  Record matrix = hand_batch();
  matrix.set("pair_labels", Array::from_vector<float>({2, 2}, {1, 0, 0, 1}));
  CHECK_THROWS_WITH(mine_indices(spec("torch.multi_similarity_miner"), matrix), Catch::Contains("pair_labels must be [4,4] for 4 images"));
  // A component of another kind is not a miner.
  CHECK_THROWS_WITH(mine_indices(spec("torch.batch_contrastive"), hand_batch()), Catch::Contains("as a miner"));
  // Unlabelled rows (label < 0) take part in no pair or triplet: a far unlabelled point changes nothing.
  Record u;
  u.set("image", Array::from_vector<float>({5, 2}, {0, 0, 1, 0, 0, 2, 0, 5, 0, 0.5f}));
  u.set("label", Array::from_vector<std::int64_t>({5}, {0, 0, 1, 1, -1}));
  CHECK(mined_triplets(spec("torch.batch_hard_miner", {{"normalize_embeddings", Value::boolean(false)}}), u) ==
        std::vector<Triplet>{{0, 1, 2}, {1, 0, 2}, {2, 3, 0}, {3, 2, 0}});
}
