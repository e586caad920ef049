// torch.cross_batch_memory step by step (LossSequence keeps the component across steps, as
// torch.train does): the queue and the losses of three steps computed by hand, and five steps of
// pytorch-metric-learning's CrossBatchMemory recorded in fixtures/pml_mining.json (queue contents,
// loss values and gradients), with and without a miner. Errors at the step: a batch larger than
// the memory, embeddings of another size, a batch without labels.
#include <catch2/catch.hpp>

#include <embedflow/yaml.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>

#include "cli.hpp"
#include "torch_test_util.hpp"
#include "torch_types.hpp"

using namespace embedflow;
using embedflow::test::num;
using embedflow::test::spec;
using embedflow::torchfam::LossSequence;
using json = nlohmann::json;

namespace {

Record step_batch(std::vector<float> xy, std::vector<std::int64_t> labels) {
  const auto rows = static_cast<std::int64_t>(labels.size());
  Record r;
  r.set("image", Array::from_vector<float>({rows, 2}, std::move(xy)));
  r.set("label", Array::from_vector<std::int64_t>({rows}, std::move(labels)));
  return r;
}

std::vector<double> doubles_of(const Array& a) {
  std::vector<double> v;
  for (std::int64_t i = 0; i < a.numel(); ++i) v.push_back(a.as_double(i));
  return v;
}

// Memory of 3 rows around a contrastive loss (pos_margin 0, neg_margin 2) on raw distances.
Value hand_memory() {
  return spec("torch.cross_batch_memory",
              {{"memory_size", Value::integer(3)},
               {"loss", spec("torch.batch_contrastive", {{"neg_margin", num(2)}, {"normalize_embeddings", Value::boolean(false)}})}});
}

}  // namespace

TEST_CASE("cross-batch memory by hand: the queue and the losses of three steps", "[torch][memory]") {
  LossSequence xbm(hand_memory());
  CHECK(xbm.state().fields().empty());  // no queue before the first batch
  // Step 1: (0,0) label 0 and (1,0) label 1 go to slots 0, 1. Each row's positive is its own slot
  // (dropped); the negatives (0, slot 1) and (1, slot 0) at distance 1 cost 2 - 1 each: mean 1.
  CHECK(xbm.step(step_batch({0, 0, 1, 0}, {0, 1})) == Approx(1.0).epsilon(1e-6));
  Record s = xbm.state();
  CHECK(doubles_of(s.get("embeddings")) == std::vector<double>{0, 0, 1, 0, 0, 0});
  CHECK(doubles_of(s.get("labels")) == std::vector<double>{0, 1, 0});
  CHECK(doubles_of(s.get("queue")) == std::vector<double>{2, 0});  // next slot 2, not yet filled
  // Step 2: (0,3) label 0 and (4,3) label 1 go to slots 2 and 0 (the oldest row, (0,0), is
  // overwritten); the queue is full. Row 1 = (4,3) has the positive (1,0) at sqrt 18; the
  // negatives are at 4, sqrt 10 and 4, beyond the margin 2: loss sqrt 18.
  CHECK(xbm.step(step_batch({0, 3, 4, 3}, {0, 1})) == Approx(std::sqrt(18.0)).epsilon(1e-6));
  s = xbm.state();
  CHECK(doubles_of(s.get("embeddings")) == std::vector<double>{4, 3, 1, 0, 0, 3});
  CHECK(doubles_of(s.get("labels")) == std::vector<double>{1, 1, 0});
  CHECK(doubles_of(s.get("queue")) == std::vector<double>{1, 1});
  // Step 3: (1,1) and (0,1), both label 0, go to slots 1 and 2; each is the other's positive at
  // distance 1 and (4,3) is a negative beyond the margin: loss 1. The gradient reaches the batch
  // rows only (the memory is detached): each row is pulled toward the other's stored copy by half
  // a unit vector, (0.5, 0) and (-0.5, 0).
  Record grads;
  CHECK(xbm.step(step_batch({1, 1, 0, 1}, {0, 0}), &grads) == Approx(1.0).epsilon(1e-6));
  const std::vector<double> g = doubles_of(grads.get("image"));
  const std::vector<double> want{0.5, 0, -0.5, 0};
  REQUIRE(g.size() == want.size());
  for (std::size_t i = 0; i < g.size(); ++i) CHECK(g[i] == Approx(want[i]).margin(1e-6));
  s = xbm.state();
  CHECK(doubles_of(s.get("embeddings")) == std::vector<double>{4, 3, 1, 1, 0, 1});
  CHECK(doubles_of(s.get("labels")) == std::vector<double>{1, 0, 0});
  CHECK(doubles_of(s.get("queue")) == std::vector<double>{0, 1});
}

TEST_CASE("cross-batch memory: an evaluation computes against the queue and leaves it unchanged", "[torch][memory]") {
  LossSequence xbm(hand_memory()), twin(hand_memory());
  const Record first = step_batch({0, 0, 1, 0}, {0, 1}), second = step_batch({0, 3, 4, 3}, {0, 1});
  xbm.step(first);
  twin.step(first);
  // As validation's loss metric: the value a step would give (sqrt 18, by hand above), the queue
  // as it was.
  CHECK(xbm.evaluate(second) == Approx(std::sqrt(18.0)).epsilon(1e-6));
  CHECK(doubles_of(xbm.state().get("embeddings")) == std::vector<double>{0, 0, 1, 0, 0, 0});
  CHECK(doubles_of(xbm.state().get("queue")) == std::vector<double>{2, 0});
  // Training goes on as if the evaluation had not happened.
  CHECK(xbm.step(second) == Approx(twin.step(second)).epsilon(1e-7));
  CHECK(doubles_of(xbm.state().get("embeddings")) == doubles_of(twin.state().get("embeddings")));
}

TEST_CASE("cross-batch memory inside torch.sum: its state under its slot, the same losses", "[torch][memory]") {
  LossSequence alone(hand_memory());
  LossSequence sum(spec("torch.sum", {{"a", spec("torch.l2_embedding", {{"weight", num(0)}})}, {"b", hand_memory()}}));
  for (const Record& b : {step_batch({0, 0, 1, 0}, {0, 1}), step_batch({0, 3, 4, 3}, {0, 1})})
    CHECK(sum.step(b) == Approx(alone.step(b)).epsilon(1e-7));
  const Record s = sum.state(), t = alone.state();
  CHECK(s.fields().size() == 3);
  for (const char* f : {"embeddings", "labels", "queue"}) CHECK(doubles_of(s.get(std::string("b.") + f)) == doubles_of(t.get(f)));
}

TEST_CASE("cross-batch memory equals pytorch-metric-learning's over five steps", "[torch][memory][pml]") {
  std::ifstream in(embedflow::test::source_dir() + "/tests/torch/fixtures/pml_mining.json");
  REQUIRE(in.good());
  const json doc = json::parse(in);
  REQUIRE(doc.at("memory").size() == 5);
  for (const json& c : doc.at("memory")) {
    const std::string name = c.at("name").get<std::string>();
    INFO(name << ": PML " << c.at("pml").get<std::string>() << " vs " << c.at("spec").get<std::string>());
    LossSequence xbm(parse_yaml(c.at("spec").get<std::string>(), name));
    int k = 0;
    for (const json& st : c.at("steps")) {
      INFO("step " << ++k);
      const std::vector<float> x = st.at("embeddings").get<std::vector<float>>();
      const std::vector<std::int64_t> labels = st.at("labels").get<std::vector<std::int64_t>>();
      const auto rows = static_cast<std::int64_t>(labels.size());
      Record batch;
      batch.set("image", Array::from_vector<float>({rows, static_cast<std::int64_t>(x.size()) / rows}, x));
      batch.set("label", Array::from_vector<std::int64_t>({rows}, labels));
      Record grads;
      CHECK(xbm.step(batch, &grads) == Approx(st.at("value").get<double>()).epsilon(1e-5).margin(1e-5));
      const std::vector<double> g = doubles_of(grads.get("image")), want = st.at("grad").get<std::vector<double>>();
      REQUIRE(g.size() == want.size());
      for (std::size_t i = 0; i < g.size(); ++i) CHECK(g[i] == Approx(want[i]).epsilon(1e-5).margin(1e-5));
      const Record s = xbm.state();
      CHECK(doubles_of(s.get("embeddings")) == st.at("memory").get<std::vector<double>>());
      CHECK(doubles_of(s.get("labels")) == st.at("memory_labels").get<std::vector<double>>());
      CHECK(doubles_of(s.get("queue")) ==
            std::vector<double>{st.at("next").get<double>(), st.at("filled").get<bool>() ? 1.0 : 0.0});
    }
  }
}

TEST_CASE("cross-batch memory: errors at the step name the component and the cause", "[torch][memory]") {
  LossSequence xbm(hand_memory());
  CHECK_THROWS_WITH(xbm.step(step_batch({0, 0, 1, 0, 2, 0, 3, 0}, {0, 1, 0, 1})),
                    Catch::Contains("a batch of 4 rows does not fit memory_size 3"));
  xbm.step(step_batch({0, 0, 1, 0}, {0, 1}));
  Record wide;
  wide.set("image", Array::from_vector<float>({2, 3}, {0, 0, 0, 1, 1, 1}));
  wide.set("label", Array::from_vector<std::int64_t>({2}, {0, 1}));
  CHECK_THROWS_WITH(xbm.step(wide), Catch::Contains("embeddings of 3 dims for a memory of 2"));
  // A memory pairs rows by label: pair_labels alone (relations within the batch) cannot reach it.
  Record pairs;
  pairs.set("image", Array::from_vector<float>({2, 2}, {0, 0, 1, 0}));
  pairs.set("pair_labels", Array::from_vector<float>({2, 2}, {1, 0, 0, 1}));
  CHECK_THROWS_WITH(xbm.step(pairs), Catch::Contains("needs the batch field 'label'"));
  Record floats = step_batch({0, 0, 1, 0}, {0, 1});
  floats.set("label", Array::from_vector<float>({2}, {0, 1}));
  CHECK_THROWS_WITH(xbm.step(floats), Catch::Contains("label must be an integer field"));
}
