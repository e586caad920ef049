// Miners and the cross-batch memory inside torch.train (GraphRunner, in process): load-time errors
// at the parameter that is wrong; a run resumed from a checkpoint repeats the uninterrupted run's
// losses exactly, the memory's queue included; and graphs/fashion_mining.yaml, run short, learns:
// both trained models retrieve held-out Fashion-MNIST test images better than the untrained one;
// torch.index_hard_negatives resumes exactly and graphs/fashion_index_mining.yaml, run short, beats
// the raw pixels. Every YAML block of docs/torch.md's miners section validates.
#include <catch2/catch.hpp>

#include <fstream>
#include <regex>
#include <sstream>

#include "harness.hpp"
#include "torch_test_util.hpp"

namespace fs = std::filesystem;
using namespace embedflow::test;

namespace {

// torch.train over train.h5 (64-image label batches) with `loss` and extra params.
std::string train_graph(const std::string& loss, const std::string& extra = "") {
  return "# torch.train with a miner or a memory.\n"
         "seed: 3\n"
         "nodes:\n"
         "  data:  {type: io.hdf5_reader, params: {path: " + torch_data("train.h5") + ", fields: [id, label, image], batch_size: 64, shuffle: true}}\n"
         "  train: {type: torch.train, params: {model: {type: torch.small_cnn, channels: [8, 16], hidden: 32, embedding_dim: 16}, "
         "loss: " + loss + ", threads: 2" + extra + "}}\n"
         "edges:\n"
         "  - data.out -> train.in\n";
}

std::string problems_of(const std::string& loss) {
  GraphRun r = GraphRunner(plugins(), train_graph(loss), "mining.yaml").validate();
  CHECK(r.exit_code == 2);
  return r.problem_text();
}

// Trains `loss` 8 steps straight, and 3 steps then resumed from the checkpoint to step 8 (in
// dir/full and dir/part): every step's loss must be the same, so the loss's state is restored.
void check_resume_repeats(const fs::path& dir, const std::string& loss) {
  auto graph = [&](const std::string& run, int max_steps) {
    return train_graph(loss, ", optimizer: {type: torch.sgd, lr: 0.05, momentum: 0.9}, log_every: 1, checkpoint_every: 3, "
                             "keep_checkpoints: 0, resume: auto, max_steps: " + std::to_string(max_steps) + ", log_dir: " +
                                 (dir / run).string() + ", checkpoint_dir: " + (dir / run / "ckpt").string());
  };
  auto run_ok = [](const std::string& name, const std::string& yaml) {
    GraphRun r = GraphRunner(plugins(), yaml, name).run();
    INFO(r.message());
    REQUIRE(r.exit_code == 0);
  };
  run_ok("full.yaml", graph("full", 8));
  run_ok("part.yaml", graph("part", 3));
  run_ok("resumed.yaml", graph("part", 8));
  const auto a = read_metrics(dir / "full" / "metrics.csv"), b = read_metrics(dir / "part" / "metrics.csv");
  REQUIRE(a.size() == 8);
  REQUIRE(b.size() == 8);
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO("row " << i);
    CHECK(a[i].step == b[i].step);
    CHECK(a[i].loss == b[i].loss);  // printed with 9 significant digits
  }
}

}  // namespace

TEST_CASE("miners and memories: wrong settings fail validation at the parameter", "[torch][miner][validate]") {
  // A miner and a memory that fit validate.
  CHECK(GraphRunner(plugins(), train_graph("{type: torch.batch_triplet_margin, miner: {type: torch.batch_hard_miner}}"), "ok.yaml")
            .validate()
            .exit_code == 0);
  CHECK(GraphRunner(plugins(),
                    train_graph("{type: torch.cross_batch_memory, memory_size: 128, loss: {type: torch.batch_contrastive}, "
                                "miner: {type: torch.multi_similarity_miner}}"),
                    "ok.yaml")
            .validate()
            .exit_code == 0);
  // A pair-batch loss takes no miner; a miner parameter takes only a miner.
  CHECK_THAT(problems_of("{type: torch.contrastive, miner: {type: torch.batch_hard_miner}}"),
             Catch::Contains("unknown parameter 'miner'"));
  CHECK_THAT(problems_of("{type: torch.batch_contrastive, miner: {type: torch.adam}}"),
             Catch::Contains("parameter 'miner': component 'torch.adam' is a optimizer, not a miner"));
  // Miner settings PML rejects.
  CHECK_THAT(problems_of("{type: torch.batch_contrastive, miner: {type: torch.batch_easy_hard_miner, pos_strategy: semihard, "
                         "neg_strategy: semihard}}"),
             Catch::Contains("param 'miner'") && Catch::Contains("pos_strategy and neg_strategy cannot both be semihard"));
  CHECK_THAT(problems_of("{type: torch.batch_contrastive, miner: {type: torch.batch_easy_hard_miner, pos_strategy: all}}"),
             Catch::Contains("semihard cannot be combined with all"));
  CHECK_THAT(problems_of("{type: torch.batch_contrastive, miner: {type: torch.batch_easy_hard_miner, allowed_neg_range: [0.5]}}"),
             Catch::Contains("allowed_neg_range must be empty or [low, high]"));
  CHECK_THAT(problems_of("{type: torch.batch_triplet_margin, distance: cosine, normalize_embeddings: false}"),
             Catch::Contains("torch.batch_triplet_margin") && Catch::Contains("distance cosine always normalises"));
  CHECK_THAT(problems_of("{type: torch.batch_triplet_margin, distance: manhattan}"), Catch::Contains("manhattan"));
  // What a memory cannot wrap: a loss without reference rows, a loss with its own miner, swap.
  CHECK_THAT(problems_of("{type: torch.cross_batch_memory, loss: {type: torch.batch_hard_triplet}}"),
             Catch::Contains("param 'loss'") &&
                 Catch::Contains("loss torch.batch_hard_triplet does not compare a batch with reference embeddings"));
  CHECK_THAT(problems_of("{type: torch.cross_batch_memory, loss: {type: torch.batch_contrastive, miner: {type: torch.batch_hard_miner}}}"),
             Catch::Contains("the wrapped loss has a miner of its own"));
  CHECK_THAT(problems_of("{type: torch.cross_batch_memory, loss: {type: torch.batch_triplet_margin, swap: true}}"),
             Catch::Contains("use swap: false"));
  CHECK_THAT(problems_of("{type: torch.cross_batch_memory, memory_size: 0, loss: {type: torch.batch_contrastive}}"),
             Catch::Contains("memory_size"));
  CHECK_THAT(problems_of("{type: torch.cross_batch_memory}"), Catch::Contains("loss"));
  // A batch larger than the memory stops the run at the first step, naming the node's parameter.
  GraphRun small = GraphRunner(plugins(), train_graph("{type: torch.cross_batch_memory, memory_size: 32, loss: {type: torch.batch_contrastive}}",
                                                      ", max_steps: 2"),
                               "small.yaml")
                       .run();
  CHECK(small.exit_code == 1);
  CHECK_THAT(small.error, Catch::Contains("node 'train' param 'loss' (torch.cross_batch_memory): a batch of 64 rows does not fit memory_size 32"));
}

TEST_CASE("a resumed run with a cross-batch memory repeats the uninterrupted run's losses exactly", "[torch][memory][train]") {
  fs::path dir = scratch_dir("torch-memory-resume");
  // The memory inside a torch.sum, whose terms' state the checkpoint carries under their slots.
  // Interrupted after 3 steps (its memory holds 192 rows, not yet wrapped), resumed to step 8:
  // the memory wraps after the resume, so a queue that was not restored (or restored wrong)
  // changes the losses of steps 4-8.
  check_resume_repeats(dir, "{type: torch.sum, a: {type: torch.l2_embedding, weight: 0.001}, b: {type: torch.cross_batch_memory, "
                            "memory_size: 200, loss: {type: torch.batch_triplet_margin, margin: 0.2}, miner: {type: torch.batch_hard_miner}}}");
  // The queue is read back at the resume: a memory of another size does not take it.
  const std::string other = train_graph("{type: torch.sum, a: {type: torch.l2_embedding, weight: 0.001}, b: {type: torch.cross_batch_memory, "
                                        "memory_size: 256, loss: {type: torch.batch_triplet_margin, margin: 0.2}, "
                                        "miner: {type: torch.batch_hard_miner}}}",
                                        ", optimizer: {type: torch.sgd, lr: 0.05, momentum: 0.9}, log_every: 1, resume: " + (dir / "part" / "ckpt" / "step-00000003.pt").string() +
                                            ", max_steps: 5");
  GraphRun r = GraphRunner(plugins(), other, "other.yaml").run();
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.error, Catch::Contains("step-00000003.pt: its cross-batch memory does not fit memory_size 256"));
}

TEST_CASE("a resumed run with index-mined negatives repeats the uninterrupted run's losses exactly", "[torch][index_mining][train]") {
  fs::path dir = scratch_dir("torch-index-mining-resume");
  // Interrupted after step 3 (the index refreshed at step 3 over the 192 images seen), resumed to
  // step 8: a mining set or an index not restored would change the losses of steps 4-8.
  check_resume_repeats(dir, "{type: torch.index_hard_negatives, every: 2, k: 3, loss: {type: torch.batch_triplet_margin, margin: 0.2}}");
  // What it cannot wrap, at load; a batch without id, at the first step.
  CHECK_THAT(problems_of("{type: torch.index_hard_negatives, loss: {type: torch.batch_hard_triplet}}"),
             Catch::Contains("param 'loss'") &&
                 Catch::Contains("loss torch.batch_hard_triplet does not compare a batch with reference embeddings"));
  CHECK_THAT(problems_of("{type: torch.index_hard_negatives, loss: {type: torch.batch_triplet_margin, swap: true}}"),
             Catch::Contains("use swap: false"));
  CHECK_THAT(problems_of("{type: torch.index_hard_negatives, every: 0, loss: {type: torch.batch_contrastive}}"), Catch::Contains("every"));
}

namespace {

// A retrieval metric of an eval.retrieval node's metrics record.
double metric(const GraphRun& r, const std::string& node, const std::string& field) {
  const auto& records = r.records(node);
  REQUIRE(records.size() == 1);
  return records.front()->get(field).as_double(0);
}

}  // namespace

TEST_CASE("graphs/fashion_mining.yaml learns: mined and memory models retrieve held-out images better than untrained", "[torch][memory][graph]") {
  fs::path dir = scratch_dir("torch-fashion-mining");
  GraphRun r = GraphRunner::from_file(plugins(), source_dir() + "/graphs/fashion_mining.yaml")
                   .collect("eval_mined.metrics")
                   .collect("eval_memory.metrics")
                   .collect("eval_untrained.metrics")
                   .run({"steps=60", "train_images=4000", "test_images=1000", "memory=256", "out=" + (dir / "out").string()});
  INFO(r.message());
  REQUIRE(r.exit_code == 0);
  const double untrained = metric(r, "eval_untrained.metrics", "map_at_r");
  const double mined = metric(r, "eval_mined.metrics", "map_at_r"), memory = metric(r, "eval_memory.metrics", "map_at_r");
  INFO("MAP@R on 1000 test images: untrained " << untrained << ", batch-hard mined " << mined << ", memory " << memory);
  // Measured: untrained 0.250, mined 0.545, memory 0.534.
  CHECK(mined > untrained + 0.15);
  CHECK(memory > untrained + 0.15);
}

TEST_CASE("graphs/fashion_index_mining.yaml learns: index-mined hard negatives beat raw pixels on held-out images",
          "[torch][index_mining][graph]") {
  fs::path dir = scratch_dir("torch-fashion-index-mining");
  GraphRun r = GraphRunner::from_file(plugins(), source_dir() + "/graphs/fashion_index_mining.yaml")
                   .collect("eval_mined.metrics")
                   .collect("eval_pixels.metrics")
                   .run({"steps=60", "every=20", "train_images=4000", "test_images=1000", "out=" + (dir / "out").string()});
  INFO(r.message());
  REQUIRE(r.exit_code == 0);
  const double mined = metric(r, "eval_mined.metrics", "map_at_r"), pixels = metric(r, "eval_pixels.metrics", "map_at_r");
  INFO("MAP@R on 1000 test images: raw pixels " << pixels << ", index-mined " << mined);
  WARN("MAP@R on 1000 test images: raw pixels " << pixels << ", index-mined " << mined);
  CHECK(mined > pixels);
}

TEST_CASE("docs/torch.md: every YAML block of the miners section validates", "[torch][miner][docs]") {
  std::ifstream in(source_dir() + "/docs/torch.md");
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  const std::size_t start = doc.find("## Miners and cross-batch memory"), end = doc.find("\n## ", start + 1);
  REQUIRE(start != std::string::npos);
  const std::string section = doc.substr(start, end - start);
  std::size_t at = 0;
  int graphs = 0;
  while ((at = section.find("```yaml\n", at)) != std::string::npos) {
    const std::size_t close = section.find("```\n", at + 8);
    REQUIRE(close != std::string::npos);
    std::string yaml = section.substr(at + 8, close - at - 8);
    at = close + 4;
    // A block that is a loss spec alone is validated inside a training graph.
    if (yaml.rfind("loss:", 0) == 0) yaml = train_graph(yaml.substr(5));
    else yaml = std::regex_replace(yaml, std::regex("fashion\\.h5"), torch_data("train.h5"));
    INFO(yaml);
    GraphRun v = GraphRunner(plugins(), yaml, "torch.md").validate();
    INFO(v.message());
    CHECK(v.exit_code == 0);
    ++graphs;
  }
  CHECK(graphs >= 4);
}
