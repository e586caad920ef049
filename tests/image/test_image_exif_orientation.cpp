// EXIF Orientation on every decode path (image.files_reader, image.decode_by_id), against PIL:
// PIL writes a JPEG and a PNG (eXIf chunk) for each of the 8 orientations, and its own decode
// followed by ImageOps.exif_transpose is the oracle, pixel for pixel (tolerance 0: PIL and
// OpenCV decode with the same libjpeg-turbo). exif_orientation: false gives the stored pixels.
#include <catch2/catch.hpp>

#include <fstream>

#include "core/exif.hpp"
#include "core/image_files.hpp"
#include "image_test_util.hpp"

using namespace embedflow;
using namespace embedflow::test;
namespace fs = std::filesystem;

namespace {

// 8 JPEGs and 8 PNGs, ids 1-8 and 11-18 for orientations 1-8. Upright, each is 40 x 24 (w x h):
// orientations 5-8 are stored 24 x 40, as a camera held sideways stores them.
void write_oriented_photos(const fs::path& dir) {
  check_python(R"PY(
import io, os, sys
import numpy as np
from PIL import Image
d = sys.argv[1]
rng = np.random.default_rng(5)
rows = ["id,lat,lon,time,user,path"]
for o in range(1, 9):
    w, h = (40, 24) if o <= 4 else (24, 40)
    # Smooth colour gradients plus an asymmetric block, so any turn or mirror changes the pixels.
    y, x = np.mgrid[0:h, 0:w]
    a = np.stack([x * 255 // w, y * 255 // h, (x + 2 * y) * 255 // (w + 2 * h)], -1).astype(np.uint8)
    a[1:6, 2:9] = [250, 20, 20]
    a = (a.astype(int) + rng.integers(-6, 7, a.shape)).clip(0, 255).astype(np.uint8)
    ex = Image.Exif(); ex[0x0112] = o
    Image.fromarray(a).save(f"{d}/o{o}.jpg", quality=92, exif=ex.tobytes())
    Image.fromarray(a).save(f"{d}/o{o}.png", exif=ex.tobytes())
    rows.append(f"{o},40.7,-74.0,2015-06-01T12:00:00,u,o{o}.jpg")
    rows.append(f"{o + 10},40.7,-74.0,2015-06-01T12:00:00,u,o{o}.png")
open(f"{d}/list.csv", "w").write("\n".join(rows) + "\n")
)PY",
               {dir.string()});
}

// Writes each record's image (u8 [H,W,C] or [B,H,W,C]) under its id as raw bytes plus a shape line.
void dump(const std::vector<RecordPtr>& records, const std::string& id_field, const fs::path& out) {
  fs::create_directories(out);
  for (const auto& r : records) {
    const Array& img = r->get("image");
    const Array& ids = r->get(id_field);
    const bool batch = img.shape().size() == 4;
    const std::int64_t n = batch ? img.dim(0) : 1;
    const std::size_t per = static_cast<std::size_t>(img.numel() / n);
    for (std::int64_t k = 0; k < n; ++k) {
      const std::int64_t id = ids.data<std::int64_t>()[k];
      const std::int64_t h = img.dim(batch ? 1 : 0), w = img.dim(batch ? 2 : 1), c = img.dim(batch ? 3 : 2);
      std::ofstream f(out / (std::to_string(id) + ".raw"), std::ios::binary);
      f << h << " " << w << " " << c << "\n";
      f.write(reinterpret_cast<const char*>(img.data<std::uint8_t>() + per * static_cast<std::size_t>(k)),
              static_cast<std::streamsize>(per));
    }
  }
}

// The oracle: PIL decodes the same file, then ImageOps.exif_transpose (or not); tolerance 0.
const char* kCompare = R"PY(
import sys, os
import numpy as np
from PIL import Image, ImageOps
folder, dumped, transpose = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
bad = []; checked = 0
for o in range(1, 9):
    for id_, ext in ((o, "jpg"), (o + 10, "png")):
        im = Image.open(f"{folder}/o{o}.{ext}")
        want = np.asarray((ImageOps.exif_transpose(im) if transpose else im).convert("RGB"))
        raw = open(f"{dumped}/{id_}.raw", "rb").read()
        head, data = raw.split(b"\n", 1)
        h, w, c = map(int, head.split())
        got = np.frombuffer(data, np.uint8).reshape(h, w, c)
        checked += 1
        if got.shape != want.shape: bad.append(f"o{o}.{ext}: shape {got.shape} != PIL {want.shape}"); continue
        diff = int(np.abs(got.astype(int) - want.astype(int)).max())
        if diff: bad.append(f"o{o}.{ext}: max difference {diff} from PIL")
print("checked", checked)
for b in bad: print("PROBLEM:", b)
sys.exit(1 if bad else 0)
)PY";

}  // namespace

TEST_CASE("exif_orientation reads the Orientation tag of JPEG APP1 and PNG eXIf written by PIL", "[image][exif]") {
  const fs::path dir = scratch_dir("exif_orientation_tag");
  write_oriented_photos(dir);
  for (int o = 1; o <= 8; ++o)
    for (const char* ext : {".jpg", ".png"}) {
      std::vector<unsigned char> bytes;
      std::string error;
      REQUIRE(image::read_file_bytes((dir / ("o" + std::to_string(o) + ext)).string(), bytes, error));
      INFO(o << ext);
      CHECK(image::exif_orientation(bytes.data(), bytes.size()) == o);
    }
}

TEST_CASE("the EXIF block is found after an XMP APP1 segment and a large APP2; a JPEG without EXIF has orientation 1",
          "[image][exif]") {
  const fs::path dir = scratch_dir("exif_orientation_segments");
  check_python(R"PY(
import io, struct, sys
from PIL import Image
d = sys.argv[1]
ex = Image.Exif(); ex[0x0112] = 8
buf = io.BytesIO(); Image.new("RGB", (8, 8), (9, 99, 199)).save(buf, "JPEG", exif=ex.tobytes()); j = buf.getvalue()
def seg(marker, payload): return b"\xff" + bytes([marker]) + struct.pack(">H", len(payload) + 2) + payload
xmp = seg(0xE1, b"http://ns.adobe.com/xap/1.0/\0<x:xmpmeta/>")
icc = seg(0xE2, b"ICC_PROFILE\0\1\1" + bytes(60000))
open(d + "/xmp_first.jpg", "wb").write(j[:2] + xmp + icc + j[2:])
assert Image.open(d + "/xmp_first.jpg").getexif()[0x0112] == 8
plain = io.BytesIO(); Image.new("RGB", (8, 8)).save(plain, "JPEG"); open(d + "/plain.jpg", "wb").write(plain.getvalue())
)PY",
               {dir.string()});
  for (const auto& [name, want] : {std::pair<const char*, int>{"xmp_first.jpg", 8}, {"plain.jpg", 1}}) {
    std::vector<unsigned char> bytes;
    std::string error;
    REQUIRE(image::read_file_bytes((dir / name).string(), bytes, error));
    INFO(name);
    CHECK(image::exif_orientation(bytes.data(), bytes.size()) == want);
    // The block starts past the first 8 KiB here: a reader given only those asks for more.
    const image::ExifBlock first = image::locate_exif_block(bytes.data(), std::min<std::size_t>(bytes.size(), 8192));
    CHECK(first.status == (want == 8 ? image::ExifBlock::Status::need_more : image::ExifBlock::Status::absent));
  }
}

TEST_CASE("image.files_reader turns all 8 EXIF orientations upright exactly as PIL's exif_transpose, JPEG and PNG",
          "[image][exif]") {
  const fs::path dir = scratch_dir("exif_orientation_files_reader");
  write_oriented_photos(dir);
  for (const bool on : {true, false}) {
    const std::string yaml = "nodes:\n  read: {type: image.files_reader, params: {csv: " + (dir / "list.csv").string() +
                             ", mode: color, exif_orientation: " + (on ? "true" : "false") +
                             "}}\n  sink: {type: core.sink, params: {mode: count}}\nedges: [read.out -> sink.in]\n";
    GraphRun run = GraphRunner(plugins(), yaml, "g.yaml").collect("read").threads(2).run();
    INFO(run.message());
    REQUIRE(run.exit_code == 0);
    const fs::path out = dir / (on ? "on" : "off");
    dump(run.records("read"), "id", out);
    const Result py = check_python(kCompare, {dir.string(), out.string(), on ? "1" : "0"});
    CHECK_THAT(py.out, Catch::Contains("checked 16"));
  }
}

TEST_CASE("image.decode_by_id turns all 8 EXIF orientations upright exactly as PIL's exif_transpose, JPEG and PNG",
          "[image][exif]") {
  const fs::path dir = scratch_dir("exif_orientation_decode_by_id");
  write_oriented_photos(dir);
  // Every photo is 40 x 24 upright, so decoding to that size leaves the pixels unresampled.
  const std::string yaml = "nodes:\n  photos: {type: geo.csv_photos, params: {path: " + (dir / "list.csv").string() +
                           ", batch_size: 4}}\n  decode: {type: image.decode_by_id, params: {path_field: path, root: " +
                           dir.string() + ", height: 24, width: 40}}\n  sink: {type: core.sink, params: {mode: count}}\n"
                           "edges: [photos.out -> decode.in, decode.out -> sink.in]\n";
  GraphRun run = GraphRunner(plugins(), yaml, "g.yaml").collect("decode").threads(2).run();
  INFO(run.message());
  REQUIRE(run.exit_code == 0);
  dump(run.records("decode"), "id", dir / "out");
  const Result py = check_python(kCompare, {dir.string(), (dir / "out").string(), "1"});
  CHECK_THAT(py.out, Catch::Contains("checked 16"));
}

TEST_CASE("decoding to a smaller size turns before resizing: an oriented JPEG resizes as its upright copy does",
          "[image][exif]") {
  // The oracle for the resize: PIL's upright pixels of each JPEG saved as a PNG without EXIF,
  // decoded and resized by the same node. dct_scaling: false must match exactly (turn, then the
  // same resize); with DCT reduction (the JPEG decoded at half size, chosen against the upright
  // size) the two differ only by the reduction's filter.
  const fs::path dir = scratch_dir("exif_orientation_resize");
  write_oriented_photos(dir);
  check_python(R"PY(
import sys
from PIL import Image, ImageOps
d = sys.argv[1]
rows = ["id,lat,lon,time,user,path"]
for o in range(1, 9):
    ImageOps.exif_transpose(Image.open(f"{d}/o{o}.jpg")).convert("RGB").save(f"{d}/upright{o}.png")
    rows.append(f"{o},40.7,-74.0,2015-06-01T12:00:00,u,o{o}.jpg")
    rows.append(f"{o + 10},40.7,-74.0,2015-06-01T12:00:00,u,upright{o}.png")
open(f"{d}/resize.csv", "w").write("\n".join(rows) + "\n")
)PY",
               {dir.string()});
  for (const bool dct : {false, true}) {
    const std::string yaml = "nodes:\n  photos: {type: geo.csv_photos, params: {path: " + (dir / "resize.csv").string() +
                             "}}\n  decode: {type: image.decode_by_id, params: {path_field: path, height: 12, width: 20, dct_scaling: " +
                             (dct ? "true" : "false") + "}}\n  sink: {type: core.sink, params: {mode: count}}\n"
                             "edges: [photos.out -> decode.in, decode.out -> sink.in]\n";
    GraphRun run = GraphRunner(plugins(), yaml, "g.yaml").collect("decode").threads(2).run();
    INFO(run.message());
    REQUIRE(run.exit_code == 0);
    const fs::path out = dir / (dct ? "dct" : "exact");
    dump(run.records("decode"), "id", out);
    const Result py = check_python(R"PY(
import sys
import numpy as np
out, tolerance = sys.argv[1], float(sys.argv[2])
def load(i):
    head, data = open(f"{out}/{i}.raw", "rb").read().split(b"\n", 1)
    return np.frombuffer(data, np.uint8).reshape(*map(int, head.split())).astype(int)
worst = 0.0
for o in range(1, 9):
    a, b = load(o), load(o + 10)
    assert a.shape == (12, 20, 3) and b.shape == a.shape, (o, a.shape, b.shape)
    worst = max(worst, float(np.abs(a - b).mean()))
print("worst mean difference", worst)
sys.exit(0 if worst <= tolerance else 1)
)PY",
                                   {out.string(), dct ? "6" : "0"});
    CHECK_THAT(py.out, Catch::Contains("worst mean difference"));
  }
}
