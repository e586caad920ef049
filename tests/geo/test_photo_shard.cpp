// The photo-table sources sharded at the source (shard_world_size W, shard_rank r): the ranks'
// rows concatenated in rank order against the unsharded read of the same file, all columns, for
// CSV and YFCC files written by gen_photos or by the test (trailing newline or none, CRLF, blank
// lines, fewer rows than ranks, a header alone); true file line numbers in the messages of a rank
// that sought past the start (against the unsharded reader's message for the same row); records
// spanning lines refused by the rank that owns them; WORLD_SIZE/RANK; geo.photo_folder's share of
// real JPEGs with real EXIF, a broken file read by its owner only; geo.pair_sampler refusing a
// sharded photo stream at validation and at run time.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <set>

#include "cli.hpp"
#include "embedflow/error.hpp"
#include "harness.hpp"
#include "photo_csv.hpp"

using namespace embedflow::test;
using embedflow::geo::CsvReadOptions;
using embedflow::geo::CsvReadStats;
using embedflow::geo::PhotoColumns;
namespace fs = std::filesystem;

namespace {

void append(PhotoColumns& to, const PhotoColumns& from) {
  const auto add = [](auto& dst, const auto& src) { dst.insert(dst.end(), src.begin(), src.end()); };
  add(to.id, from.id); add(to.lat, from.lat); add(to.lon, from.lon); add(to.time, from.time);
  add(to.user, from.user); add(to.accuracy, from.accuracy); add(to.title, from.title);
  add(to.description, from.description); add(to.path, from.path);
}

void check_same(const PhotoColumns& a, const PhotoColumns& b) {
  CHECK(a.id == b.id);
  CHECK(a.lat == b.lat);
  CHECK(a.lon == b.lon);
  CHECK(a.time == b.time);
  CHECK(a.user == b.user);
  CHECK(a.accuracy == b.accuracy);
  CHECK(a.title == b.title);
  CHECK(a.description == b.description);
  CHECK(a.path == b.path);
}

CsvReadOptions sharded(CsvReadOptions o, int world, int rank) {
  o.shard = embedflow::ParallelPlace{world, rank};
  return o;
}

// geo.yfcc_photos' reader options (both layouts: the first row picks one).
CsvReadOptions yfcc_options() {
  CsvReadOptions o;
  o.skip_bad_rows = true;
  o.min_accuracy = 0;
  embedflow::geo::set_yfcc_format(o);
  o.image_template = "img/{id}.jpg";
  return o;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

// gen_photos' table; its one description with a line break ("...then\nwe left") joined into one
// line, as a sharded read needs.
std::string gen_photos_text(const fs::path& dir, int rows, int seed, const std::string& format = "csv") {
  const fs::path out = dir / ("gen_" + std::to_string(rows) + "_" + std::to_string(seed) + "." + format);
  const Result gen = run_process({GEN_PHOTOS, "--rows", std::to_string(rows), "--seed", std::to_string(seed), "--out",
                                  out.string(), "--format", format});
  INFO(gen.err);
  REQUIRE(gen.exit_code == 0);
  return replace_all(read_file(out), "then\nwe left", "then we left");
}

// The byte offset of line `line` (1-based) of `text`.
std::size_t line_offset(const std::string& text, int line) {
  std::size_t at = 0;
  for (int l = 1; l < line; ++l) at = text.find('\n', at) + 1;
  return at;
}

// The rank whose byte range [S r / W, S (r+1) / W) holds `offset`.
int owner(std::size_t size, std::size_t offset, int world) {
  for (int r = 0; r < world; ++r)
    if (offset < size * static_cast<std::size_t>(r + 1) / static_cast<std::size_t>(world)) return r;
  return world - 1;
}

// Every rank of W reads `path`; their rows in rank order against the unsharded read.
void check_union(const fs::path& path, const CsvReadOptions& options, int world, std::size_t min_share) {
  CsvReadStats whole_stats;
  const PhotoColumns whole = embedflow::geo::read_photos_csv(path.string(), options, &whole_stats);
  PhotoColumns joined;
  std::int64_t rows = 0, emitted = 0, bad = 0, no_coordinates = 0;
  for (int r = 0; r < world; ++r) {
    CsvReadStats s;
    const PhotoColumns mine = embedflow::geo::read_photos_csv(path.string(), sharded(options, world, r), &s);
    INFO(path.filename().string() << " rank " << r << " of " << world);
    CHECK(mine.size() >= min_share);  // the file is shared, not read by one rank
    CHECK(static_cast<std::int64_t>(mine.size()) == s.emitted);
    rows += s.rows;
    emitted += s.emitted;
    bad += s.bad_rows;
    no_coordinates += s.no_coordinates;
    append(joined, mine);
  }
  INFO(path.filename().string() << " over " << world << " ranks");
  CHECK(joined.size() == whole.size());
  check_same(joined, whole);
  CHECK(rows == whole_stats.rows);
  CHECK(emitted == whole_stats.emitted);
  CHECK(bad == whole_stats.bad_rows);
  CHECK(no_coordinates == whole_stats.no_coordinates);
}

std::string sharded_error(const fs::path& path, const CsvReadOptions& options) {
  try {
    (void)embedflow::geo::read_photos_csv(path.string(), options);
  } catch (const embedflow::DataError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("sharded photo CSV and YFCC reads: the ranks' rows in rank order are the unsharded rows, all columns",
          "[geo][shard][photo_csv]") {
  const fs::path dir = scratch_dir("photo_shard_union");
  const std::string csv = gen_photos_text(dir, 600, 11);
  REQUIRE(csv.back() == '\n');
  const std::string header = csv.substr(0, csv.find('\n') + 1);
  const std::string first_row = csv.substr(header.size(), csv.find('\n', header.size()) + 1 - header.size());
  std::string blank_lines;  // a blank line after every 50th row, and two at the end
  {
    std::size_t at = header.size();
    for (int row = 1; at < csv.size(); ++row) {
      const std::size_t end = csv.find('\n', at) + 1;
      blank_lines += csv.substr(at, end - at);
      if (row % 50 == 0) blank_lines += row % 100 == 0 ? "\r\n" : "\n";
      at = end;
    }
    blank_lines = header + blank_lines + "\n\n";
  }
  // A malformed row, a duplicate id (keep_first drops it) and rows outside the bbox make the
  // skip and drop counters real.
  std::string with_bad = replace_all(csv, "\n300,", "\n300,north,");
  struct File {
    std::string name, text;
    std::size_t min_share;  // rows every rank must get at W = 4
  };
  const std::vector<File> files = {
      {"gen.csv", csv, 100},
      {"no_final_newline.csv", csv.substr(0, csv.size() - 1), 100},
      {"crlf.csv", replace_all(csv, "\n", "\r\n"), 100},
      {"blank_lines.csv", blank_lines, 100},
      {"bad_row.csv", with_bad, 100},
      {"one_row.csv", header + first_row, 0},
      {"one_row_no_newline.csv", header + first_row.substr(0, first_row.size() - 1), 0},
      {"header_only.csv", header, 0},
      {"header_only_no_newline.csv", header.substr(0, header.size() - 1), 0},
  };
  CsvReadOptions o;
  o.skip_bad_rows = true;
  o.duplicate_ids = embedflow::geo::DuplicateIds::keep_first;
  for (const File& f : files) {
    write_file(dir / f.name, f.text);
    for (int world : {2, 3, 4}) check_union(dir / f.name, o, world, f.min_share);
  }
  // The bbox drops rows per rank as the whole read does.
  CsvReadOptions boxed = o;
  boxed.bbox = embedflow::geo::BBox{-74.0, 40.70, -73.95, 40.80};
  for (int world : {2, 3, 4}) check_union(dir / "gen.csv", boxed, world, 10);
  // The YFCC100M layout (tab-separated, no header: the first row picks the layout, and every rank reads it).
  write_file(dir / "yfcc.tsv", gen_photos_text(dir, 600, 12, "yfcc"));
  for (int world : {2, 3, 4}) check_union(dir / "yfcc.tsv", yfcc_options(), world, 100);
  for (int world : {2, 3, 4}) check_union(source_dir() + "/tests/geo/data/yfcc_sample.tsv", yfcc_options(), world, 0);
  // A world larger than the file's lines: most ranks read nothing, the union is still the file.
  check_union(dir / "gen.csv", o, 997, 0);
}

TEST_CASE("a sharded rank names rows by their true file line: a bad row in rank 2's share, duplicate ids in it",
          "[geo][shard][photo_csv]") {
  const fs::path dir = scratch_dir("photo_shard_lines");
  std::string csv = gen_photos_text(dir, 900, 13);
  const int world = 3;
  // Line 800 of 901 (the header is line 1) lies in rank 2's last third of the bytes.
  const int bad_line = 800;
  const std::size_t at = line_offset(csv, bad_line);
  REQUIRE(owner(csv.size(), at, world) == 2);
  csv.insert(csv.find(',', at) + 1, "north,");  // lat 'north' and one field too many
  const fs::path path = dir / "bad.csv";
  write_file(path, csv);
  CsvReadOptions strict;
  const std::string whole_error = sharded_error(path, strict);
  REQUIRE_THAT(whole_error, Catch::Contains(path.string() + ":800: expected 8 fields, got 9"));
  CHECK(sharded_error(path, sharded(strict, world, 0)).empty());
  CHECK(sharded_error(path, sharded(strict, world, 1)).empty());
  CHECK(sharded_error(path, sharded(strict, world, 2)) == whole_error);  // the same message, the same line
  CsvReadOptions skip;
  skip.skip_bad_rows = true;
  CsvReadStats s;
  (void)embedflow::geo::read_photos_csv(path.string(), sharded(skip, world, 2), &s);
  CHECK(s.bad_rows == 1);
  REQUIRE(s.first_bad.size() == 1);
  CHECK(s.first_bad[0].rfind(path.string() + ":800: expected 8 fields, got 9", 0) == 0);

  // Line 850 repeats the id of line 820 (both rank 2's) and line 500 (rank 1's) that of line 10 (rank 0's).
  std::string dup = gen_photos_text(dir, 900, 13);
  const auto set_id = [&](int line, const std::string& id) {
    const std::size_t begin = line_offset(dup, line);
    dup.replace(begin, dup.find(',', begin) - begin, id);
  };
  set_id(850, "819");
  set_id(500, "9");
  const fs::path dup_path = dir / "dup.csv";
  write_file(dup_path, dup);
  REQUIRE(owner(dup.size(), line_offset(dup, 500), world) == 1);
  REQUIRE(owner(dup.size(), line_offset(dup, 820), world) == 2);
  const std::string whole_dup = sharded_error(dup_path, strict);
  CHECK_THAT(whole_dup, Catch::Contains(dup_path.string() + ":500: photo id 9 repeats the id of line 10"));
  // Each rank checks its own rows only: rank 1 does not see line 10's id.
  CHECK(sharded_error(dup_path, sharded(strict, world, 0)).empty());
  CHECK(sharded_error(dup_path, sharded(strict, world, 1)).empty());
  CHECK_THAT(sharded_error(dup_path, sharded(strict, world, 2)),
             Catch::Contains(dup_path.string() + ":850: photo id 819 repeats the id of line 820"));
}

TEST_CASE("a record spanning lines (a quoted line break) stops the sharded rank that owns it, naming its line",
          "[geo][shard][photo_csv]") {
  const fs::path dir = scratch_dir("photo_shard_multiline");
  // photos_small.csv holds descriptions with line breaks; the unsharded reader reads them.
  const fs::path small = source_dir() + "/tests/geo/data/photos_small.csv";
  CsvReadOptions skip;
  skip.skip_bad_rows = true;  // the file has malformed rows too; a record spanning lines is not one of them
  REQUIRE(embedflow::geo::read_photos_csv(small.string(), skip).size() > 1000);
  const std::string text = read_file(small);
  // Its first record spanning lines starts at line 45 (fields 1 to 8, the description broken).
  REQUIRE(text.find("\"she said \"\"look up\"\", then\nwe left\"") > line_offset(text, 45));
  REQUIRE(text.find("\"she said \"\"look up\"\", then\nwe left\"") < line_offset(text, 46));
  for (int world : {2, 3, 4}) {
    const int r = owner(text.size(), line_offset(text, 45), world);
    INFO("world " << world << ", owner " << r);
    CHECK_THAT(sharded_error(small, sharded(skip, world, r)),
               Catch::Contains(small.string() + ":45: this record spans 2 lines (a quoted field holds a line break"));
  }
  // In a later rank's share the line number is still the file's.
  std::string csv = gen_photos_text(dir, 600, 14);
  const std::size_t at = line_offset(csv, 500);
  REQUIRE(owner(csv.size(), at, 2) == 1);
  // Line 500 (photo 499) with a title holding a line break.
  csv.replace(at, csv.find('\n', at) - at, "499,40.75,-73.98,2015-01-01T00:00:00,someone,16,\"two\nlines\",x");
  write_file(dir / "broken.csv", csv);
  REQUIRE(embedflow::geo::read_photos_csv((dir / "broken.csv").string(), CsvReadOptions()).size() == 600);
  CHECK(sharded_error(dir / "broken.csv", sharded(CsvReadOptions(), 2, 0)).empty());
  CHECK_THAT(sharded_error(dir / "broken.csv", sharded(CsvReadOptions(), 2, 1)),
             Catch::Contains((dir / "broken.csv").string() + ":500: this record spans 2 lines"));
  // A header spanning lines stops every rank at line 1.
  write_file(dir / "header.csv", "id,lat,lon,time,user,\"ti\ntle\"\n1,40.7,-74,2015-01-01,u,x\n");
  for (int r = 0; r < 2; ++r)
    CHECK_THAT(sharded_error(dir / "header.csv", sharded(CsvReadOptions(), 2, r)),
               Catch::Contains((dir / "header.csv").string() + ":1: this record spans 2 lines"));
}

TEST_CASE("geo.csv_photos and geo.yfcc_photos sharded in a graph: shares, shard_rank, WORLD_SIZE/RANK, a bad place",
          "[geo][shard][graph]") {
  const fs::path dir = scratch_dir("photo_shard_graph");
  write_file(dir / "photos.csv", gen_photos_text(dir, 700, 15));
  write_file(dir / "photos.tsv", gen_photos_text(dir, 700, 16, "yfcc"));
  for (const std::string type : {"geo.csv_photos", "geo.yfcc_photos"}) {
    const std::string file = (dir / (type == "geo.csv_photos" ? "photos.csv" : "photos.tsv")).string();
    GraphRunner runner(plugins(), "seed: 1\nnodes:\n  photos: {type: " + type + ", params: {path: " + file +
                                      ", batch_size: 64, min_accuracy: 0}}\n  count: {type: core.sink}\n"
                                      "edges: [photos.out -> count.in]\n");
    runner.collect("photos.out");
    const GraphRun whole = runner.run();
    INFO(type << ": " << whole.message());
    REQUIRE(whole.exit_code == 0);
    const auto ids = [](const GraphRun& run, std::vector<std::int64_t>* ranks = nullptr) {
      std::vector<std::int64_t> out;
      for (const auto& rec : run.records("photos.out")) {
        const auto* d = rec->get("id").data<std::int64_t>();
        out.insert(out.end(), d, d + rec->get("id").numel());
        if (ranks) {
          const auto* s = rec->get("shard_rank").data<std::int64_t>();
          ranks->insert(ranks->end(), s, s + rec->get("shard_rank").numel());
        }
        CHECK(rec->batch_size() == rec->get("id").numel());
      }
      return out;
    };
    const std::vector<std::int64_t> all = ids(whole);
    REQUIRE(all.size() > 500);
    CHECK(whole.records("photos.out").front()->find("shard_rank") == nullptr);
    for (int world : {2, 3}) {
      std::vector<std::int64_t> joined;
      for (int rank = 0; rank < world; ++rank) {
        const GraphRun r = runner.run({"photos.shard_world_size=" + std::to_string(world), "photos.shard_rank=" + std::to_string(rank)});
        INFO(r.message());
        REQUIRE(r.exit_code == 0);
        std::vector<std::int64_t> ranks;
        const std::vector<std::int64_t> mine = ids(r, &ranks);
        CHECK(mine.size() > static_cast<std::size_t>(700 / world / 2));
        CHECK(ranks == std::vector<std::int64_t>(mine.size(), rank));
        CHECK_THAT(r.log, Catch::Contains(embedflow::cat("rank ", rank, " of ", world, " reads bytes [")));
        CHECK_THAT(r.log, Catch::Contains(embedflow::cat("(rank ", rank, " of ", world, "): ", mine.size(), " of ")));
        joined.insert(joined.end(), mine.begin(), mine.end());
      }
      CHECK(joined == all);
    }
    ::setenv("WORLD_SIZE", "3", 1);
    ::setenv("RANK", "2", 1);
    const GraphRun env = runner.run({"photos.shard_world_size=0"});
    ::unsetenv("WORLD_SIZE");
    ::unsetenv("RANK");
    const GraphRun explicit_rank = runner.run({"photos.shard_world_size=3", "photos.shard_rank=2"});
    REQUIRE(env.exit_code == 0);
    CHECK(ids(env) == ids(explicit_rank));
    CHECK(ids(env).size() < all.size());
    const GraphRun bad = runner.run({"photos.shard_world_size=3", "photos.shard_rank=3"});
    CHECK(bad.exit_code != 0);
    CHECK_THAT(bad.error, Catch::Contains("'photos'"));
    CHECK_THAT(bad.error, Catch::Contains("shard_world_size / shard_rank: rank 3 is outside [0, 3)"));
  }
}

TEST_CASE("geo.pair_sampler refuses a photo stream sharded at its source, at validation and at run time",
          "[geo][shard][sampler]") {
  const std::string csv = source_dir() + "/tests/geo/data/photos_small.csv";
  GraphRunner runner(plugins(), "seed: 1\nnodes:\n  photos: {type: geo.csv_photos, params: {path: " + csv +
                                    ", on_bad_row: skip}}\n  pairs: {type: geo.pair_sampler}\n"
                                    "edges: [photos.out -> pairs.photos]\n");
  CHECK(runner.validate().exit_code == 0);
  for (const std::string world : {"0", "2"}) {
    const GraphRun v = runner.validate({"photos.shard_world_size=" + world});
    CHECK(v.exit_code == 2);
    CHECK_THAT(v.problem_text(), Catch::Contains("'pairs'"));
    CHECK_THAT(v.problem_text(), Catch::Contains("the photos arrive sharded"));
  }
  // A sharded source's schema carries shard_rank; its batches reach the sampler even where a
  // node in between hid the schema, and the sampler stops at the first one.
  embedflow::testing::NodeRunner source(plugins(), "geo.yfcc_photos",
                                        "{path: " + source_dir() + "/tests/geo/data/yfcc_sample.tsv, on_bad_row: skip, "
                                        "shard_world_size: 2, shard_rank: 1}");
  REQUIRE(source.problems().empty());
  CHECK(source.output_schema("out").find("shard_rank") != nullptr);
  source.run_source();
  REQUIRE(!source.outputs("out").empty());
  embedflow::testing::NodeRunner sampler(plugins(), "geo.pair_sampler", "{}");
  REQUIRE(sampler.problems().empty());
  try {
    sampler.push("photos", source.outputs("out").front());
    FAIL("the sampler took a sharded batch");
  } catch (const embedflow::DataError& e) {
    CHECK_THAT(e.what(), Catch::Contains("carries 'shard_rank': it is one rank's share"));
  }
}

TEST_CASE("geo.photo_folder sharded: rank r reads the EXIF of its share of the sorted files only",
          "[geo][shard][photo_folder]") {
  const fs::path dir = scratch_dir("photo_shard_folder");
  const Result gen = run_process({GEN_PHOTOS, "--rows", "14", "--seed", "17", "--out", (dir / "meta.csv").string(), "--images",
                                  (dir / "img").string(), "--image-size", "48", "--exif"});
  INFO(gen.err);
  REQUIRE(gen.exit_code == 0);
  // A JPEG whose EXIF block is damaged (the TIFF byte order mark overwritten), named to sort last.
  fs::path some_jpeg;
  for (const auto& e : fs::recursive_directory_iterator(dir / "img"))
    if (e.path().extension() == ".jpg") some_jpeg = e.path();
  REQUIRE(!some_jpeg.empty());
  std::string bytes = read_file(some_jpeg);
  const std::size_t exif = bytes.find(std::string("Exif\0\0", 6));
  REQUIRE(exif != std::string::npos);
  bytes.replace(exif + 6, 2, "XX");
  write_file(dir / "img" / "zz_broken.jpg", bytes);
  std::size_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir / "img")) files += e.path().extension() == ".jpg";
  REQUIRE(files == 15);

  GraphRunner runner(plugins(), "seed: 1\nnodes:\n  photos: {type: geo.photo_folder, params: {dir: " + (dir / "img").string() +
                                    ", header_index: \"off\", batch_size: 4}}\n  count: {type: core.sink}\n"
                                    "edges: [photos.out -> count.in]\n");
  runner.collect("photos.out");
  const GraphRun whole = runner.run();
  REQUIRE(whole.exit_code == 1);
  CHECK_THAT(whole.error, Catch::Contains("zz_broken.jpg"));
  const GraphRun whole_skip = runner.run({"photos.on_bad_image=skip"});
  REQUIRE(whole_skip.exit_code == 0);
  const auto rows = [](const GraphRun& run) {
    std::vector<std::string> out;  // id, position, time, user, accuracy, path of each row
    for (const auto& rec : run.records("photos.out"))
      for (std::int64_t i = 0; i < rec->get("id").numel(); ++i)
        out.push_back(embedflow::cat(rec->get("id").data<std::int64_t>()[i], " ", rec->get("lat").data<double>()[i], " ",
                          rec->get("lon").data<double>()[i], " ", rec->get("time").data<std::int64_t>()[i], " ",
                          rec->get("user").string_at(i), " ", rec->get("accuracy").data<std::int64_t>()[i], " ",
                          rec->get("path").string_at(i)));
    return out;
  };
  const std::vector<std::string> all = rows(whole_skip);
  REQUIRE(all.size() == 14);
  for (int world : {2, 3, 4}) {
    std::vector<std::string> joined;
    for (int rank = 0; rank < world; ++rank) {
      const std::vector<std::string> sets = {"photos.shard_world_size=" + std::to_string(world),
                                             "photos.shard_rank=" + std::to_string(rank)};
      const GraphRun r = runner.run(sets);
      INFO("rank " << rank << " of " << world << ": " << r.message());
      if (rank < world - 1) {
        // The broken file is not in this rank's share: it is never opened.
        REQUIRE(r.exit_code == 0);
        CHECK_THAT(r.log, Catch::Contains(" 0 bad files skipped"));
        const std::vector<std::string> mine = rows(r);
        CHECK(!mine.empty());
        joined.insert(joined.end(), mine.begin(), mine.end());
      } else {
        // Its owner stops with the unsharded run's message, or skips and counts it.
        CHECK(r.exit_code == 1);
        CHECK(r.error == whole.error);
        std::vector<std::string> skip_sets = sets;
        skip_sets.push_back("photos.on_bad_image=skip");
        const GraphRun s = runner.run(skip_sets);
        REQUIRE(s.exit_code == 0);
        CHECK_THAT(s.log, Catch::Contains(" 1 bad files skipped"));
        CHECK_THAT(s.log, Catch::Contains(embedflow::cat("(rank ", rank, " of ", world, ": files ")));
        const std::vector<std::string> mine = rows(s);
        joined.insert(joined.end(), mine.begin(), mine.end());
      }
    }
    CHECK(joined == all);
  }
  // Each rank keeps its own header index beside the path given.
  const GraphRun indexed = runner.run({"photos.shard_world_size=2", "photos.shard_rank=0",
                                       "photos.header_index=" + (dir / "index.h5").string()});
  REQUIRE(indexed.exit_code == 0);
  CHECK(fs::exists(dir / "index.rank0of2.h5"));
  CHECK(!fs::exists(dir / "index.h5"));
}
