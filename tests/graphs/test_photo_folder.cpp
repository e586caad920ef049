// graphs/photo_folder.yaml end to end, tiny: a folder of 300 64x64 JPEGs gen_photos renders with
// their geotags and times in EXIF (the folder holds nothing else: no metadata, truth or split
// file), three of them copied under other names so the near-duplicate step has copies to remove,
// then the one command with 24x32 images, narrow ResNets and 3 steps of 8 pairs per variant
// (positives within 300 m and a 300 m buffer: a few hundred photos have few pairs within 10 m).
// The table must name the three trained variants and the four baselines with triplet accuracy in
// range on the test cells' geotag triplets; the near-duplicate and split results tables must be
// in run.json; each trainer must have selected its weights by validation loss; report.html must
// be written.
#include <catch2/catch.hpp>

#include "cli.hpp"

namespace fs = std::filesystem;
using namespace embedflow::test;

TEST_CASE("photo_folder: a folder of EXIF-geotagged photos to pairs, T_c^1 / T_c^2 / T_b and the report, one command",
          "[graphs][photos]") {
  const fs::path d = scratch_dir("photo-folder-graph");
  const fs::path photos = d / "photos";
  const Result gen = run_process({GEN_PHOTOS, "--rows", "300", "--seed", "3", "--timelapse-frames", "0", "--image-size", "64",
                                  "--out", (d / "meta.csv").string(), "--images", photos.string(), "--exif"});
  INFO(gen.err);
  REQUIRE(gen.exit_code == 0);
  // byte-identical copies (same pixels, same EXIF) under other names: near-duplicates to remove
  for (const char* n : {"5", "17", "42"})
    fs::copy_file(photos / (std::string(n) + ".jpg"), photos / (std::string("copy_of_") + n + ".jpg"));

  const Result run = run_cli({"run", source_dir() + "/graphs/photo_folder.yaml", "--quiet", "--cache-dir", (d / "cache").string(),
                              "--set", "photos=" + photos.string(), "--set", "out=" + (d / "out").string(),
                              "--set", "steps=3", "--set", "pairs_seen=24", "--set", "validate_every=1", "--set", "batch=8",
                              "--set", "validation_pairs=64", "--set", "height=24", "--set", "width=32",
                              "--set", "I={type: torch.resnet18, width: 4, embedding_dim: 0}",
                              "--set", "V={type: torch.resnet18, width: 4, embedding_dim: 8}",
                              "--set", "positive_radius_m=300", "--set", "buffer_m=300"});
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  const std::string table = read_file(d / "out" / "table.md");
  for (const char* row : {"T_c^1 P_{300,2000}", "T_c^2 P_{300,2000}", "T_b P_{300,2000}", "I alone (frozen)", "V alone (untrained)",
                          "raw pixels", "colour histogram"})
    CHECK_THAT(table, Catch::Contains(std::string("| ") + row + " |"));
  CHECK(fs::file_size(d / "out" / "report.html") > 0);
  CHECK(fs::file_size(d / "out" / "dedup" / "mosaic.png") > 0);
  check_python(R"PY(
import json, sys, csv
d = sys.argv[1]
rows = {m['method']: m for m in json.load(open(d + '/out/table.json'))['methods']}
names = ['T_c^1 P_{300,2000}', 'T_c^2 P_{300,2000}', 'T_b P_{300,2000}', 'I alone (frozen)', 'V alone (untrained)',
         'raw pixels', 'colour histogram']
assert sorted(rows) == sorted(names), sorted(rows)
evaluated = {rows[n]['evaluated'] for n in names}
# every row scores the same test triplets, a few dozen of them
assert len(evaluated) == 1 and evaluated.pop() >= 20, {n: rows[n]['evaluated'] for n in names}
for n in names:
    assert 0 <= rows[n]['triplet_accuracy'] <= 1, (n, rows[n])
run = json.load(open(d + '/out/run.json'))
results = {r['node']: r for r in run['results']}
dedup = results['dedup']
assert dedup['title'] == 'near-duplicates', dedup
v = dedup['rows'][0]['values']
# 303 files; the three copies at least are removed
assert v['photos'] == 303 and v['removed'] >= 3 and v['kept'] == v['photos'] - v['removed'], v
split = results['split']
assert split['title'] == 'spatial split', split
parts = {r['label']: r['values'] for r in split['rows']}
for part in ('train', 'validation', 'test'):
    assert parts[part]['photos'] > 0 and parts[part]['cells'] > 0, parts
assert sum(parts[p]['photos'] for p in ('train', 'validation', 'test')) <= v['kept'], (parts, v)
for t in ('tc1', 'tc2', 'tb'):
    steps = [int(r['step']) for r in csv.DictReader(open(f'{d}/out/{t}/train/metrics.csv'))]
    assert steps and steps[-1] == 3, (t, steps)
    val = list(csv.DictReader(open(f'{d}/out/{t}/train/validation.csv')))
    # the weights are selected by the contrastive loss on the validation cells' pairs
    assert [int(r['step']) for r in val] == [1, 2, 3], (t, val)
    assert all(r['metric'] == 'loss' and float(r['value']) > 0 for r in val), (t, val)
print('ok', {n: round(rows[n]['triplet_accuracy'], 3) for n in names}, parts)
)PY",
               {d.string()});
}
