// geo.photo_folder against independent readers of the same files: exiftool -n (every field of
// every photo of a folder rendered by gen_photos --exif), the metadata CSV gen_photos wrote for
// those photos, Python's hashlib for the ids and datetime for the times; photos written by a
// hand-made TIFF/EXIF writer in Python (struct.pack, no EXIF library) for the fallbacks and every
// kind of bad input; HEIC files written with libheif's encoder; gen_photos --exif's turned pixels
// against its plain render; the header index re-reading only what changed.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "cli.hpp"
#include "photo_folder.hpp"

using namespace embedflow::test;
namespace fs = std::filesystem;

namespace {

// Writes `yaml` to dir/name and runs it (not --quiet: the tests read the reader's log lines).
Result run_folder_graph(const fs::path& dir, const std::string& name, const std::string& yaml) {
  write_file(dir / name, yaml);
  return run_cli({"run", (dir / name).string(), "--no-cache", "--no-report", "--out", (dir / "run").string()});
}
Result run_folder_graph_ok(const fs::path& dir, const std::string& name, const std::string& yaml) {
  Result r = run_folder_graph(dir, name, yaml);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return r;
}

// A graph reading `dir` into an HDF5 table `out` (group photos); `params` adds node parameters.
std::string folder_graph(const fs::path& dir, const fs::path& out, const std::string& params = "") {
  return "seed: 1\nnodes:\n  photos: {type: geo.photo_folder, params: {dir: " + dir.string() + params +
         "}}\n  save: {type: io.hdf5_writer, params: {path: " + out.string() + ", group: photos}}\nedges: [photos.out -> save]\n";
}

// Hand-made EXIF in Python: TIFF IFDs packed with struct, inserted as APP1 after the SOI of a JPEG
// PIL encodes. Tags are (tag, type, count, payload bytes); types 2 ASCII, 3 SHORT, 5 RATIONAL.
const char* kExifWriter = R"PY(
import io, struct, sys, os
from PIL import Image

def ascii(tag, text): b = text.encode() + b"\0"; return (tag, 2, len(b), b)
def short(tag, v, bo): return (tag, 3, 1, struct.pack(bo + "H", v))
def rationals(tag, pairs, bo): return (tag, 5, len(pairs), b"".join(struct.pack(bo + "II", n, d) for n, d in pairs))
def dms(deg): # whole degrees, minutes, seconds/10000
    t = round(abs(deg) * 36000000); return [(t // 36000000, 1), (t // 600000 % 60, 1), (t % 600000, 10000)]

def tiff(ifd0, exif, gps, bo):
    # Layout: header, IFD0, EXIF IFD, GPS IFD, then every value longer than 4 bytes.
    def size(entries): return 2 + 12 * len(entries) + 4
    ifd0 = list(ifd0)
    if exif: ifd0.append((0x8769, 4, 1, None))
    if gps: ifd0.append((0x8825, 4, 1, None))
    ifds = [sorted(ifd0, key=lambda e: e[0]), sorted(exif, key=lambda e: e[0]), sorted(gps, key=lambda e: e[0])]
    offs = [8]; offs.append(offs[0] + size(ifds[0])); offs.append(offs[1] + (size(ifds[1]) if exif else 0))
    data_at = offs[2] + (size(ifds[2]) if gps else 0)
    out = bytearray((b"II*\0" if bo == "<" else b"MM\0*") + struct.pack(bo + "I", 8)); extra = bytearray()
    for k, entries in enumerate(ifds):
        if k and not entries: continue
        out += struct.pack(bo + "H", len(entries))
        for tag, typ, count, payload in entries:
            if payload is None: payload = struct.pack(bo + "I", offs[1] if tag == 0x8769 else offs[2])
            if len(payload) <= 4: out += struct.pack(bo + "HHI", tag, typ, count) + payload.ljust(4, b"\0")
            else:
                out += struct.pack(bo + "HHII", tag, typ, count, data_at + len(extra)); extra += payload
                if len(extra) % 2: extra += b"\0"
        out += struct.pack(bo + "I", 0)
    return bytes(out + extra)

def jpeg_with(block, color=(90, 120, 200)):
    buf = io.BytesIO(); Image.new("RGB", (16, 12), color).save(buf, "JPEG", quality=90); j = buf.getvalue()
    seg = b"Exif\0\0" + block
    return j[:2] + b"\xff\xe1" + struct.pack(">H", len(seg) + 2) + seg + j[2:]

def photo(lat=40.75, lon=-73.98, lat_ref=None, lon_ref=None, when="2015:06:01 12:00:00", offset="+02:00", artist=None,
          serial=None, hpe=None, bo=">", lat_r=None, lon_r=None, drop=()):
    gps = [ascii(1, lat_ref or ("N" if lat >= 0 else "S")), rationals(2, lat_r or dms(lat), bo),
           ascii(3, lon_ref or ("E" if lon >= 0 else "W")), rationals(4, lon_r or dms(lon), bo)]
    if hpe is not None: gps.append(rationals(0x1f, [hpe], bo))
    gps = [g for g in gps if g[0] not in drop]
    exif = [ascii(0x9003, when)] if when else []
    if offset: exif.append(ascii(0x9011, offset))
    if serial: exif.append(ascii(0xa431, serial))
    ifd0 = [short(0x112, 1, bo)] + ([ascii(0x13b, artist)] if artist else [])
    return jpeg_with(tiff(ifd0, exif, gps, bo))
)PY";

}  // namespace

TEST_CASE("photo ids are SHA-256 of the relative path, as hashlib computes them", "[geo][photo_folder]") {
  const Result py = check_python(R"(
import hashlib
for rel in ["a.jpg", "trip/2019/IMG_0001.HEIC", "caf\u00e9/\u00fcber.png"]:
    print(int.from_bytes(hashlib.sha256(rel.encode()).digest()[:8], "big") & (2**63 - 1))
)");
  std::istringstream lines(py.out);
  for (const std::string rel : {"a.jpg", "trip/2019/IMG_0001.HEIC", "caf\xc3\xa9/\xc3\xbc" "ber.png"}) {
    std::string want;
    std::getline(lines, want);
    CHECK(std::to_string(embedflow::geo::photo_id(rel)) == want);
  }
}

TEST_CASE("geo.photo_folder on gen_photos --exif JPEGs equals exiftool -n and the metadata CSV, field by field",
          "[geo][photo_folder]") {
  const fs::path dir = scratch_dir("photo_folder_exiftool");
  const Result gen = run_process({GEN_PHOTOS, "--rows", "40", "--seed", "5", "--out", (dir / "meta.csv").string(), "--images",
                                  (dir / "img").string(), "--image-size", "64", "--exif"});
  INFO(gen.err);
  REQUIRE(gen.exit_code == 0);
  run_folder_graph_ok(dir, "g.yaml", folder_graph(dir / "img", dir / "out.h5", ", header_index: \"off\""));
  const Result py = check_python(R"PY(
import csv, hashlib, json, os, subprocess, sys
from datetime import datetime, timedelta, timezone
import h5py, numpy as np
folder, out, meta = sys.argv[1:4]
# The GPS group's own tags (unsigned degrees), not exiftool's signed composites.
tool = json.loads(subprocess.run(["exiftool", "-n", "-json", "-r", "-GPS:GPSLatitude", "-GPS:GPSLongitude", "-GPSLatitudeRef",
    "-GPSLongitudeRef", "-DateTimeOriginal", "-OffsetTimeOriginal", "-Artist", "-GPSHPositioningError", folder],
    check=True, capture_output=True, text=True).stdout)
rows = {r["image"]: r for r in csv.DictReader(open(meta))}
g = h5py.File(out, "r")["photos"]
got = {p.decode(): k for k, p in enumerate(g["path"][:])}
problems = []
if len(got) != len(tool): problems.append(f"{len(got)} rows, exiftool saw {len(tool)} files")
for t in tool:
    path = t["SourceFile"]; k = got.get(path)
    if k is None: problems.append(f"{path}: not emitted"); continue
    rel = os.path.relpath(path, folder)
    want_id = int.from_bytes(hashlib.sha256(rel.encode()).digest()[:8], "big") & (2**63 - 1)
    # exiftool -n gives GPSLatitude unsigned; the reference carries the sign.
    lat = t["GPSLatitude"] * (-1 if t["GPSLatitudeRef"] == "S" else 1)
    lon = t["GPSLongitude"] * (-1 if t["GPSLongitudeRef"] == "W" else 1)
    off = t["OffsetTimeOriginal"]; sign = -1 if off[0] == "-" else 1
    tz = timezone(sign * timedelta(hours=int(off[1:3]), minutes=int(off[4:6])))
    when = int(datetime.strptime(t["DateTimeOriginal"], "%Y:%m:%d %H:%M:%S").replace(tzinfo=tz).timestamp())
    acc = int(np.ceil(t["GPSHPositioningError"]))
    checks = [("id", int(g["id"][k]), want_id), ("time", int(g["time"][k]), when), ("user", g["user"][k].decode(), t["Artist"]),
              ("accuracy", int(g["accuracy"][k]), acc)]
    for name, a, b in checks:
        if a != b: problems.append(f"{rel}: {name} {a} != exiftool {b}")
    if abs(g["lat"][k] - lat) > 1e-9 or abs(g["lon"][k] - lon) > 1e-9:
        problems.append(f"{rel}: position {g['lat'][k]},{g['lon'][k]} != exiftool {lat},{lon}")
    # The metadata row gen_photos wrote for this photo: the same place (to its 6 decimals), time and user.
    r = rows["img/" + rel]
    csv_time = int(datetime.fromisoformat(r["time"]).replace(tzinfo=timezone.utc).timestamp())
    if abs(g["lat"][k] - float(r["lat"])) > 1e-6 or abs(g["lon"][k] - float(r["lon"])) > 1e-6: problems.append(f"{rel}: position != CSV")
    if int(g["time"][k]) != csv_time: problems.append(f"{rel}: time {g['time'][k]} != CSV {csv_time}")
    if g["user"][k].decode() != r["user"]: problems.append(f"{rel}: user != CSV")
    # gen_photos writes New York's local time; its offset must be the one the tz database gives.
    from zoneinfo import ZoneInfo
    ny = datetime.fromtimestamp(csv_time, ZoneInfo("America/New_York")).utcoffset()
    if ny != sign * timedelta(hours=int(off[1:3]), minutes=int(off[4:6])): problems.append(f"{rel}: offset {off} != tz database {ny}")
if list(g["path"][:]) != sorted(g["path"][:]): problems.append("rows not in path order")
print("checked", len(tool), "photos")
for p in problems: print("PROBLEM:", p)
sys.exit(1 if problems else 0)
)PY",
                                 {(dir / "img").string(), (dir / "out.h5").string(), (dir / "meta.csv").string()});
  CHECK_THAT(py.out, Catch::Contains("checked 40 photos"));
}

TEST_CASE("geo.photo_folder: fallbacks for the time zone and the user, S/W references, missing GPS skipped or an error",
          "[geo][photo_folder]") {
  const fs::path dir = scratch_dir("photo_folder_fallbacks");
  check_python(std::string(kExifWriter) + R"PY(
d = sys.argv[1]; os.makedirs(d + "/sub", exist_ok=True)
open(d + "/a.jpg", "wb").write(photo(lat=-33.8568, lon=151.2153, offset=None, artist="Ada", hpe=(1234, 100)))
open(d + "/sub/b.JPG", "wb").write(photo(lat=51.5, lon=-0.1, offset="-03:30", serial="SN-42", bo="<"))
open(d + "/c.jpeg", "wb").write(photo(lat=40.7, lon=-74.0, offset="+00:00", when="2016:02:29 23:59:59"))
open(d + "/nogps.jpg", "wb").write(jpeg_with(tiff([ascii(0x13b, "x")], [ascii(0x9003, "2015:06:01 12:00:00")], [], ">")))
buf = io.BytesIO(); Image.new("RGB", (8, 8)).save(buf, "PNG"); open(d + "/plain.png", "wb").write(buf.getvalue())
open(d + "/notes.txt", "w").write("not a photo")
)PY",
               {(dir / "photos").string()});
  const fs::path out = dir / "out.h5";
  const Result r = run_folder_graph_ok(dir, "g.yaml", folder_graph(dir / "photos", out, ", timezone: \"+09:00\", user: me, header_index: \"off\""));
  CHECK_THAT(r.err, Catch::Contains("3 of 5 photos emitted; 2 without a GPS position skipped, 0 bad files skipped, 1 without "
                                    "OffsetTimeOriginal timed at timezone +09:00, 1 other files ignored"));
  CHECK_THAT(r.err, Catch::Contains("photos/nogps.jpg: no GPS position in its EXIF"));
  CHECK_THAT(r.err, Catch::Contains("photos/plain.png: no EXIF"));
  check_python(R"PY(
import sys, h5py
from datetime import datetime, timezone, timedelta
g = h5py.File(sys.argv[1], "r")["photos"]
rows = {p.decode().rsplit("/photos/", 1)[1]: k for k, p in enumerate(g["path"][:])}
def unix(text, hours, minutes=0):
    return int(datetime.strptime(text, "%Y:%m:%d %H:%M:%S").replace(tzinfo=timezone(timedelta(hours=hours, minutes=minutes))).timestamp())
want = {
  "a.jpg": (-33.8568, 151.2153, unix("2015:06:01 12:00:00", 9), "Ada", 13),       # timezone fallback +09:00, 12.34 m -> 13
  "sub/b.JPG": (51.5, -0.1, unix("2015:06:01 12:00:00", -3, -30), "SN-42", -1),   # body serial, no accuracy
  "c.jpeg": (40.7, -74.0, unix("2016:02:29 23:59:59", 0), "me", -1),              # the user parameter
}
bad = []
for rel, (lat, lon, t, user, acc) in want.items():
    k = rows[rel]
    if abs(g["lat"][k] - lat) > 1e-7 or abs(g["lon"][k] - lon) > 1e-7: bad.append((rel, "position", g["lat"][k], g["lon"][k]))
    if g["time"][k] != t: bad.append((rel, "time", g["time"][k], t))
    if g["user"][k].decode() != user: bad.append((rel, "user", g["user"][k]))
    if g["accuracy"][k] != acc: bad.append((rel, "accuracy", g["accuracy"][k], acc))
print(bad); sys.exit(1 if bad or len(rows) != 3 else 0)
)PY",
               {out.string()});

  const Result strict = run_folder_graph(dir, "g2.yaml", folder_graph(dir / "photos", out, ", on_missing_gps: error, header_index: \"off\""));
  CHECK(strict.exit_code == 1);
  CHECK_THAT(strict.err, Catch::Contains("photos/nogps.jpg: no GPS position in its EXIF"));

  check_cli_fails({"validate", (dir / "g.yaml").string(), "--set", "photos.timezone=Europe/Paris"}, 2,
                  "timezone 'Europe/Paris' is not UTC or a fixed offset");
}

TEST_CASE("geo.photo_folder: every kind of bad file is located (file and tag), an error by default, counted under skip",
          "[geo][photo_folder]") {
  const fs::path dir = scratch_dir("photo_folder_bad");
  const fs::path photos = dir / "photos";
  check_python(std::string(kExifWriter) + R"PY(
d = sys.argv[1]; os.makedirs(d, exist_ok=True)
def w(name, data): open(d + "/" + name, "wb").write(data)
w("good.jpg", photo())
w("zero_den.jpg", photo(lat_r=[(40, 1), (10, 0), (0, 1)]))
w("out_of_range.jpg", photo(lat_r=[(95, 1), (0, 1), (0, 1)]))
w("huge_minutes.jpg", photo(lon_r=[(73, 1), (4294967295, 1), (0, 1)]))
w("no_lat_ref.jpg", photo(drop=(1,)))
w("bad_ref.jpg", photo(lon_ref="Q"))
w("bad_time.jpg", photo(when="2015:13:45 99:00:00"))
w("bad_offset.jpg", photo(offset="UTC+2"))
w("no_time.jpg", photo(when=None))
good = photo()
at = good.index(b"Exif\0\0")
w("corrupt_tiff.jpg", good[:at + 6] + b"XX" + good[at + 8:])      # the TIFF byte order mark destroyed
w("truncated.jpg", good[:at + 40])                                 # the file ends inside its APP1 segment
# IFD0's GPS pointer (big-endian TIFF at at + 6) moved past the end of the block.
ifd0 = at + 6 + 8; n = struct.unpack(">H", good[ifd0:ifd0 + 2])[0]
e = next(ifd0 + 2 + 12 * k for k in range(n) if struct.unpack(">H", good[ifd0 + 2 + 12 * k:ifd0 + 4 + 12 * k])[0] == 0x8825)
w("gps_pointer_out.jpg", good[:e + 8] + struct.pack(">I", 60000) + good[e + 12:])
w("not_really.heic", b"\0\0\0\x18ftypheic" + os.urandom(200))
)PY",
               {photos.string()});
  fs::create_directories(photos / "loop");
  fs::create_symlink("..", photos / "loop" / "up");
  fs::create_symlink("missing.jpg", photos / "dangling.jpg");
  REQUIRE(::mkfifo((photos / "pipe.jpg").c_str(), 0644) == 0);

  const fs::path out = dir / "out.h5";
  const std::string p = photos.string() + "/";
  struct Bad {
    std::string file, message;
  };
  const std::vector<Bad> bad = {
      {"zero_den.jpg", "GPSLatitude: zero denominator in component 2 (10/0)"},
      {"out_of_range.jpg", "GPSLatitude: 95.000000 degrees is outside [0, 90]"},
      {"huge_minutes.jpg", "GPSLongitude: minutes and seconds must be below 60"},
      {"no_lat_ref.jpg", "GPSLatitudeRef: missing"},
      {"bad_ref.jpg", "GPSLongitudeRef: 'Q' is not E or W"},
      {"bad_time.jpg", "DateTimeOriginal: '2015:13:45 99:00:00' is not YYYY:MM:DD HH:MM:SS"},
      {"bad_offset.jpg", "OffsetTimeOriginal: 'UTC+2' is not +HH:MM or -HH:MM"},
      {"no_time.jpg", "DateTimeOriginal: missing"},
      {"corrupt_tiff.jpg", "EXIF: no TIFF header"},
      {"truncated.jpg", "EXIF: the file ends at byte 46, before its metadata does"},
      {"gps_pointer_out.jpg", "EXIF: damaged, no GPS tag readable (ExifData: "},
      {"not_really.heic", embedflow::geo::heic_supported() ? "libheif cannot open it" : "this build has no HEIC support"},
      {"pipe.jpg", "is a FIFO, not a regular file"},
      {"dangling.jpg", "symbolic link cannot be followed (No such file or directory)"},
      {"loop/up", "symbolic link loop"},
  };
  // Skip: each counted and the first five named; the good photo still comes out.
  const Result r = run_folder_graph_ok(dir, "g.yaml", folder_graph(photos, out, ", on_bad_image: skip, header_index: \"off\""));
  CHECK_THAT(r.err, Catch::Contains("1 of 16 photos emitted; 0 without a GPS position skipped, 15 bad files skipped"));
  CHECK_THAT(r.err, Catch::Contains("skipped 15 bad files (on_bad_image: skip); first ones:"));
  check_python("import h5py, sys\ng = h5py.File(sys.argv[1])['photos']\nsys.exit(0 if [p.decode() for p in g['path'][:]] == [sys.argv[2]] else 1)\n",
               {out.string(), p + "good.jpg"});

  // Error (the default): each file alone next to the good one stops the run naming it and its tag.
  for (const Bad& b : bad) {
    const fs::path one = dir / ("one_" + fs::path(b.file).filename().string());
    fs::create_directories(one);
    fs::copy_file(photos / "good.jpg", one / "good.jpg");
    if (b.file == "loop/up") {
      fs::create_directories(one / "loop");
      fs::create_symlink("..", one / "loop" / "up");
    } else if (b.file == "pipe.jpg") {
      REQUIRE(::mkfifo((one / "pipe.jpg").c_str(), 0644) == 0);
    } else if (b.file == "dangling.jpg") {
      fs::create_symlink("missing.jpg", one / "dangling.jpg");
    } else {
      fs::copy_file(photos / b.file, one / b.file);
    }
    const Result e = run_folder_graph(dir, "e.yaml", folder_graph(one, dir / "e.h5", ", header_index: \"off\""));
    INFO(b.file << ": " << e.err);
    CHECK(e.exit_code == 1);
    CHECK_THAT(e.err, Catch::Contains((one / b.file).string() + ": " + b.message));
  }

  // An unreadable file: mode 000 stops any user but root; for root, a write-only sysfs attribute
  // refuses reading whatever the caller (kernfs checks the attribute's operations, not the mode).
  const fs::path locked = dir / "locked";
  fs::create_directories(locked);
  bool made = false;
  if (::geteuid() != 0) {
    fs::copy_file(photos / "good.jpg", locked / "secret.jpg");
    fs::permissions(locked / "secret.jpg", fs::perms::none);
    made = true;
  } else if (::access("/sys/bus/pci/rescan", F_OK) == 0) {
    fs::create_symlink("/sys/bus/pci/rescan", locked / "secret.jpg");
    made = true;
  }
  if (made) {
    const Result e = run_folder_graph(dir, "l.yaml", folder_graph(locked, dir / "l.h5", ", header_index: \"off\""));
    CHECK(e.exit_code == 1);
    CHECK_THAT(e.err, Catch::Contains("secret.jpg: cannot open (Permission denied)"));
  } else {
    WARN("no unreadable file could be made here (root, and no /sys/bus/pci/rescan): that case is untested");
  }
}

TEST_CASE("geo.photo_folder's header index: a re-run reads only added and changed files and emits what a fresh read does",
          "[geo][photo_folder]") {
  const fs::path dir = scratch_dir("photo_folder_index");
  const Result gen = run_process({GEN_PHOTOS, "--rows", "12", "--seed", "6", "--out", (dir / "meta.csv").string(), "--images",
                                  (dir / "img").string(), "--image-size", "48", "--exif"});
  INFO(gen.err);
  REQUIRE(gen.exit_code == 0);
  const fs::path img = dir / "img", index = dir / "index.h5";
  const std::string params = ", header_index: " + index.string();
  const Result first = run_folder_graph_ok(dir, "g.yaml", folder_graph(img, dir / "a.h5", params));
  CHECK_THAT(first.err, Catch::Contains("12 photo files, 0 headers from the index"));
  CHECK_THAT(first.err, Catch::Contains(", 12 read"));
  const Result again = run_folder_graph_ok(dir, "g.yaml", folder_graph(img, dir / "a.h5", params));
  CHECK_THAT(again.err, Catch::Contains("12 photo files, 12 headers from the index"));
  CHECK_THAT(again.err, Catch::Contains(", 0 read"));

  // Two photos added (copies under new names) and one replaced by another photo's bytes.
  fs::copy_file(img / "1.jpg", img / "new_a.jpg");
  fs::create_directories(img / "more");
  fs::copy_file(img / "2.jpg", img / "more" / "new_b.jpg");
  fs::copy_file(img / "7.jpg", img / "3.jpg", fs::copy_options::overwrite_existing);
  const Result third = run_folder_graph_ok(dir, "g.yaml", folder_graph(img, dir / "b.h5", params));
  CHECK_THAT(third.err, Catch::Contains("14 photo files, 11 headers from the index"));
  CHECK_THAT(third.err, Catch::Contains(", 3 read"));
  run_folder_graph_ok(dir, "g.yaml", folder_graph(img, dir / "fresh.h5", ", header_index: \"off\""));
  check_python(R"PY(
import sys, h5py, numpy as np
a, b = (h5py.File(p, "r")["photos"] for p in sys.argv[1:3])
bad = [f for f in ("id", "lat", "lon", "time", "user", "accuracy", "path") if not np.array_equal(a[f][:], b[f][:])]
print(bad, len(a["id"])); sys.exit(1 if bad or len(a["id"]) != 14 else 0)
)PY",
               {(dir / "b.h5").string(), (dir / "fresh.h5").string()});
  // The index itself is an HDF5 file h5py reads: one row per photo, keyed by path, size and mtime.
  check_python(R"PY(
import os, sys, h5py
g = h5py.File(sys.argv[1], "r")["headers"]
rel = sorted(p.decode() for p in g["rel_path"][:])
sizes = {p.decode(): s for p, s in zip(g["rel_path"][:], g["size"][:])}
ok = len(rel) == 14 and all(sizes[r] == os.path.getsize(os.path.join(sys.argv[2], r)) for r in rel)
print(rel); sys.exit(0 if ok else 1)
)PY",
               {index.string(), img.string()});
}

#ifdef EMBEDFLOW_TEST_HAVE_LIBHEIF
#include <libheif/heif.h>

namespace {

// A 64 x 48 HEIC (HEVC, libheif's encoder) carrying `exif` ("Exif\0\0" + TIFF) as its Exif item.
void write_heic(const fs::path& path, const std::string& exif) {
  heif_context* ctx = heif_context_alloc();
  heif_encoder* encoder = nullptr;
  REQUIRE(heif_context_get_encoder_for_format(ctx, heif_compression_HEVC, &encoder).code == heif_error_Ok);
  heif_image* img = nullptr;
  REQUIRE(heif_image_create(64, 48, heif_colorspace_RGB, heif_chroma_interleaved_RGB, &img).code == heif_error_Ok);
  REQUIRE(heif_image_add_plane(img, heif_channel_interleaved, 64, 48, 8).code == heif_error_Ok);
  int stride = 0;
  std::uint8_t* plane = heif_image_get_plane(img, heif_channel_interleaved, &stride);
  for (int y = 0; y < 48; ++y)
    for (int x = 0; x < 64 * 3; ++x) plane[y * stride + x] = static_cast<std::uint8_t>(x + 3 * y);
  heif_image_handle* handle = nullptr;
  REQUIRE(heif_context_encode_image(ctx, img, encoder, nullptr, &handle).code == heif_error_Ok);
  REQUIRE(heif_context_add_exif_metadata(ctx, handle, exif.data(), static_cast<int>(exif.size())).code == heif_error_Ok);
  REQUIRE(heif_context_write_to_file(ctx, path.c_str()).code == heif_error_Ok);
  heif_image_handle_release(handle);
  heif_image_release(img);
  heif_encoder_release(encoder);
  heif_context_free(ctx);
}

}  // namespace

TEST_CASE("geo.photo_folder reads the EXIF of HEIC files through libheif, as exiftool -n does", "[geo][photo_folder][heic]") {
  REQUIRE(embedflow::geo::heic_supported());
  const fs::path dir = scratch_dir("photo_folder_heic");
  fs::create_directories(dir / "photos");
  check_python(std::string(kExifWriter) + R"PY(
for name, kw in (("a.exif", dict(lat=48.8584, lon=2.2945, artist="Grace", offset="+01:00", hpe=(650, 100))),
                 ("b.exif", dict(lat=-22.9519, lon=-43.2105, serial="CAM-7", offset="-03:00", bo="<"))):
    j = photo(**kw); at = j.index(b"Exif\0\0"); n = struct.unpack(">H", j[at - 2:at])[0]
    open(sys.argv[1] + "/" + name, "wb").write(j[at:at + n - 2])
)PY",
               {dir.string()});
  write_heic(dir / "photos" / "IMG_1.HEIC", read_file(dir / "a.exif"));
  write_heic(dir / "photos" / "IMG_2.heic", read_file(dir / "b.exif"));
  run_folder_graph_ok(dir, "g.yaml", folder_graph(dir / "photos", dir / "out.h5", ", header_index: \"off\""));
  const Result py = check_python(R"PY(
import json, subprocess, sys
from datetime import datetime, timedelta, timezone
import h5py
folder, out = sys.argv[1:3]
tool = json.loads(subprocess.run(["exiftool", "-n", "-json", "-GPS:GPSLatitude", "-GPS:GPSLongitude", "-GPSLatitudeRef",
    "-GPSLongitudeRef", "-DateTimeOriginal", "-OffsetTimeOriginal", "-Artist", "-SerialNumber", "-GPSHPositioningError", folder],
    check=True, capture_output=True, text=True).stdout)
g = h5py.File(out, "r")["photos"]
rows = {p.decode(): k for k, p in enumerate(g["path"][:])}
bad = []
for t in tool:
    k = rows[t["SourceFile"]]
    lat = t["GPSLatitude"] * (-1 if t["GPSLatitudeRef"] == "S" else 1)
    lon = t["GPSLongitude"] * (-1 if t["GPSLongitudeRef"] == "W" else 1)
    off = t["OffsetTimeOriginal"]; sign = -1 if off[0] == "-" else 1
    when = int(datetime.strptime(t["DateTimeOriginal"], "%Y:%m:%d %H:%M:%S").replace(
        tzinfo=timezone(sign * timedelta(hours=int(off[1:3]), minutes=int(off[4:6])))).timestamp())
    user = t.get("Artist") or t.get("SerialNumber")
    acc = int(-(-t["GPSHPositioningError"] // 1)) if "GPSHPositioningError" in t else -1
    if abs(g["lat"][k] - lat) > 1e-9 or abs(g["lon"][k] - lon) > 1e-9: bad.append((t["SourceFile"], "position"))
    if g["time"][k] != when: bad.append((t["SourceFile"], "time", int(g["time"][k]), when))
    if g["user"][k].decode() != str(user): bad.append((t["SourceFile"], "user", g["user"][k], user))
    if g["accuracy"][k] != acc: bad.append((t["SourceFile"], "accuracy", int(g["accuracy"][k]), acc))
print("checked", len(tool), bad); sys.exit(1 if bad or len(tool) != 2 else 0)
)PY",
                                 {(dir / "photos").string(), (dir / "out.h5").string()});
  CHECK_THAT(py.out, Catch::Contains("checked 2 []"));
}
#endif

TEST_CASE("gen_photos --exif stores turned pixels whose Orientation tag (read by exiftool) gives back the upright render",
          "[geo][photo_folder][gen_photos]") {
  const fs::path dir = scratch_dir("gen_photos_exif_orientation");
  for (const bool exif : {false, true}) {
    std::vector<std::string> args{GEN_PHOTOS, "--rows", "24", "--seed", "8", "--out", (dir / (exif ? "e.csv" : "p.csv")).string(),
                                  "--images", (dir / (exif ? "exif" : "plain")).string(), "--image-size", "96"};
    if (exif) args.push_back("--exif");
    const Result gen = run_process(args);
    INFO(gen.err);
    REQUIRE(gen.exit_code == 0);
  }
  const Result py = check_python(R"PY(
import json, subprocess, sys
import numpy as np
from PIL import Image, ImageOps
d = sys.argv[1]
tool = {t["SourceFile"].rsplit("/", 1)[1]: t.get("Orientation") for t in json.loads(subprocess.run(
    ["exiftool", "-n", "-json", "-Orientation", d + "/exif"], check=True, capture_output=True, text=True).stdout)}
bad = []; seen = set(); worst = 0.0
for i in range(1, 25):
    name = f"{i}.jpg"; o = tool[name]; seen.add(o)
    plain = np.asarray(Image.open(f"{d}/plain/{name}").convert("RGB")).astype(float)
    stored = Image.open(f"{d}/exif/{name}")
    upright = np.asarray(ImageOps.exif_transpose(stored).convert("RGB")).astype(float)
    if upright.shape != plain.shape: bad.append(f"{name}: orientation {o} upright shape {upright.shape} != {plain.shape}"); continue
    diff = np.abs(upright - plain).mean(); worst = max(worst, diff)
    if diff > 3.5: bad.append(f"{name}: orientation {o}: upright differs from the plain render by {diff:.2f} on average")
    raw = np.asarray(stored.convert("RGB")).astype(float)
    if o != 1 and raw.shape == plain.shape and np.abs(raw - plain).mean() < 10: bad.append(f"{name}: orientation {o} but stored upright")
print("orientations", sorted(seen), "worst mean difference", round(worst, 2))
if sorted(seen) != list(range(1, 9)): bad.append(f"orientations {sorted(seen)}, not all of 1-8")
for b in bad: print("PROBLEM:", b)
sys.exit(1 if bad else 0)
)PY",
                                 {dir.string()});
  CHECK_THAT(py.out, Catch::Contains("orientations [1, 2, 3, 4, 5, 6, 7, 8]"));
}

TEST_CASE("geo.photo_folder with cache: true: the stage cache replays the table until the folder's listing changes",
          "[geo][photo_folder]") {
  const fs::path dir = scratch_dir("photo_folder_stage_cache");
  fs::create_directories(dir / "img");
  for (const auto& e : fs::directory_iterator(source_dir() + "/tests/geo/data/photo_folder"))
    fs::copy_file(e.path(), dir / "img" / e.path().filename());
  const std::string yaml = "nodes:\n  photos: {type: geo.photo_folder, params: {dir: " + (dir / "img").string() +
                           ", header_index: " + (dir / "index.h5").string() +
                           "}, cache: true}\n  sink: {type: core.sink, params: {mode: count}}\nedges: [photos.out -> sink.in]\n";
  write_file(dir / "g.yaml", yaml);
  const auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args{"run", (dir / "g.yaml").string(), "--no-report", "--out", (dir / "run").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    Result r = run_cli(args);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return r;
  };
  run({"--rebuild-cache"});
  CHECK_THAT(run({"--explain-cache", "--dry-run"}).err, Catch::Contains("photos: hit"));
  fs::copy_file(dir / "img" / "1.jpg", dir / "img" / "added.jpg");
  const Result plan = run({"--explain-cache", "--dry-run"});
  CHECK_THAT(plan.err, Catch::Contains("photos: miss"));
  CHECK_THAT(plan.err, Catch::Contains("directory files=8 listing="));
  const Result again = run({});
  CHECK_THAT(again.err, Catch::Contains("9 photo files, 8 headers from the index"));
  CHECK_THAT(again.err, Catch::Contains(", 1 read"));
}
