// geo.csv_photos on a researcher's own table: columns mapped by name (`columns`), times as ISO
// 8601, EXIF date-times or unix seconds (`time_format`), ids hashed from text (`id_from: hash`).
// Oracles: h5py reading the canonical and the mapped table's outputs, Python's datetime and
// calendar.timegm for every time format, hashlib for the hashed ids.
#include <catch2/catch.hpp>

#include <sstream>

#include "cli.hpp"
#include "embedflow/error.hpp"
#include "photo_csv.hpp"

using namespace embedflow;
using namespace embedflow::geo;
using namespace embedflow::test;
namespace fs = std::filesystem;

namespace {

std::string error_of(const fs::path& csv, const CsvReadOptions& o) {
  try {
    read_photos_csv(csv.string(), o);
  } catch (const DataError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("geo.csv_photos with columns reads a table with other header names and column order as the canonical one",
          "[geo][csv][columns]") {
  const fs::path dir = scratch_dir("geo_csv_columns");
  const fs::path canonical = dir / "canonical.csv";
  const Result gen = run_process({GEN_PHOTOS, "--rows", "3000", "--seed", "4", "--out", canonical.string()});
  INFO(gen.err);
  REQUIRE(gen.exit_code == 0);
  // The mapped table: header photo_id,lat,lon,taken,owner (plus acc) written in another order,
  // each time in one of the formats auto tells apart (ISO with an offset, EXIF with and without
  // an offset, unix integer and fractional seconds), all naming the canonical instant. The
  // hashed table keeps the canonical columns but writes each id as hex text.
  const Result make = run_python(R"PY(
import csv, random, sys
from datetime import datetime, timezone, timedelta
src, mapped, hashed = sys.argv[1:4]
rng = random.Random(5)
with open(src, newline="") as f:
    rows = list(csv.DictReader(f))
with open(mapped, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["owner", "acc", "taken", "lon", "photo_id", "lat"])
    for r in rows:
        t = datetime.fromisoformat(r["time"]).replace(tzinfo=timezone.utc)
        minutes = rng.choice([-300, -210, 0, 60, 120, 345])
        local = t.astimezone(timezone(timedelta(minutes=minutes)))
        kind = rng.randrange(5)
        if kind == 0: text = local.isoformat()
        elif kind == 1: text = local.strftime("%Y:%m:%d %H:%M:%S") + local.strftime("%z")[:3] + ":" + local.strftime("%z")[3:]
        elif kind == 2: text = t.strftime("%Y:%m:%d %H:%M:%S")
        elif kind == 3: text = str(int(t.timestamp()))
        else: text = f"{int(t.timestamp())}.{rng.randrange(1, 1000):03d}"
        w.writerow([r["user"], r["accuracy"], text, r["lon"], r["id"], r["lat"]])
with open(hashed, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["id", "lat", "lon", "time", "user"])
    for r in rows:
        w.writerow([format(int(r["id"]) * 7919, "x"), r["lat"], r["lon"], r["time"], r["user"]])
)PY",
                                 {canonical.string(), (dir / "mapped.csv").string(), (dir / "hashed.csv").string()});
  INFO(make.out << make.err);
  REQUIRE(make.exit_code == 0);
  auto writer = [&](const std::string& name) {
    return "  save_" + name + ": {type: io.hdf5_writer, params: {path: " + (dir / (name + ".h5")).string() + ", group: photos}}\n";
  };
  run_graph_file_ok(dir, "g.yaml",
                    "seed: 1\nnodes:\n"
                    "  canonical: {type: geo.csv_photos, params: {path: " + canonical.string() + ", text: false, batch_size: 700}}\n"
                    "  mapped: {type: geo.csv_photos, params: {path: " + (dir / "mapped.csv").string() +
                        ", text: false, columns: {id: photo_id, time: taken, user: owner, accuracy: acc}}}\n"
                    "  hashed: {type: geo.csv_photos, params: {path: " + (dir / "hashed.csv").string() +
                        ", text: false, id_from: hash}}\n" +
                        writer("canonical") + writer("mapped") + writer("hashed") +
                        "edges: [canonical.out -> save_canonical, mapped.out -> save_mapped, hashed.out -> save_hashed]\n",
                    {"--no-cache"});
  check_python(R"PY(
import csv, hashlib, sys, h5py, numpy as np
d, hashed_csv = sys.argv[1:3]
def table(name):
    with h5py.File(f"{d}/{name}.h5") as f:
        return {k: f["photos"][k][:] for k in f["photos"].keys()}
a, b, h = table("canonical"), table("mapped"), table("hashed")
assert len(a["id"]) == 3000, len(a["id"])
for k in ("id", "lat", "lon", "time", "user", "accuracy"):
    assert np.array_equal(a[k], b[k]), f"mapped table differs in {k}"
with open(hashed_csv, newline="") as f:
    texts = [r["id"] for r in csv.DictReader(f)]
want = [int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "big") & (2**63 - 1) for t in texts]
assert list(h["id"]) == want, "hashed ids"
for k in ("lat", "lon", "time", "user"):
    assert np.array_equal(a[k], h[k]), f"hashed table differs in {k}"
print("ok", len(want))
)PY",
               {dir.string(), (dir / "hashed.csv").string()});
}

TEST_CASE("every time format against Python's datetime and calendar.timegm", "[geo][csv][time]") {
  // The oracle writes random instants (1902..2037) in each format with random offsets, and the
  // instant each text names by calendar.timegm; unix texts (fractions, negatives) floor exactly.
  const Result cases = run_python(R"PY(
import calendar, math, random
from datetime import datetime, timezone, timedelta
from decimal import Decimal
rng = random.Random(11)
def is_date(text):
    try:
        return len(text) == 8 and text.isdigit() and datetime.strptime(text, "%Y%m%d") is not None
    except ValueError:
        return False
def offset_text(m):
    s = "+" if m >= 0 else "-"
    return f"{s}{abs(m)//60:02d}:{abs(m)%60:02d}"
for _ in range(3000):
    t = datetime(1902, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=rng.randrange(0, 135 * 365 * 86400))
    m = rng.choice([-720, -570, -300, 0, 60, 330, 345, 840])
    local = t.astimezone(timezone(timedelta(minutes=m)))
    want = calendar.timegm(t.utctimetuple())
    naive_want = calendar.timegm(local.replace(tzinfo=None).timetuple())
    exif = local.strftime("%Y:%m:%d %H:%M:%S")
    iso = local.strftime("%Y-%m-%dT%H:%M:%S")
    for fmt in ("exif", "auto"):
        print(f"{fmt}|{exif}{offset_text(m)}|{want}")
        print(f"{fmt}|{exif} {offset_text(m)}|{want}")
        print(f"{fmt}|{exif}|{naive_want}")
    for fmt in ("iso", "auto"):
        print(f"{fmt}|{iso}{offset_text(m)}|{want}")
        print(f"{fmt}|{iso}|{naive_want}")
    print(f"iso|{local.strftime('%Y%m%d%H%M%S')}|{naive_want}")
    print(f"iso|{local.strftime('%Y%m%d')}|{calendar.timegm(local.date().timetuple())}")
    print(f"ambiguous|{local.strftime('%Y%m%d')}|0")
    frac = Decimal(rng.randrange(-10**12, 10**12)) / Decimal(1000)
    for text, value in ((f"{frac:f}", math.floor(frac)), (str(want), want)):
        print(f"unix|{text}|{value}")
        # auto refuses 8-digit numbers that also spell a date (strptime is the judge).
        print(f"{'ambiguous' if is_date(text) else 'auto'}|{text}|{value}")
)PY");
  INFO(cases.err);
  REQUIRE(cases.exit_code == 0);
  std::istringstream lines(cases.out);
  std::string line;
  int checked = 0, wrong = 0;
  while (std::getline(lines, line)) {
    const auto a = line.find('|'), b = line.rfind('|');
    const std::string fmt = line.substr(0, a), text = line.substr(a + 1, b - a - 1);
    const std::int64_t want = std::stoll(line.substr(b + 1));
    ++checked;
    if (fmt == "ambiguous") {
      std::int64_t t = 0;
      // A valid 8-digit date is refused by auto and read as a date or as seconds when told.
      const bool ok = time_is_ambiguous(text) && !parse_time(text, TimeFormat::automatic, t) &&
                      parse_time(text, TimeFormat::unix_seconds, t) && t == std::stoll(text);
      if (!ok && ++wrong <= 5) FAIL_CHECK("ambiguous " << text);
      continue;
    }
    const TimeFormat f = fmt == "exif"   ? TimeFormat::exif
                         : fmt == "iso"  ? TimeFormat::iso8601
                         : fmt == "unix" ? TimeFormat::unix_seconds
                                         : TimeFormat::automatic;
    std::int64_t got = 0;
    const bool ok = parse_time(text, f, got);
    if ((!ok || got != want) && ++wrong <= 5) FAIL_CHECK(fmt << " '" << text << "': got " << (ok ? std::to_string(got) : "false") << ", want " << want);
  }
  CHECK(checked > 30000);
  CHECK(wrong == 0);
  // Each explicit format refuses the others' texts.
  std::int64_t t;
  CHECK_FALSE(parse_time("2013:06:14 12:34:56", TimeFormat::iso8601, t));
  CHECK_FALSE(parse_time("2013-06-14 12:34:56", TimeFormat::exif, t));
  CHECK_FALSE(parse_time("1371213296", TimeFormat::exif, t));
  CHECK_FALSE(parse_time("2013:06:14", TimeFormat::exif, t));
  CHECK_FALSE(parse_time("2013:02:29 00:00:00", TimeFormat::exif, t));
  CHECK_FALSE(parse_time("2013:06:14 12:34:56 +2:00", TimeFormat::automatic, t));
  CHECK_FALSE(time_is_ambiguous("1371213296"));
  CHECK(time_is_ambiguous("20130614123456"));
}

TEST_CASE("a mapped CSV's errors name the file, the line, the column and the value", "[geo][csv][columns]") {
  const fs::path dir = scratch_dir("geo_csv_columns_errors");
  const fs::path csv = dir / "mine.csv";
  write_file(csv,
             "photo_id,lat,lon,taken,owner\n"
             "a1,40.75,-73.98,2013:06:14 12:00:00,alice\n"
             "7,40.75,-73.98,2013:06:14 25:00:00,bob\n"
             "8,40.75,-73.98,20130614,carol\n"
             "9,40.75,-73.98,yesterday,dave\n"
             ",40.75,-73.98,2013:06:14 12:00:00,erin\n"
             "10,40.75,-73.98,1371213296.5,frank\n");
  CsvReadOptions o;
  o.columns = {{"id", "photo_id"}, {"time", "taken"}, {"user", "owner"}};
  const std::string p = csv.string();

  SECTION("a header name the file lacks: the header line and the closest name") {
    CsvReadOptions m = o;
    m.columns[1].second = "takn";
    const std::string e = error_of(csv, m);
    CHECK_THAT(e, Catch::Contains(p + ":1: columns maps 'time' to 'takn', but the header has no such column; did you mean 'taken'?"));
    CHECK_THAT(e, Catch::Contains("(header: photo_id, lat, lon, taken, owner)"));
    m.columns[1].second = "when";
    CHECK_THAT(error_of(csv, m), Catch::Contains(p + ":1: columns maps 'time' to 'when', but the header has no such column (header:"));
  }
  SECTION("an unknown field, two fields on one column, an unmapped field without its default name") {
    CsvReadOptions m = o;
    m.columns.emplace_back("acuracy", "lat");
    CHECK_THAT(error_of(csv, m), Catch::Contains(p + ": columns: unknown field 'acuracy'; did you mean 'accuracy'?"));
    m = o;
    m.columns.emplace_back("title", "owner");
    CHECK_THAT(error_of(csv, m), Catch::Contains(p + ":1: columns maps both 'user' and 'title' to column 'owner'"));
    m = o;
    m.columns.pop_back();  // user unmapped, and the header's 'owner' is one of its default names
    CHECK_NOTHROW(read_photos_csv(p, [&] { CsvReadOptions s = m; s.skip_bad_rows = true; return s; }()));
    m.columns.pop_back();  // time unmapped: the header has no 'time' column
    CHECK_THAT(error_of(csv, m), Catch::Contains(p + ":1: header has no 'time' column"));
    CHECK_THAT(error_of(csv, m), Catch::Contains("columns: {time: <header name>}"));
  }
  SECTION("bad values under on_bad_row: error stop at the first, under skip are counted with their locations") {
    CHECK_THAT(error_of(csv, o), Catch::Contains(p + ":2: id (column 'photo_id') 'a1' is not an integer (id_from: hash derives ids from text)"));
    CsvReadOptions skip = o;
    skip.skip_bad_rows = true;
    CsvReadStats stats;
    const PhotoColumns kept = read_photos_csv(p, skip, &stats);
    CHECK(kept.id == std::vector<std::int64_t>{10});
    CHECK(kept.time == std::vector<std::int64_t>{1371213296});
    CHECK(stats.bad_rows == 5);
    REQUIRE(stats.first_bad.size() == 5);
    CHECK_THAT(stats.first_bad[0], Catch::Contains(p + ":2: id (column 'photo_id') 'a1' is not an integer"));
    CHECK_THAT(stats.first_bad[1], Catch::Contains(p + ":3: time (column 'taken') '2013:06:14 25:00:00' is not ISO 8601, an EXIF date-time or unix seconds"));
    CHECK_THAT(stats.first_bad[2], Catch::Contains(p + ":4: time (column 'taken') '20130614' is ambiguous: unix seconds or the compact date-time 2013-06-14 (time_format: unix or iso decides)"));
    CHECK_THAT(stats.first_bad[3], Catch::Contains(p + ":5: time (column 'taken') 'yesterday' is not"));
    CHECK_THAT(stats.first_bad[4], Catch::Contains(p + ":6: id (column 'photo_id') '' is not an integer"));
    // Each explicit format names itself; the hashed ids take the text rows and refuse the empty one.
    skip.time_format = TimeFormat::exif;
    skip.id_from = IdSource::hash;
    const PhotoColumns exif = read_photos_csv(p, skip, &stats);
    CHECK(exif.size() == 1);
    CHECK(exif.time == std::vector<std::int64_t>{1371211200});
    CHECK_THAT(stats.first_bad[0], Catch::Contains(p + ":3: time (column 'taken') '2013:06:14 25:00:00' is not an EXIF date-time YYYY:MM:DD HH:MM:SS[+HH:MM]"));
    CHECK_THAT(stats.first_bad[1], Catch::Contains(p + ":4: time (column 'taken') '20130614' is not an EXIF date-time"));
    CHECK_THAT(stats.first_bad[3], Catch::Contains(p + ":6: id (column 'photo_id') is empty"));
    CHECK_THAT(stats.first_bad[4], Catch::Contains(p + ":7: time (column 'taken') '1371213296.5' is not an EXIF date-time"));
    skip.time_format = TimeFormat::unix_seconds;
    const PhotoColumns unix_times = read_photos_csv(p, skip, &stats);
    CHECK(unix_times.time == std::vector<std::int64_t>{20130614, 1371213296});
    CHECK_THAT(stats.first_bad[0], Catch::Contains(p + ":2: time (column 'taken') '2013:06:14 12:00:00' is not unix seconds"));
    skip.time_format = TimeFormat::iso8601;
    const PhotoColumns iso = read_photos_csv(p, skip, &stats);
    CHECK(iso.time == std::vector<std::int64_t>{1371168000});
    CHECK_THAT(stats.first_bad[0], Catch::Contains(p + ":2: time (column 'taken') '2013:06:14 12:00:00' is not an ISO 8601 date-time"));
  }
  SECTION("through the CLI: a bad mapping at validation, a missing header at run time") {
    const std::string head = "seed: 1\nnodes:\n  photos: {type: geo.csv_photos, params: {path: " + p + ", ";
    const std::string tail = "}}\n  show: {type: core.sink, params: {mode: count}}\nedges: [photos.out -> show]\n";
    Result r = validate_in(dir, "typo.yaml", head + "columns: {tme: taken, id: photo_id}" + tail);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("typo.yaml:3"));
    CHECK_THAT(r.err, Catch::Contains("columns: unknown field 'tme'; did you mean 'time'?"));
    r = validate_in(dir, "list.yaml", head + "columns: [photo_id]" + tail);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("columns: expected a map from field"));
    r = validate_in(dir, "twice.yaml", head + "columns: {id: photo_id, user: Photo_ID}" + tail);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("columns: fields 'id' and 'user' both read column 'Photo_ID'"));
    write_file(dir / "missing.yaml", head + "columns: {id: photo_id, time: taken, user: ownr}" + tail);
    r = run_cli_in(dir, {"run", "missing.yaml", "--no-cache"});
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains(p + ":1: columns maps 'user' to 'ownr', but the header has no such column; did you mean 'owner'?"));
  }
}
