// The losses ported from pytorch-metric-learning against PML itself: values and gradients (with
// respect to the embeddings and to the proxies / class weights / boundary) that PML's own code
// computed on fixed inputs, recorded in fixtures/pml_losses.json by fixtures/make_pml_fixtures.py
// (PML's version and commit are in the file). The losses run through evaluate_loss, built from
// their YAML spec as a graph builds them, with an identity model. Also: a tiny case by hand for
// the fixture pipeline, unlabelled rows, and the errors bad input gives.
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
using embedflow::test::num;
using embedflow::test::fixture_floats;
using embedflow::test::spec;
using embedflow::torchfam::evaluate_loss;

namespace {

const Value& fixtures() {
  static const Value v = embedflow::test::read_json_fixture("pml_losses.json");
  return v;
}

std::vector<std::int64_t> shape_of(const Value& list) {
  std::vector<std::int64_t> v;
  for (const auto& x : list.as_list()) v.push_back(x.as_integer());
  return v;
}

// The fixture's batch `name` as evaluate_loss takes it: embeddings as `image`, and `label`.
Record fixture_batch(const std::string& name) {
  const Value& b = *fixtures().get("batches")->get(name);
  const std::int64_t rows = b.get("rows")->as_integer(), dim = b.get("dim")->as_integer();
  std::vector<std::int64_t> labels;
  for (const auto& l : b.get("labels")->as_list()) labels.push_back(l.as_integer());
  Record r;
  r.set("image", Array::from_vector<float>({rows, dim}, fixture_floats(*b.get("embeddings"))));
  r.set("label", Array::from_vector<std::int64_t>({rows}, labels));
  return r;
}

std::vector<double> values_of(const Array& a) {
  std::vector<double> v;
  for (std::int64_t i = 0; i < a.numel(); ++i) v.push_back(a.as_double(i));
  return v;
}

// The largest difference between got and want, as a fraction of want's largest element.
double worst_difference(const std::vector<double>& got, const Value& want_list) {
  std::vector<double> want;
  for (const auto& x : want_list.as_list()) want.push_back(x.as_number());
  REQUIRE(got.size() == want.size());
  double worst = 0, largest = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::abs(got[i] - want[i]));
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

TEST_CASE("PML losses: values and gradients equal pytorch-metric-learning's on fixed inputs", "[torch][loss][pml]") {
  const Value& pml = *fixtures().get("pml");
  INFO("fixtures from pytorch-metric-learning " << pml.get("version")->as_string() << " at "
                                                << pml.get("commit")->as_string());
  const auto& cases = fixtures().get("cases")->as_list();
  REQUIRE(cases.size() == 25);
  std::set<std::string> types;
  double worst_value = 0, worst_grad = 0;  // reported with -s (docs/torch.md quotes them)
  for (const Value& c : cases) {
    const Value s = case_spec(c);
    INFO(s.str() << " on the " << c.get("batch")->as_string() << " batch");
    types.insert(c.get("type")->as_string());
    Record batch = fixture_batch(c.get("batch")->as_string());
    std::vector<std::string> tensors;
    if (const Value* t = c.get("tensors"))
      for (const auto& [name, values] : t->as_map()) {
        batch.set("loss." + name, Array::from_vector<float>(shape_of(*c.get("tensor_shapes")->get(name)), fixture_floats(values)));
        tensors.push_back(name);
      }
    Record grads;
    const double value = evaluate_loss(s, batch, &grads);
    const double want = c.get("value")->as_number();
    // Float32 against PML in float64: within 1e-5 of the value, relative (absolute below 1).
    CHECK(std::abs(value - want) <= 1e-5 * std::max(1.0, std::abs(want)));
    worst_value = std::max(worst_value, std::abs(value - want) / std::max(1.0, std::abs(want)));
    // Every gradient element within 1e-5 of the largest (float32 rounding of the terms).
    auto check_grad = [&](const std::string& field, const Value& want_grad) {
      const double worst = worst_difference(values_of(grads.get(field)), want_grad);
      INFO("d loss / d " << field << ": worst difference " << worst << " of the largest element");
      CHECK(worst <= 1e-5);
      worst_grad = std::max(worst_grad, worst);
    };
    check_grad("image", *c.get("grad_image"));
    for (const auto& name : tensors) check_grad("loss." + name, *c.get("grad_" + name));
  }
  CHECK(types.size() == 12);  // every PML loss of the family
  WARN("worst value difference " << worst_value << " (relative above 1); worst gradient difference " << worst_grad
                                 << " of the largest element");
}

TEST_CASE("PML losses by hand: multi-similarity and ProxyNCA on points whose similarities are 0 or 1", "[torch][loss][pml]") {
  // x0, x1 on the x axis (label 0), x2, x3 on the y axis (label 1): cosine 1 within a class and 0
  // across. With α = β = 1 and λ = 0.5 every anchor has one positive at 1 and two negatives at 0:
  // log(1 + e^-(1 - 0.5)) + log(1 + 2 e^(0 - 0.5)).
  Record r;
  r.set("image", Array::from_vector<float>({4, 2}, {1, 0, 2, 0, 0, 1, 0, 3}));
  r.set("label", Array::from_vector<std::int64_t>({4}, {0, 0, 1, 1}));
  const double ms = std::log1p(std::exp(-0.5)) + std::log1p(2 * std::exp(-0.5));
  CHECK(evaluate_loss(spec("torch.multi_similarity", {{"positive_scale", num(1)}, {"negative_scale", num(1)}, {"threshold", num(0.5)}}),
                      r) == Approx(ms).epsilon(1e-6));
  // ProxyNCA with proxies (1,0) and (0,1): (3,0) of class 0 is at squared distance 0 and 2 from
  // them, -log(1 / (1 + e^-2)); (0,-2) of class 1 at 2 and 4, -log(e^-4 / (e^-2 + e^-4)).
  Record p;
  p.set("image", Array::from_vector<float>({2, 2}, {3, 0, 0, -2}));
  p.set("label", Array::from_vector<std::int64_t>({2}, {0, 1}));
  p.set("loss.proxies", Array::from_vector<float>({2, 2}, {1, 0, 0, 1}));
  Record g;
  const double nca = (std::log1p(std::exp(-2.0)) + std::log1p(std::exp(2.0))) / 2;
  CHECK(evaluate_loss(spec("torch.proxy_nca", {{"num_classes", Value::integer(2)}, {"embedding_size", Value::integer(2)}}), p, &g) ==
        Approx(nca).epsilon(1e-6));
  // The first row sits on its proxy's ray: moving it along the ray changes nothing.
  CHECK(g.get("image").as_double(0) == Approx(0).margin(1e-7));
  CHECK(g.get("loss.proxies").numel() == 4);
}

TEST_CASE("PML losses: an unlabelled row (label -1) is in no pair and changes nothing", "[torch][loss][pml]") {
  for (const Value& c : fixtures().get("cases")->as_list()) {
    if (c.get("batch")->as_string() != "small") continue;
    const Value s = case_spec(c);
    INFO(s.str());
    Record batch = fixture_batch("small");
    std::vector<float> x = fixture_floats(*fixtures().get("batches")->get("small")->get("embeddings"));
    std::vector<std::int64_t> labels;
    for (std::int64_t i = 0; i < 16; ++i) labels.push_back(batch.get("label").as_int(i));
    for (int d = 0; d < 8; ++d) x.push_back(0.1f * static_cast<float>(d + 1));
    labels.push_back(-1);
    batch.set("image", Array::from_vector<float>({17, 8}, x));
    batch.set("label", Array::from_vector<std::int64_t>({17}, labels));
    if (const Value* t = c.get("tensors"))
      for (const auto& [name, values] : t->as_map())
        batch.set("loss." + name, Array::from_vector<float>(shape_of(*c.get("tensor_shapes")->get(name)), fixture_floats(values)));
    Record grads;
    const double want = c.get("value")->as_number();
    CHECK(std::abs(evaluate_loss(s, batch, &grads) - want) <= 1e-5 * std::max(1.0, std::abs(want)));
    for (std::int64_t k = 16 * 8; k < 17 * 8; ++k) CHECK(grads.get("image").as_double(k) == 0.0);
  }
}

TEST_CASE("PML losses: bad parameters and inputs are errors naming the loss and what is wrong", "[torch][loss][pml]") {
  Record b = fixture_batch("small");
  const Value::Map sizes{{"num_classes", Value::integer(7)}, {"embedding_size", Value::integer(8)}};
  Record high = b;
  std::vector<std::int64_t> labels(16, 1);
  labels[3] = 9;
  high.set("label", Array::from_vector<std::int64_t>({16}, labels));
  CHECK_THROWS_WITH(evaluate_loss(spec("torch.proxy_anchor", sizes), high),
                    Catch::Contains("torch.proxy_anchor: label 9 (batch row 3) is not below num_classes 7"));
  CHECK_THROWS_WITH(evaluate_loss(spec("torch.arcface", sizes), high), Catch::Contains("torch.arcface: label 9 (batch row 3)"));
  CHECK_THROWS_WITH(evaluate_loss(spec("torch.margin", {{"num_classes", Value::integer(7)}}), high),
                    Catch::Contains("torch.margin: label 9 (batch row 3) is not below num_classes 7"));
  CHECK_THROWS_WITH(evaluate_loss(spec("torch.cosface", {{"num_classes", Value::integer(7)}, {"embedding_size", Value::integer(4)}}), b),
                    Catch::Contains("torch.cosface: the embeddings are [16, 8] but embedding_size is 4"));
  Record float_labels = b;
  float_labels.set("label", Array::from_vector<float>({16}, std::vector<float>(16, 1.0f)));
  CHECK_THROWS_WITH(evaluate_loss(spec("torch.proxy_nca", sizes), float_labels),
                    Catch::Contains("torch.proxy_nca: label must be an integer field"));
  CHECK_THROWS_WITH(evaluate_loss(spec("torch.proxy_anchor", {{"embedding_size", Value::integer(8)}}), b), Catch::Contains("num_classes"));
  CHECK_THROWS_WITH(evaluate_loss(spec("torch.arcface", {{"num_classes", Value::integer(0)}, {"embedding_size", Value::integer(8)}}), b),
                    Catch::Contains("num_classes"));
  CHECK_THROWS_WITH(evaluate_loss(spec("torch.ntxent", {{"temperature", num(0)}}), b), Catch::Contains("temperature"));
  Record no_label;
  no_label.set("image", b.get("image"));
  CHECK_THROWS_WITH(evaluate_loss(spec("torch.n_pairs"), no_label), Catch::Contains("torch.n_pairs needs the batch field 'label'"));
  Record proxies_for_nothing = b;
  proxies_for_nothing.set("loss.proxies", Array::from_vector<float>({7, 8}, std::vector<float>(56, 0.f)));
  CHECK_THROWS_WITH(evaluate_loss(spec("torch.multi_similarity"), proxies_for_nothing),
                    Catch::Contains("has no learnable tensor 'proxies' (it has: none)"));
  Record wrong_shape = b;
  wrong_shape.set("loss.proxies", Array::from_vector<float>({8, 7}, std::vector<float>(56, 0.f)));
  CHECK_THROWS_WITH(evaluate_loss(spec("torch.proxy_anchor", sizes), wrong_shape), Catch::Contains("loss.proxies is [8, 7]"));
}

TEST_CASE("PML losses: a proxy loss inside torch.sum keeps its proxies, named after its slot", "[torch][loss][pml]") {
  const Value& c = fixtures().get("cases")->as_list().at(4);  // torch.proxy_anchor with its defaults
  REQUIRE(c.get("type")->as_string() == "torch.proxy_anchor");
  Record batch = fixture_batch(c.get("batch")->as_string());
  batch.set("loss.b.proxies", Array::from_vector<float>({7, 8}, fixture_floats(*c.get("tensors")->get("proxies"))));
  const Value sum = spec("torch.sum", {{"a", spec("torch.l2_embedding", {{"weight", num(0)}})}, {"b", case_spec(c)}});
  Record grads;
  const double want = c.get("value")->as_number();
  CHECK(std::abs(evaluate_loss(sum, batch, &grads) - want) <= 1e-5 * std::abs(want));
  CHECK(worst_difference(values_of(grads.get("loss.b.proxies")), *c.get("grad_proxies")) <= 1e-5);
}
