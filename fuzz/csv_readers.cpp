// CSV bytes through every CSV reader. A reader is one line in kReaders: a function that reads
// the whole file at `path` the way its node does (both strict and skip-and-count where the
// reader has that mode). Bad rows must be embedflow::Error (located) or counted, never a crash.
// The photo readers are also read sharded (every rank of a world of 2 to 5 ranks, chosen by the
// input's first byte), and when every rank succeeds their rows in rank order must be the
// unsharded read's, each once: a broken byte-range split aborts with the input kept.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_set>

#include "photo_csv.hpp"
#include "embedflow/csv.hpp"
#include "embedflow/error.hpp"
#include "fuzz_input_file.hpp"

namespace {

void sdk_table(const std::string& path) { (void)embedflow::read_csv_table(path); }

void geo_photo_csv(const std::string& path) {
  for (bool skip : {false, true}) {
    embedflow::geo::CsvReadOptions options;
    options.skip_bad_rows = skip;
    try {
      embedflow::geo::CsvReadStats stats;
      (void)embedflow::geo::read_photos_csv(path, options, &stats);
    } catch (const embedflow::Error&) {
    }
  }
}

// geo.csv_photos with a `columns` mapping onto other header names, ids hashed from text and each
// time format, as a researcher's own table is read: the header matching, the mapped columns and
// every time parser (auto's per-value detection included) see the fuzzed bytes.
void geo_photo_csv_mapped(const std::string& path) {
  using embedflow::geo::TimeFormat;
  for (TimeFormat format : {TimeFormat::automatic, TimeFormat::iso8601, TimeFormat::exif, TimeFormat::unix_seconds}) {
    embedflow::geo::CsvReadOptions options;
    options.skip_bad_rows = true;
    options.time_format = format;
    options.id_from = embedflow::geo::IdSource::hash;
    options.columns = {{"id", "photo_id"}, {"time", "taken"}, {"user", "owner"}};
    try {
      embedflow::geo::CsvReadStats stats;
      (void)embedflow::geo::read_photos_csv(path, options, &stats);
    } catch (const embedflow::Error&) {
    }
  }
}

// The YFCC100M layouts as geo.yfcc_photos reads them: tab-separated, unquoted, header-less (the
// first row's column count picks the layout), percent-encoded text, rows without coordinates
// counted rather than bad.
void geo_yfcc(const std::string& path) {
  for (bool skip : {false, true}) {
    embedflow::geo::CsvReadOptions o;
    o.skip_bad_rows = skip;
    o.min_accuracy = 16;
    embedflow::geo::set_yfcc_format(o);
    o.image_template = "img/{id}.jpg";
    try {
      embedflow::geo::CsvReadStats stats;
      (void)embedflow::geo::read_photos_csv(path, o, &stats);
    } catch (const embedflow::Error&) {
    }
  }
}

// Every rank of `world` reads the file; when none of them throws, the unsharded read must not either,
// and its rows must be the ranks' rows in rank order: the same columns, the same counts (duplicate
// ids are dropped per rank, so the union is compared after dropping the later repeats of an id).
void check_shards(const std::string& path, const embedflow::geo::CsvReadOptions& options, int world) {
  using embedflow::geo::PhotoColumns;
  const auto fail = [&](const char* what) {
    std::fprintf(stderr, "sharded read of %d ranks differs from the unsharded read: %s\n", world, what);
    std::abort();
  };
  PhotoColumns joined;
  embedflow::geo::CsvReadStats sum;
  for (int r = 0; r < world; ++r) {
    embedflow::geo::CsvReadOptions o = options;
    o.shard = embedflow::ParallelPlace{world, r};
    embedflow::geo::CsvReadStats s;
    PhotoColumns mine;
    try {
      mine = embedflow::geo::read_photos_csv(path, o, &s);
    } catch (const embedflow::Error&) {
      return;  // a record spanning lines, or an error the unsharded read also meets
    }
    sum.rows += s.rows;
    sum.bad_rows += s.bad_rows;
    sum.outside_bbox += s.outside_bbox;
    sum.no_coordinates += s.no_coordinates;
    sum.videos += s.videos;
    const auto add = [](auto& to, const auto& from) { to.insert(to.end(), from.begin(), from.end()); };
    add(joined.id, mine.id); add(joined.lat, mine.lat); add(joined.lon, mine.lon); add(joined.time, mine.time);
    add(joined.user, mine.user); add(joined.accuracy, mine.accuracy); add(joined.title, mine.title);
    add(joined.description, mine.description); add(joined.path, mine.path);
  }
  embedflow::geo::CsvReadStats whole_stats;
  PhotoColumns whole;
  try {
    whole = embedflow::geo::read_photos_csv(path, options, &whole_stats);
  } catch (const embedflow::Error&) {
    fail("every rank read its share, the unsharded read failed");
  }
  if (sum.rows != whole_stats.rows || sum.bad_rows != whole_stats.bad_rows || sum.outside_bbox != whole_stats.outside_bbox ||
      sum.no_coordinates != whole_stats.no_coordinates || sum.videos != whole_stats.videos)
    fail("row counts");
  std::unordered_set<std::int64_t> seen;
  std::size_t k = 0;
  for (std::size_t i = 0; i < joined.id.size(); ++i) {
    if (!seen.insert(joined.id[i]).second) continue;  // a later rank's repeat of an id
    if (k >= whole.id.size()) fail("more rows");
    const bool same = joined.id[i] == whole.id[k] && joined.lat[i] == whole.lat[k] && joined.lon[i] == whole.lon[k] &&
                      joined.time[i] == whole.time[k] && joined.user[i] == whole.user[k] &&
                      joined.accuracy[i] == whole.accuracy[k] && joined.title[i] == whole.title[k] &&
                      joined.description[i] == whole.description[k] &&
                      (joined.path.empty() ? whole.path.empty() : joined.path[i] == whole.path[k]);
    if (!same) fail("a row");
    ++k;
  }
  if (k != whole.id.size()) fail("fewer rows");
}

// The shard checks over geo.csv_photos' and geo.yfcc_photos' options (skip and count, keep the first
// row of an id), the world size from the first byte.
int g_world = 2;
void geo_sharded(const std::string& path) {
  embedflow::geo::CsvReadOptions csv;
  csv.skip_bad_rows = true;
  csv.duplicate_ids = embedflow::geo::DuplicateIds::keep_first;
  check_shards(path, csv, g_world);
  embedflow::geo::CsvReadOptions tsv = csv;
  embedflow::geo::set_yfcc_format(tsv);
  check_shards(path, tsv, g_world);
}

struct Reader {
  const char* name;
  void (*read)(const std::string& path);
};

const Reader kReaders[] = {
    {"sdk.read_csv_table", sdk_table},
    {"geo.csv_photos", geo_photo_csv},
    {"geo.csv_photos (columns, id_from: hash, each time_format)", geo_photo_csv_mapped},
    {"geo.yfcc_photos", geo_yfcc},
    {"geo.csv_photos and geo.yfcc_photos sharded (every rank's rows against the unsharded read)", geo_sharded},
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = embedflow::fuzz::input_file(data, size, ".csv");
  g_world = 2 + (size > 0 ? data[0] % 4 : 0);
  for (const Reader& r : kReaders) {
    try {
      r.read(path);
    } catch (const embedflow::Error&) {
    }
  }
  return 0;
}
