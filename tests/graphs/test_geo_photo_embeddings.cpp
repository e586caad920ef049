// graphs/pretrain_backbone.yaml and graphs/geo_photo_embeddings.yaml end to end, tiny: two
// cities rendered by gen_photos (a couple of hundred 64x48 JPEGs each, a few dozen time-lapse
// frames), the backbone pretrained for a few steps on the second city, then the four variants
// and both baselines trained and scored on the first, each trainer selecting its weights on the
// photos of the city's validation area (here Midtown from 31st to 48th Street, so that a couple
// of hundred photos hold some). The table must name every variant with triplet accuracy, MAP@R
// and the invariance figures in range, the loss curves and the validation records must exist;
// every trainer resumes from its own checkpoints (resume=auto) to the same table; the report
// compares the run with a learning-rate variant; a photo whose file is missing stops the run with
// an error naming its id and path. The loss is one variable: every trainer takes
// --set loss='{type: torch.multi_similarity}' on its pair batches, and a loss that cannot learn
// from pairs is refused at load, naming each trainer and the reason.
#include <catch2/catch.hpp>

#include <algorithm>

#include "chromium.hpp"
#include "cli.hpp"
#include "report_check.hpp"

namespace fs = std::filesystem;
using namespace embedflow::test;

namespace {

void render(const fs::path& dir, const std::string& seed, const std::string& rows, const std::string& frames) {
  const auto r = run_process({GEN_PHOTOS, "--rows", rows, "--seed", seed, "--timelapse-frames", frames, "--image-size", "64",
                              "--out", (dir / "meta.csv").string(), "--images", (dir / "img").string(), "--truth",
                              (dir / "truth.csv").string(), "--triplets", (dir / "triplets.csv").string(), "--triplet-count", "200",
                              "--split", (dir / "split.csv").string(), "--validation", (dir / "validation.csv").string(),
                              "--validation-area", "40.7455,-74.02,40.7600,-73.96"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
}

// The experiment's settings for a tiny run: 24x32 images, narrow ResNets, 3 steps of 8 pairs,
// positives within 300 m (a few hundred photos have few pairs within 10 m).
std::vector<std::string> tiny_experiment(const fs::path& d) {
  const std::string weights = (d / "pre" / "ckpt" / "step-00000003.pt").string();
  return {"run", source_dir() + "/graphs/geo_photo_embeddings.yaml", "--quiet", "--cache-dir", (d / "cache").string(),
          "--set", "data=" + (d / "city1").string(), "--set", "out=" + (d / "exp").string(),
          "--set", "steps=3", "--set", "pairs_seen=24", "--set", "validate_every=1",
          "--set", "I={type: torch.resnet18, width: 4, embedding_dim: 0, weights: " + weights + "}",
          "--set", "V={type: torch.resnet18, width: 4, embedding_dim: 8}",
          "--set", "height=24", "--set", "width=32", "--set", "batch=8", "--set", "positive_radius_m=300"};
}

}  // namespace

TEST_CASE("geo_photo_embeddings: pretrain, four variants, baselines and the oracle on rendered photos, one table", "[graphs][photos]") {
  const fs::path d = scratch_dir("geo-photo-embeddings");
  render(d / "city1", "1", "240", "30");
  render(d / "city2", "2", "240", "0");

  auto pre = run_cli({"run", source_dir() + "/graphs/pretrain_backbone.yaml", "--quiet", "--cache-dir", (d / "cache").string(),
                      "--set", "data=" + (d / "city2").string(), "--set", "out=" + (d / "pre").string(), "--set", "steps=3",
                      "--set", "height=24", "--set", "width=32", "--set", "width_factor=4", "--set", "batches.p=4"});
  INFO(pre.err);
  REQUIRE(pre.exit_code == 0);
  REQUIRE(fs::exists(d / "pre" / "ckpt" / "step-00000003.pt"));

  auto run = run_cli(tiny_experiment(d));
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const std::string table = read_file(d / "exp" / "table.md");
  // The rows name the pair set the variables give (P_{r+,r-}), here positives within 300 m.
  for (const char* row : {"T_c^1 P_{300,2000}", "T_c^2 P_{300,2000}", "T_c^3 P_{300,2000}", "T_b P_{300,2000}", "I alone (frozen)",
                          "V alone (untrained)"})
    CHECK_THAT(table, Catch::Contains(std::string("| ") + row + " |"));
  for (const char* v : {"tc1", "tc2", "tc3", "tb"}) CHECK(fs::file_size(d / "exp" / v / "train" / "loss.png") > 0);
  CHECK(fs::exists(d / "exp" / "table_cmc.png"));
  // Every figure of every row, from the report's JSON, in range; each trainer took its 3 steps.
  check_python(R"PY(
import json, sys, csv
d = sys.argv[1]
rows = {m['method']: m for m in json.load(open(d + '/exp/table.json'))['methods']}
models = ['T_c^1 P_{300,2000}', 'T_c^2 P_{300,2000}', 'T_c^3 P_{300,2000}', 'T_b P_{300,2000}', 'I alone (frozen)',
          'V alone (untrained)']
baselines = ['raw pixels', 'colour histogram', 'oracle: nearest in metres']
assert sorted(rows) == sorted(models + baselines + ['pair set P_{300,2000}']), sorted(rows)
for name in models + baselines:
    m = rows[name]
    for key in ('triplet_accuracy', 'triplet_accuracy_easy', 'triplet_accuracy_hard', 'MAP@R', 'P@1'):
        assert key in m and 0 <= m[key] <= 1, (name, key, m.get(key))
    if name in models:
        assert 0 <= m['invariance_auc'] <= 1 and m['invariance_ratio'] > 0, (name, m['invariance_ratio'])
# The geotags themselves order the triplets far better than chance on each half: the test
# measures what geotags can teach, not the renderer.
oracle = rows['oracle: nearest in metres']
assert oracle['triplet_accuracy_easy'] > 0.8 and oracle['triplet_accuracy_hard'] > 0.6, oracle
assert 0 < rows['pair set P_{300,2000}']['label_precision'] < 1, rows['pair set P_{300,2000}']
for v in ('tc1', 'tc2', 'tc3', 'tb'):
    steps = [int(r['step']) for r in csv.DictReader(open(f'{d}/exp/{v}/train/metrics.csv'))]
    assert steps and steps[-1] == 3, (v, steps)
    # validated after every step on the held-out area's labelled photos
    val = list(csv.DictReader(open(f'{d}/exp/{v}/train/validation.csv')))
    assert [int(r['step']) for r in val] == [1, 2, 3], (v, val)
    assert all(r['metric'] == 'map_at_r' and 0 < float(r['value']) <= 1 for r in val), (v, val)
    inv = json.load(open(f'{d}/exp/{v}/invariance.json'))
    assert inv['frames'] == 30, inv
print('ok', {n: round(rows[n]['triplet_accuracy'], 3) for n in models + baselines})
)PY",
               {d.string()});

  // A newcomer's comparison: the same experiment with another learning rate, reported beside the
  // first run. In headless Chromium the page draws, opens with the headline table, and every
  // number and delta it shows equals the runs' records; no chart has fewer than 3 points unless
  // its node said so; the graph differences name lr and not the output folders.
  auto variant = tiny_experiment(d);
  for (auto& a : variant)
    if (a == "out=" + (d / "exp").string()) a = "out=" + (d / "exp_lr").string();
  variant.push_back("--set");
  variant.push_back("lr=0.003");
  auto second = run_cli(variant);
  INFO(second.err);
  REQUIRE(second.exit_code == 0);
  auto compared = run_cli({"report", (d / "exp").string(), (d / "exp_lr").string(), "-o", (d / "compare.html").string()});
  INFO(compared.err);
  REQUIRE(compared.exit_code == 0);
  const Page page = load_in_chromium(d / "compare.html", d);
  check_page_works(page);
  write_file(d / "compare.dom.html", page.dom);
  const Result numbers = run_python(kCheckReportNumbers, {(d / "compare.dom.html").string(), (d / "exp").string(), (d / "exp_lr").string()});
  INFO(numbers.out << numbers.err);
  CHECK(numbers.exit_code == 0);
  // Every trainer's validation curve on one chart (3 evaluations each); the loss curve is declared
  // too, and with 3 steps it is named rather than drawn unless the trainers logged 3 points.
  CHECK_THAT(page.dom, Catch::Contains("data-chart=\"validation map_at_r\" data-points=\"3\" data-series=\"8\""));
  CHECK_THAT(page.dom, Catch::Contains("data-chart=\"training loss\"") || Catch::Contains("data-chart-skipped=\"training loss\""));
  const auto diffs = page.dom.find("<section class=\"differences\">");
  REQUIRE(diffs != std::string::npos);
  const std::string diff_text = page.dom.substr(diffs, page.dom.find("</section>", diffs) - diffs);
  CHECK_THAT(diff_text, Catch::Contains("<li>node 'tc2' param 'optimizer.lr': 0.0003 → 0.003</li>"));
  CHECK(diff_text.find("exp_lr") == std::string::npos);

  // Every trainer checkpoints to its own folder, so each one resumes: --set resume=auto takes up
  // each variant at its last checkpoint (step 3 = max_steps, with its validation state) and the
  // table's figures come out as before.
  fs::copy_file(d / "exp" / "table.json", d / "table_first.json", fs::copy_options::overwrite_existing);
  auto resume_args = tiny_experiment(d);
  resume_args.erase(std::find(resume_args.begin(), resume_args.end(), std::string("--quiet")));  // the resume lines are info
  resume_args.push_back("--set");
  resume_args.push_back("resume=auto");
  auto resumed = run_cli(resume_args);
  INFO(resumed.err);
  REQUIRE(resumed.exit_code == 0);
  for (const char* v : {"tc1", "tc2", "tc3", "tb"})
    CHECK_THAT(resumed.err, Catch::Contains(std::string("resuming from ") + (d / "exp" / v / "ckpt" / "step-00000003.pt").string() +
                                            " at step 3"));
  check_python(R"PY(
import json, sys
first, again = ({m['method']: m for m in json.load(open(p))['methods']} for p in sys.argv[1:3])
for name in ['T_c^1 P_{300,2000}', 'T_c^2 P_{300,2000}', 'T_c^3 P_{300,2000}', 'T_b P_{300,2000}']:
    for key in ('triplet_accuracy', 'MAP@R', 'P@1'):
        assert abs(first[name][key] - again[name][key]) < 1e-9, (name, key, first[name][key], again[name][key])
print('ok')
)PY",
               {(d / "table_first.json").string(), (d / "exp" / "table.json").string()});

  // A photo whose file is gone: the run stops naming its id and its path.
  const fs::path missing = d / "city1" / "img" / "5.jpg";
  REQUIRE(fs::remove(missing));
  auto args = tiny_experiment(d);
  args.push_back("--no-cache");  // the decoded photos are cached by the metadata file, which did not change
  auto broken = run_cli(args);
  CHECK(broken.exit_code == 1);
  // geo.pair_sampler reads every file, to drop identical uploads, while image.files_reader decodes
  // the evaluation's photos: whichever meets the file first names it with the photo's id
  CHECK_THAT(broken.err, (Catch::Contains("img/5.jpg (photo id 5)") && Catch::Contains("cannot read image file")) ||
                             (Catch::Contains("img/5.jpg") && Catch::Contains("cannot open") &&
                              Catch::Contains("meta.csv:6, id 5)")));
  args.push_back("--set");
  args.push_back("pairs.duplicate_files=false");
  args.push_back("--set");
  args.push_back("pairs_b.duplicate_files=false");
  broken = run_cli(args);
  CHECK(broken.exit_code == 1);
  // image.decode_by_id (a pair member) or image.files_reader (the evaluation's photos), whichever
  // meets it first, names the id and the path
  CHECK_THAT(broken.err, Catch::Contains("img/5.jpg") && Catch::Contains("cannot open") &&
                             (Catch::Contains("photo 5 (") || Catch::Contains("meta.csv:6, id 5)")));
  // on_bad_image=skip: the run goes on without the photo and says how many it dropped
  args.push_back("--set");
  args.push_back("on_bad_image=skip");
  args.erase(std::find(args.begin(), args.end(), std::string("--quiet")));  // the skip counts are info lines
  auto skipped = run_cli(args);
  INFO(skipped.err);
  CHECK(skipped.exit_code == 0);
  CHECK_THAT(skipped.err, Catch::Contains("skipped 1"));
}

TEST_CASE("geo_photo_embeddings: the loss of every trainer is one variable", "[graphs][photos][loss]") {
  const fs::path d = scratch_dir("geo-photo-loss");
  render(d / "city1", "1", "240", "30");
  // An untrained backbone (no pretraining run), 2 steps: what is tested is which loss trains.
  auto experiment = [&](const std::string& out, std::vector<std::string> extra) {
    std::vector<std::string> a = {"run", source_dir() + "/graphs/geo_photo_embeddings.yaml", "--quiet", "--cache-dir",
                                  (d / "cache").string(), "--set", "data=" + (d / "city1").string(), "--set",
                                  "out=" + (d / out).string(), "--set", "steps=2", "--set", "pairs_seen=16", "--set",
                                  "validate_every=2", "--set", "I={type: torch.resnet18, width: 4, embedding_dim: 0}",
                                  "--set", "V={type: torch.resnet18, width: 4, embedding_dim: 8}", "--set", "height=24",
                                  "--set", "width=32", "--set", "batch=8", "--set", "positive_radius_m=300"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  auto contrastive = run_cli(experiment("contrastive", {}));
  INFO(contrastive.err);
  REQUIRE(contrastive.exit_code == 0);
  auto ms = run_cli(experiment("ms", {"--set", "loss={type: torch.multi_similarity}"}));
  INFO(ms.err);
  REQUIRE(ms.exit_code == 0);
  CHECK_THAT(read_file(d / "ms" / "table.md"), Catch::Contains("| T_c^3 P_{300,2000} |"));
  // Same seed, same pairs, same initial weights: each trainer's first loss differs between the two
  // runs only because its loss does; the multi-similarity loss of L2-normalised embeddings is
  // positive and below its bound at the default scales (1/2 log(1 + e^3) + 1/50 log(1 + e^25) per row).
  check_python(R"PY(
import csv, math, sys
d = sys.argv[1]
bound = 0.5 * math.log(1 + math.exp(3)) + (25 + math.log1p(math.exp(-25))) / 50
for v in ('tc1', 'tc2', 'tc3', 'tb'):
    first = {run: float(next(csv.DictReader(open(f'{d}/{run}/{v}/train/metrics.csv')))['loss']) for run in ('contrastive', 'ms')}
    assert abs(first['contrastive'] - first['ms']) > 1e-4, (v, first)
    assert 0 < first['ms'] < bound, (v, first, bound)
print('ok')
)PY",
               {d.string()});

  // A loss that learns nothing from pairs, or needs class labels: the graph does not load, and the
  // error names every trainer and why.
  auto validate = [&](const std::string& loss) {
    std::vector<std::string> a = experiment("bad", {"--set", "loss=" + loss});
    a[0] = "validate";
    a.erase(std::find(a.begin(), a.end(), std::string("--quiet")));
    const auto cache = std::find(a.begin(), a.end(), std::string("--cache-dir"));
    a.erase(cache, cache + 2);
    return run_cli(a);
  };
  auto ok = validate("{type: torch.lifted_structure}");
  INFO(ok.err);
  CHECK(ok.exit_code == 0);
  auto circle = validate("{type: torch.circle}");
  CHECK(circle.exit_code == 2);
  for (const char* node : {"tc1", "tc2", "tc3", "tb"}) CHECK_THAT(circle.err, Catch::Contains(node));
  CHECK_THAT(circle.err, Catch::Contains("torch.circle on a pair batch (a_image, b_image, pair_label): each of its 2B embeddings "
                                         "has one partner"));
  auto proxy = validate("{type: torch.proxy_anchor, num_classes: 10, embedding_size: 72}");
  CHECK(proxy.exit_code == 2);
  CHECK_THAT(proxy.err, Catch::Contains("torch.proxy_anchor needs images with class labels (image, label)"));
}
