// CSV bytes through every CSV reader. A reader is one line in kReaders: a function that reads
// the whole file at `path` the way its node does (both strict and skip-and-count where the
// reader has that mode). Bad rows must be embedflow::Error (located) or counted, never a crash.
#include <cstdint>
#include <string>

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
    o.time_format = embedflow::geo::TimeFormat::iso8601;
    o.delimiter = '\t';
    o.quoting = false;
    o.missing_coordinates_bad = false;
    o.url_decode_text = true;
    o.layouts = {embedflow::geo::yfcc_columns(embedflow::geo::YfccLayout::webscope),
                 embedflow::geo::yfcc_columns(embedflow::geo::YfccLayout::commons)};
    o.image_template = "img/{id}.jpg";
    try {
      embedflow::geo::CsvReadStats stats;
      (void)embedflow::geo::read_photos_csv(path, o, &stats);
    } catch (const embedflow::Error&) {
    }
  }
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
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = embedflow::fuzz::input_file(data, size, ".csv");
  for (const Reader& r : kReaders) {
    try {
      r.read(path);
    } catch (const embedflow::Error&) {
    }
  }
  return 0;
}
