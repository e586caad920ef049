// The label-batch losses on a pair batch (a_image, b_image, pair_label), the photo experiment's:
// B pairs read as 2B embeddings with the explicit indices tuple of their labelled pairs, against
// pytorch-metric-learning's own values and gradients for the same embeddings and indices_tuple,
// recorded in fixtures/pml_pair_losses.json by fixtures/make_pml_pair_fixtures.py (PML's version
// and commit are in the file). The losses whose anchors each need a positive and a negative (PML
// computes them as 0 on such a tuple, recorded too) and those that need class labels are errors
// that say why.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "json_fixture.hpp"
#include "torch_test_util.hpp"
#include "torch_types.hpp"

using namespace embedflow;
using embedflow::test::fixture_floats;
using embedflow::test::spec;
using embedflow::torchfam::evaluate_loss;

namespace {

const Value& fixtures() {
  static const Value v = embedflow::test::read_json_fixture("pml_pair_losses.json");
  return v;
}

// The fixture's pair batch `name` as evaluate_loss takes it: embeddings as a_image and b_image.
Record pair_batch(const std::string& name) {
  const Value& b = *fixtures().get("batches")->get(name);
  const std::int64_t pairs = b.get("pairs")->as_integer(), dim = b.get("dim")->as_integer();
  Record r;
  r.set("a_image", Array::from_vector<float>({pairs, dim}, fixture_floats(*b.get("a_image"))));
  r.set("b_image", Array::from_vector<float>({pairs, dim}, fixture_floats(*b.get("b_image"))));
  r.set("pair_label", Array::from_vector<float>({pairs}, fixture_floats(*b.get("pair_label"))));
  return r;
}

// The largest difference between got and want, as a fraction of want's largest element.
double worst_difference(const Array& got, const Value& want_list) {
  std::vector<double> want;
  for (const auto& x : want_list.as_list()) want.push_back(x.as_number());
  REQUIRE(static_cast<std::size_t>(got.numel()) == want.size());
  double worst = 0, largest = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::abs(got.as_double(static_cast<std::int64_t>(i)) - want[i]));
    largest = std::max(largest, std::abs(want[i]));
  }
  return largest > 0 ? worst / largest : worst;
}

Value case_spec(const Value& c) {
  Value::Map m{{"type", *c.get("type")}};
  for (const auto& [k, v] : c.get("params")->as_map()) m.emplace_back(k, v);
  return Value::map(std::move(m));
}

}  // namespace

TEST_CASE("Pair batches: values and gradients equal pytorch-metric-learning's with the pairs as indices_tuple",
          "[torch][loss][pml][pairs]") {
  const Value& pml = *fixtures().get("pml");
  INFO("fixtures from pytorch-metric-learning " << pml.get("version")->as_string() << " at " << pml.get("commit")->as_string());
  const auto& cases = fixtures().get("cases")->as_list();
  REQUIRE(cases.size() == 8);
  std::set<std::string> types;
  double worst_value = 0, worst_grad = 0;  // reported with -s (docs/torch.md quotes them)
  for (const Value& c : cases) {
    const Value s = case_spec(c);
    INFO(s.str() << " on the " << c.get("batch")->as_string() << " pair batch");
    types.insert(c.get("type")->as_string());
    Record grads;
    const double value = evaluate_loss(s, pair_batch(c.get("batch")->as_string()), &grads);
    const double want = c.get("value")->as_number();
    REQUIRE(want > 0);  // a case that trains something
    // Float32 against PML in float64: within 1e-5 of the value, relative (absolute below 1).
    CHECK(std::abs(value - want) <= 1e-5 * std::max(1.0, std::abs(want)));
    worst_value = std::max(worst_value, std::abs(value - want) / std::max(1.0, std::abs(want)));
    for (const char* field : {"a_image", "b_image"}) {
      const double worst = worst_difference(grads.get(field), *c.get(std::string("grad_") + field));
      INFO("d loss / d " << field << ": worst difference " << worst << " of the largest element");
      CHECK(worst <= 1e-5);
      worst_grad = std::max(worst_grad, worst);
    }
  }
  CHECK(types.size() == 4);
  WARN("worst value difference " << worst_value << "; worst gradient difference " << worst_grad << " of the largest element");
}

TEST_CASE("Pair batches: only the labelled pairs count; an unknown label and other pairs' members change nothing",
          "[torch][loss][pml][pairs]") {
  // Pair 6 of the small batch is unknown (-1): moving its a member changes no loss (a loss that
  // compared members of different pairs would see it move).
  const Record b = pair_batch("small");
  Record moved = b;
  std::vector<float> a = fixture_floats(*fixtures().get("batches")->get("small")->get("a_image"));
  for (int d = 0; d < 8; ++d) a[6 * 8 + d] += 3.0f;
  moved.set("a_image", Array::from_vector<float>({12, 8}, a));
  for (const char* type : {"torch.multi_similarity", "torch.lifted_structure", "torch.generalized_lifted_structure",
                           "torch.batch_contrastive"}) {
    INFO(type);
    const double before = evaluate_loss(spec(type), b);
    CHECK(before > 0);
    CHECK(evaluate_loss(spec(type), moved) == Approx(before).epsilon(1e-6));
  }
  // Every label unknown: no pair, a zero loss whose gradient is zero.
  Record none = b;
  none.set("pair_label", Array::from_vector<float>({12}, std::vector<float>(12, -1.0f)));
  Record grads;
  CHECK(evaluate_loss(spec("torch.multi_similarity"), none, &grads) == 0.0);
  for (std::int64_t i = 0; i < grads.get("a_image").numel(); ++i) CHECK(grads.get("a_image").as_double(i) == 0.0);
}

TEST_CASE("Pair batches: losses needing both a positive and a negative per anchor, or class labels, are errors saying why",
          "[torch][loss][pml][pairs]") {
  const Record b = pair_batch("small");
  std::set<std::string> one_sided;
  for (const Value& c : fixtures().get("one_sided")->as_list()) {
    const std::string type = c.get("type")->as_string();
    INFO(type << " on the " << c.get("batch")->as_string() << " pair batch");
    CHECK(c.get("value")->as_number() == 0.0);  // PML's value on the tuple: exactly 0, nothing to train
    CHECK_THROWS_WITH(evaluate_loss(spec(type), b),
                      Catch::Contains(type + " on a pair batch (a_image, b_image, pair_label): each of its 2B embeddings has one "
                                             "partner"));
    one_sided.insert(type);
  }
  CHECK(one_sided.size() == 5);
  const Value::Map sizes{{"num_classes", Value::integer(7)}, {"embedding_size", Value::integer(8)}};
  for (const char* type : {"torch.arcface", "torch.cosface", "torch.proxy_anchor", "torch.proxy_nca"}) {
    INFO(type);
    CHECK_THROWS_WITH(evaluate_loss(spec(type, sizes), b),
                      Catch::Contains(std::string(type) + " needs images with class labels (image, label); a pair batch"));
  }
  CHECK_THROWS_WITH(evaluate_loss(spec("torch.n_pairs"), b), Catch::Contains("torch.n_pairs needs images with class labels"));
  Record short_labels = b;
  short_labels.set("pair_label", Array::from_vector<float>({5}, std::vector<float>(5, 1.0f)));
  CHECK_THROWS_WITH(evaluate_loss(spec("torch.multi_similarity"), short_labels),
                    Catch::Contains("torch.multi_similarity: pair_label has 5 entries for 12 pairs"));
}
