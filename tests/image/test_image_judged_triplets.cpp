// image.judged_triplets on real JPEG files written with PIL: triplets by path and by URL through
// an index, a judgement column with A, B, both and neither; decoded by image.decode_by_id (EXIF
// orientation applied) and scored by eval.triplet_accuracy, whose accuracy and undecided counts
// are checked against a PIL + numpy oracle; and each bad input an error naming file and line.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <sstream>

#include "core/judged_triplets.hpp"
#include "image_test_util.hpp"

using namespace embedflow;
using namespace embedflow::test;
namespace fs = std::filesystem;

namespace {

// img/*.jpg, 32x16: solid colours, and two halves (left | right) for the EXIF case: rot.jpg is
// stored red | blue with EXIF Orientation 3 (turned 180 degrees), so upright it is blue | red,
// the layout of ab.jpg; ba.jpg is red | blue.
const char* kWriteImages = R"PY(
import sys, os
from PIL import Image
d = sys.argv[1]
os.makedirs(d + "/img", exist_ok=True)
solid = {"red": (220, 30, 30), "darkred": (180, 40, 40), "blue": (30, 30, 220), "nearblue": (40, 40, 180), "green": (30, 200, 30)}
for name, c in solid.items():
    Image.new("RGB", (32, 16), c).save(f"{d}/img/{name}.jpg", "JPEG", quality=95)
def halves(left, right):
    im = Image.new("RGB", (32, 16), left)
    im.paste(Image.new("RGB", (16, 16), right), (16, 0))
    return im
R, B = solid["red"], solid["blue"]
halves(B, R).save(f"{d}/img/ab.jpg", "JPEG", quality=95)
halves(R, B).save(f"{d}/img/ba.jpg", "JPEG", quality=95)
ex = Image.Exif(); ex[0x0112] = 3
halves(R, B).save(f"{d}/img/rot.jpg", "JPEG", quality=95, exif=ex.tobytes())
)PY";

// The oracle: each image's embedding is the mean colour of its left and right halves (upright
// with EXIF applied, or as stored); a decided triplet is right when the judged candidate is the
// nearer. Prints "accuracy_exif <a> <decided> <undecided> <both> <neither>" and "accuracy_stored ...".
const char* kOracle = R"PY(
import csv, sys, os
import numpy as np
from PIL import Image, ImageOps
path, root = sys.argv[1], sys.argv[2]
def emb(f, exif):
    im = Image.open(f)
    if exif: im = ImageOps.exif_transpose(im)
    a = np.asarray(im.convert("RGB"), dtype=np.float64)
    w = a.shape[1] // 2
    return np.concatenate([a[:, :w].mean(axis=(0, 1)), a[:, w:].mean(axis=(0, 1))])
for exif in (True, False):
    right = decided = both = neither = 0
    with open(path) as f:
        for row in csv.DictReader(f):
            j = row["judgement"].strip().lower()
            if j in ("both", "neither"):
                both += j == "both"; neither += j == "neither"
                continue
            e = {k: emb(os.path.join(root, row[k]), exif) for k in ("query", "a", "b")}
            da, db = np.linalg.norm(e["query"] - e["a"]), np.linalg.norm(e["query"] - e["b"])
            decided += 1
            right += (da < db) if j == "a" else (db < da)
    print("accuracy_exif" if exif else "accuracy_stored", right / decided, decided, both + neither, both, neither)
)PY";

// Eight triplets: five decided by colour (one of them judged against the colours: query blue is
// judged nearer red than near-blue), one decided only once EXIF turns rot.jpg upright, and three
// undecided. Judgements in several cases.
const char* kTriplets =
    "query,a,b,judgement\n"
    "img/red.jpg,img/darkred.jpg,img/blue.jpg,A\n"
    "img/red.jpg,img/blue.jpg,img/darkred.jpg,B\n"
    "img/blue.jpg,img/nearblue.jpg,img/green.jpg,a\n"
    "img/blue.jpg,img/red.jpg,img/nearblue.jpg,A\n"
    "img/green.jpg,img/red.jpg,img/blue.jpg,both\n"
    "img/green.jpg,img/blue.jpg,img/red.jpg,Neither\n"
    "img/red.jpg,img/green.jpg,img/darkred.jpg,b\n"
    "img/nearblue.jpg,img/blue.jpg,img/red.jpg,NEITHER\n"
    "img/rot.jpg,img/ab.jpg,img/ba.jpg, A \n";

fs::path judged_dir(const std::string& name) {
  const fs::path dir = scratch_dir(name);
  check_python(kWriteImages, {dir.string()});
  write_file(dir / "triplets.csv", kTriplets);
  return dir;
}

// The triplets file by URL: header names of its own, the URL index in the image folder's parent.
void write_url_files(const fs::path& dir) {
  std::string index = "url,path\n", by_url = "q_url,left,right,answer\n";
  for (const char* name : {"red", "darkred", "blue", "nearblue", "green", "ab", "ba", "rot"})
    index += cat("https://wang.example/set/", name, ".jpg,img/", name, ".jpg\n");
  std::istringstream rows(kTriplets);
  std::string line;
  std::getline(rows, line);
  while (std::getline(rows, line)) {
    for (std::size_t at = 0; (at = line.find("img/")) != std::string::npos;) line.replace(at, 4, "https://wang.example/set/");
    by_url += line + "\n";
  }
  fs::create_directories(dir / "lists");
  write_file(dir / "index.csv", index);
  write_file(dir / "lists" / "by_url.csv", by_url);
}

std::string graph(const fs::path& dir, const std::string& trip_params, const std::string& out, bool exif = true) {
  return cat("nodes:\n"
             "  trip:   {type: image.judged_triplets, params: ", trip_params, "}\n"
             "  decode: {type: image.decode_by_id, params: {path_field: path, height: 8, width: 8, exif_orientation: ",
             exif ? "true" : "false", "}}\n"
             "  embed:  {type: image.pixel_embedding, params: {height: 1, width: 2, channels: 3}}\n"
             "  acc:    {type: eval.triplet_accuracy, params: {out: ", (dir / out).string(), ", name: colours}}\n"
             "edges: [trip.images -> decode.in, decode.out -> embed.in, embed.out -> acc.in, trip.triplets -> acc.triplets]\n");
}

std::map<std::string, std::vector<double>> oracle(const fs::path& dir) {
  const Result r = check_python(kOracle, {(dir / "triplets.csv").string(), dir.string()});
  return parse_tagged(r.out);
}

std::int64_t i64(const RecordPtr& r, const char* f) { return r->get(f).as_int(0); }

}  // namespace

TEST_CASE("judged_triplets reads paths and URLs, judgements in any case, ids in first-named order") {
  const fs::path dir = judged_dir("judged_triplets_parse");
  write_url_files(dir);
  image::JudgedTripletOptions o;
  const image::JudgedTripletFile byp = image::read_judged_triplets((dir / "triplets.csv").string(), o);
  REQUIRE(byp.triplets.size() == 9);
  CHECK(byp.has_judgement);
  REQUIRE(byp.paths.size() == 8);
  CHECK(byp.paths[0] == (dir / "img/red.jpg").string());
  CHECK(byp.paths[1] == (dir / "img/darkred.jpg").string());
  CHECK(byp.count(image::Judgement::a) == 4);
  CHECK(byp.count(image::Judgement::b) == 2);
  CHECK(byp.count(image::Judgement::both) == 1);
  CHECK(byp.count(image::Judgement::neither) == 2);
  CHECK(byp.triplets[1].query == 0);
  CHECK(byp.triplets[1].a == 2);
  CHECK(byp.triplets[1].b == 1);
  CHECK(byp.triplets[1].line == 3);

  image::JudgedTripletOptions u;
  u.index = (dir / "index.csv").string();
  u.columns = {{"query", "q_url"}, {"a", "LEFT"}, {"b", "right"}, {"judgement", "answer"}};
  const image::JudgedTripletFile byu = image::read_judged_triplets((dir / "lists/by_url.csv").string(), u);
  CHECK(byu.paths == byp.paths);  // index paths are relative to the index's folder
  REQUIRE(byu.triplets.size() == byp.triplets.size());
  for (std::size_t i = 0; i < byu.triplets.size(); ++i) {
    CHECK(byu.triplets[i].query == byp.triplets[i].query);
    CHECK(byu.triplets[i].a == byp.triplets[i].a);
    CHECK(byu.triplets[i].b == byp.triplets[i].b);
    CHECK(byu.triplets[i].judgement == byp.triplets[i].judgement);
  }

  // No judgement column: every row is A (query, positive, negative); absolute paths as given;
  // `root` for relative ones.
  write_file(dir / "plain.csv", cat("query,a,b\n", (dir / "img/red.jpg").string(), ",darkred.jpg,blue.jpg\n"));
  image::JudgedTripletOptions r;
  r.root = (dir / "img").string();
  const image::JudgedTripletFile plain = image::read_judged_triplets((dir / "plain.csv").string(), r);
  CHECK_FALSE(plain.has_judgement);
  REQUIRE(plain.triplets.size() == 1);
  CHECK(plain.triplets[0].judgement == image::Judgement::a);
  CHECK(plain.paths == std::vector<std::string>{(dir / "img/red.jpg").string(), (dir / "img/darkred.jpg").string(),
                                                (dir / "img/blue.jpg").string()});
}

TEST_CASE("judged triplets by path and by URL: decoded with EXIF orientation, accuracy and undecided counts as the oracle's") {
  const fs::path dir = judged_dir("judged_triplets_graph");
  write_url_files(dir);
  const auto want = oracle(dir);
  REQUIRE(want.count("accuracy_exif"));
  REQUIRE(want.count("accuracy_stored"));
  // By hand: 6 decided (5 right upright: the triplet judged against the colours is wrong), 3
  // undecided (1 both, 2 neither); as stored, rot.jpg is red | blue and that triplet is wrong too.
  CHECK(want.at("accuracy_exif") == std::vector<double>{5.0 / 6.0, 6, 3, 1, 2});
  CHECK(want.at("accuracy_stored") == std::vector<double>{4.0 / 6.0, 6, 3, 1, 2});

  const std::string by_path = cat("{path: ", (dir / "triplets.csv").string(), "}");
  const std::string by_url = cat("{path: ", (dir / "lists/by_url.csv").string(), ", index: ", (dir / "index.csv").string(),
                                 ", columns: {query: q_url, a: left, b: right, judgement: answer}}");
  for (const auto& [params, exif] : {std::pair{by_path, true}, std::pair{by_url, true}, std::pair{by_path, false}}) {
    INFO(params << " exif " << exif);
    GraphRun run = GraphRunner(plugins(), graph(dir, params, "acc", exif), "g.yaml").collect("acc").collect("trip.triplets").run();
    INFO(run.message());
    REQUIRE(run.exit_code == 0);
    REQUIRE(run.records("acc").size() == 1);
    const RecordPtr& m = run.records("acc")[0];
    const auto& w = want.at(exif ? "accuracy_exif" : "accuracy_stored");
    CHECK(m->get("accuracy").data<double>()[0] == Approx(w[0]));
    CHECK(i64(m, "evaluated") == 6);
    CHECK(i64(m, "undecided") == 3);
    CHECK(i64(m, "both") == 1);
    CHECK(i64(m, "neither") == 2);
    CHECK(i64(m, "missing") == 0);
    const RecordPtr& t = run.records("trip.triplets")[0];
    CHECK(t->get("judgement").string_values() ==
          std::vector<std::string>{"A", "B", "A", "A", "both", "neither", "B", "neither", "A"});
    CHECK(t->get("line").as_int(8) == 10);
  }

  // The CLI's run record: the published table carries the undecided counts; the JSON too.
  run_graph_file_ok(dir, "g.yaml", graph(dir, by_path, "acc_cli"), {"--no-cache", "--out", (dir / "run").string()});
  check_python(R"PY(
import json, sys
with open(sys.argv[1]) as f:
    table = next(t for t in json.load(f)["results"] if t["title"] == "triplet accuracy")
row = table["rows"][0]
assert row["label"] == "colours", row
v = row["values"]
assert abs(v["accuracy"] - 5 / 6) < 1e-12 and v["evaluated"] == 6, v
assert v["undecided"] == 3 and v["both"] == 1 and v["neither"] == 2, v
with open(sys.argv[2]) as f:
    j = json.load(f)
assert j["evaluated"] == 6 and j["undecided"] == 3 and j["both"] == 1 and j["neither"] == 2, j
)PY",
               {(dir / "run" / "run.json").string(), (dir / "acc_cli.json").string()});
}

TEST_CASE("judged triplets: a missing file, a URL not in the index, an unknown judgement and a short row name file and line") {
  const fs::path dir = judged_dir("judged_triplets_bad");
  write_url_files(dir);
  // A good run first: its JSON must survive the failed runs that write to the same place.
  const std::string good = cat("{path: ", (dir / "triplets.csv").string(), "}");
  GraphRun ok = GraphRunner(plugins(), graph(dir, good, "acc"), "g.yaml").run();
  INFO(ok.message());
  REQUIRE(ok.exit_code == 0);
  const std::string before = read_file(dir / "acc.json");
  REQUIRE(!before.empty());

  struct Case {
    const char* name;
    std::string file, params, expect, expect2;
  };
  const std::string header = "query,a,b,judgement\n";
  write_file(dir / "missing.csv", header + "img/red.jpg,img/blue.jpg,img/green.jpg,A\nimg/red.jpg,img/gone.jpg,img/blue.jpg,B\n");
  write_file(dir / "lists/bad_url.csv",
             "q_url,left,right,answer\nhttps://wang.example/set/red.jpg,https://wang.example/set/blue.jpg,https://wang.example/set/green.jpg,a\n"
             "https://wang.example/set/red.jpg,https://wang.example/set/blue.jpg,https://wang.example/set/purple.jpg,b\n");
  write_file(dir / "bad_judgement.csv", header + "img/red.jpg,img/blue.jpg,img/green.jpg,A\n\nimg/red.jpg,img/blue.jpg,img/green.jpg,C\n");
  write_file(dir / "short.csv", header + "img/red.jpg,img/blue.jpg,img/green.jpg,A\nimg/red.jpg,img/blue.jpg\n");
  // A URL the index has whose file was never downloaded: the triplet line and the index line.
  write_file(dir / "index_gap.csv", "url,path\nhttps://wang.example/set/red.jpg,img/red.jpg\nhttps://wang.example/set/blue.jpg,img/blue.jpg\n"
                                    "https://wang.example/set/green.jpg,img/not_downloaded.jpg\n");
  const std::string url_cols = ", columns: {query: q_url, a: left, b: right, judgement: answer}";
  const Case cases[] = {
      {"missing file", "missing.csv", "", "missing.csv:3: A image '" + (dir / "img/gone.jpg").string() + "': no such file", ""},
      {"URL not in the index", "lists/bad_url.csv", ", index: " + (dir / "index.csv").string() + url_cols,
       "bad_url.csv:3: B URL 'https://wang.example/set/purple.jpg' is not in the URL index", "index.csv"},
      {"file of an indexed URL missing", "lists/bad_url.csv", ", index: " + (dir / "index_gap.csv").string() + url_cols,
       "bad_url.csv:2: B image '" + (dir / "img/not_downloaded.jpg").string() + "' (URL 'https://wang.example/set/green.jpg', ",
       "index_gap.csv:4)"},
      {"unknown judgement", "bad_judgement.csv", "", "bad_judgement.csv:4: judgement 'C' is not one of A, B, both, neither", ""},
      {"short row", "short.csv", "", "short.csv:3: 2 fields, the header has 4", ""},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const std::string params = cat("{path: ", (dir / c.file).string(), c.params, "}");
    GraphRun run = GraphRunner(plugins(), graph(dir, params, "acc"), "g.yaml").run();
    INFO(run.message());
    CHECK(run.exit_code == 1);
    CHECK_THAT(run.error, Catch::Contains(c.expect));
    if (!c.expect2.empty()) CHECK_THAT(run.error, Catch::Contains(c.expect2));
    CHECK(read_file(dir / "acc.json") == before);
  }

  // At load: a typo in the columns map, and the triplets given twice.
  GraphRun typo = GraphRunner(plugins(), graph(dir, cat("{path: ", (dir / "triplets.csv").string(), ", columns: {qeury: q}}"), "acc"),
                              "g.yaml").run();
  CHECK(typo.exit_code == 2);
  CHECK_THAT(typo.problem_text(), Catch::Contains("unknown field 'qeury'; did you mean 'query'?"));
  std::string twice = graph(dir, good, "acc");
  twice.replace(twice.find("name: colours"), 13, cat("name: colours, triplets: ", (dir / "triplets.csv").string()));
  GraphRun both = GraphRunner(plugins(), twice, "g.yaml").run();
  CHECK(both.exit_code == 2);
  CHECK_THAT(both.problem_text(), Catch::Contains("either as the triplets file or on port triplets, not both"));
  // A mapped column the header lacks names the header line and the nearest name.
  image::JudgedTripletOptions o;
  o.columns = {{"judgement", "verdict"}};
  CHECK_THROWS_WITH(image::read_judged_triplets((dir / "triplets.csv").string(), o),
                    Catch::Contains("triplets.csv:1: columns maps 'judgement' to 'verdict', but the header has no such column"));
}
