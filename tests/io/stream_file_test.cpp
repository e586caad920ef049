// embedflow_hdf5: stream files round-trip every dtype, interoperate with h5py and h5dump, and
// never leave a file at the final name that a reader trusts unless the writer committed.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <limits>
#include <set>
#include <thread>

#include "cli.hpp"
#include "embedflow/hdf5/stream_file.hpp"

using namespace embedflow;
using namespace embedflow::hdf5;
namespace fs = std::filesystem;
using embedflow::test::run_process;
using embedflow::test::run_python;
using embedflow::test::scratch_dir;

namespace {

Array bools(Shape shape, std::vector<std::uint8_t> v) {
  Array a = Array::zeros(DType::boolean, std::move(shape));
  std::copy(v.begin(), v.end(), static_cast<std::uint8_t*>(a.mutable_raw()));
  return a;
}

// One unbatched record with every dtype; values depend on i so records differ.
Record all_dtypes(std::int64_t i) {
  Record r;
  r.set("u8", Array::from_vector<std::uint8_t>({2, 3}, {1, 2, 3, 4, 5, static_cast<std::uint8_t>(200 + i)}));
  r.set("i32", Array::scalar<std::int32_t>(static_cast<std::int32_t>(-7 * i)));
  r.set("i64", Array::from_vector<std::int64_t>({2}, {i, (std::int64_t{1} << 40) + i}));
  r.set("f32", Array::from_vector<float>({3}, {0.5f * static_cast<float>(i), -1.25f, 3e-8f}));
  r.set("f64", Array::scalar<double>(1.0 / static_cast<double>(i + 3)));
  r.set("flag", bools({2}, {static_cast<std::uint8_t>(i % 2), 1}));
  r.set("name", Array::string_scalar("r\xc3\xa9" "cord " + std::to_string(i)));  // UTF-8 é
  return r;
}

// A batch of n rows with every dtype, numbered from `first`.
Record batch_of(std::int64_t first, std::int64_t n) {
  std::vector<std::int64_t> ids;
  std::vector<float> emb;
  std::vector<std::string> names;
  std::vector<std::uint8_t> flags;
  std::vector<std::uint8_t> pix;
  std::vector<std::int32_t> i32;
  std::vector<double> f64;
  for (std::int64_t k = first; k < first + n; ++k) {
    ids.push_back(k);
    emb.push_back(static_cast<float>(k));
    emb.push_back(static_cast<float>(-k));
    names.push_back("item-" + std::to_string(k));
    flags.push_back(static_cast<std::uint8_t>(k % 3 == 0));
    pix.push_back(static_cast<std::uint8_t>(k % 256));
    i32.push_back(static_cast<std::int32_t>(k * 3));
    f64.push_back(static_cast<double>(k) / 7.0);
  }
  Record r;
  r.set("id", Array::from_vector<std::int64_t>({n}, ids));
  r.set("embedding", Array::from_vector<float>({n, 2}, emb));
  r.set("name", Array::strings(names));
  r.set("flag", bools({n}, flags));
  r.set("pixel", Array::from_vector<std::uint8_t>({n}, pix));
  r.set("i32", Array::from_vector<std::int32_t>({n}, i32));
  r.set("f64", Array::from_vector<double>({n}, f64));
  return r;
}

// C++17 has no designated initialisers; these keep option tweaks on one line.
ReadOptions read_opts(const std::function<void(ReadOptions&)>& set) {
  ReadOptions o;
  set(o);
  return o;
}
WriterOptions write_opts(const std::function<void(WriterOptions&)>& set) {
  WriterOptions o;
  set(o);
  return o;
}

void require_same(const Record& got, const Record& want) {
  INFO("got " << got.describe() << " want " << want.describe());
  REQUIRE(got.size() == want.size());
  for (const auto& [name, a] : want.fields()) {
    INFO("field " << name);
    REQUIRE(got.get(name).equals(a));
  }
}

std::vector<RecordPtr> drain(Cursor c) {
  std::vector<RecordPtr> out;
  while (auto r = c.next()) out.push_back(r);
  return out;
}

}  // namespace

TEST_CASE("every dtype and string columns round-trip as records", "[hdf5]") {
  fs::path dir = scratch_dir("hdf5-records");
  fs::path file = dir / "records.h5";
  {
    StreamFileWriter w(file, {{"fingerprint", "abc123"}, {"graph", "g.yaml"}});
    for (std::int64_t i = 0; i < 100; ++i) w.append("out", all_dtypes(i));
    REQUIRE(w.records("out") == 100);
    REQUIRE_FALSE(fs::exists(file));  // nothing at the final name before commit
    w.commit();
  }
  REQUIRE(fs::exists(file));
  StreamFileReader r(file);
  REQUIRE(r.ports() == std::vector<std::string>{"out"});
  REQUIRE(r.attribute("fingerprint") == std::optional<std::string>("abc123"));
  REQUIRE(r.attribute("graph") == std::optional<std::string>("g.yaml"));
  REQUIRE(r.attribute("embedflow_version").has_value());
  REQUIRE(r.attribute("created").value().size() == 20);  // 2024-01-02T03:04:05Z
  const Table& t = r.port("out");
  REQUIRE(t.layout() == Layout::records);
  REQUIRE(t.records() == 100);
  REQUIRE(t.field("u8").inner == Shape{2, 3});
  REQUIRE(t.field("name").dtype == DType::string);
  REQUIRE(t.field("flag").dtype == DType::boolean);

  auto all = drain(r.replay("out"));
  REQUIRE(all.size() == 100);
  for (std::int64_t i = 0; i < 100; ++i) require_same(*all[static_cast<std::size_t>(i)], all_dtypes(i));
  // Field order is the record's, not HDF5's alphabetical link order.
  REQUIRE(all[0]->fields()[0].first == "u8");
  REQUIRE(all[0]->fields()[6].first == "name");
  // Random access.
  require_same(*r.read_record("out", 42), all_dtypes(42));
  REQUIRE_THROWS_AS(r.read_record("out", 100), DataError);
}

TEST_CASE("batches replay with their original sizes, every dtype", "[hdf5]") {
  fs::path file = scratch_dir("hdf5-batches") / "batches.h5";
  std::vector<std::int64_t> sizes{5, 3, 0, 7, 1};
  std::vector<Record> written;
  {
    StreamFileWriter w(file, {}, write_opts([](WriterOptions& o) { o.deflate_level = 4; o.chunk_bytes = 64; }));  // tiny chunks
    std::int64_t first = 0;
    for (auto n : sizes) {
      written.push_back(batch_of(first, n));
      w.append("pairs", written.back());
      first += n;
    }
    w.commit();
  }
  StreamFileReader r(file);
  const Table& t = r.port("pairs");
  REQUIRE(t.layout() == Layout::batches);
  REQUIRE(t.records() == 5);
  REQUIRE(t.rows() == 16);
  auto got = drain(r.replay("pairs", read_opts([](ReadOptions& o) { o.slab_bytes = 50; })));  // slabs smaller than a record
  REQUIRE(got.size() == sizes.size());
  for (std::size_t i = 0; i < sizes.size(); ++i) require_same(*got[i], written[i]);

  // Re-batching across record boundaries; start/stop count rows then.
  auto rebatched = drain(t.cursor(read_opts([](ReadOptions& o) { o.batch_size = 4; o.start = 2; o.stop = 15; })));
  REQUIRE(rebatched.size() == 4);  // 13 rows: 4 + 4 + 4 + 1
  REQUIRE(rebatched[3]->batch_size() == 1);
  REQUIRE(rebatched[0]->get("id").data<std::int64_t>()[0] == 2);
  REQUIRE(rebatched[3]->get("id").data<std::int64_t>()[0] == 14);
  REQUIRE(rebatched[1]->get("name").string_at(3) == "item-9");
  auto dropped = drain(t.cursor(read_opts([](ReadOptions& o) { o.batch_size = 4; o.drop_last = true; o.start = 2; o.stop = 15; })));
  REQUIRE(dropped.size() == 3);
  // Shuffled batches from compressed chunks (read and gathered, not mapped) keep rows whole.
  auto shuffled = drain(t.cursor(read_opts([](ReadOptions& o) { o.batch_size = 5; o.shuffle = true; o.seed = 9; })));
  std::set<std::int64_t> seen;
  for (const auto& b : shuffled)
    for (std::int64_t k = 0; k < b->batch_size(); ++k) {
      std::int64_t id = b->get("id").data<std::int64_t>()[k];
      seen.insert(id);
      REQUIRE(b->get("name").string_at(k) == "item-" + std::to_string(id));
      REQUIRE(b->get("embedding").data<float>()[2 * k + 1] == -static_cast<float>(id));
    }
  REQUIRE(seen.size() == 16);
  // Field selection.
  auto ids = drain(t.cursor(read_opts([](ReadOptions& o) { o.fields = {"name", "id"}; })));
  REQUIRE(ids[0]->size() == 2);
  REQUIRE(ids[0]->fields()[0].first == "name");
}

TEST_CASE("a record that does not match the port's first record is named", "[hdf5]") {
  fs::path file = scratch_dir("hdf5-mismatch") / "m.h5";
  StreamFileWriter w(file);
  w.append("out", all_dtypes(0));
  w.append("out", all_dtypes(1));
  Record bad = all_dtypes(2);
  bad.set("f32", Array::from_vector<float>({4}, {1, 2, 3, 4}));
  try {
    w.append("out", bad);
    FAIL("mismatched record accepted");
  } catch (const DataError& e) {
    std::string msg = e.what();
    REQUIRE_THAT(msg, Catch::Contains("m.h5") && Catch::Contains("port 'out' record 2") &&
                          Catch::Contains("'f32' is f32[4]") && Catch::Contains("f32: f32[3]"));
  }
  Record missing = all_dtypes(3);
  missing.erase("name");
  REQUIRE_THROWS_WITH(w.append("out", missing), Catch::Contains("record 2") && Catch::Contains("has fields"));
  Record retyped = all_dtypes(3);
  retyped.set("i32", Array::scalar<std::int64_t>(1));
  REQUIRE_THROWS_WITH(w.append("out", retyped), Catch::Contains("'i32' is i64[]"));
  // The rejected records left the port intact.
  w.append("out", all_dtypes(3));
  w.commit();
  StreamFileReader r(file);
  REQUIRE(r.port("out").records() == 3);
  require_same(*r.read_record("out", 2), all_dtypes(3));
}

TEST_CASE("a writer destroyed without commit leaves no file", "[hdf5]") {
  fs::path dir = scratch_dir("hdf5-abort");
  fs::path file = dir / "never.h5";
  fs::path temp;
  {
    StreamFileWriter w(file);
    temp = w.temp_path();
    for (int i = 0; i < 10; ++i) w.append("out", all_dtypes(i));
    REQUIRE(fs::exists(temp));
    REQUIRE(StreamFileWriter::temp_owner_pid(temp) == std::optional<long>(getpid()));
  }
  REQUIRE_FALSE(fs::exists(file));
  REQUIRE_FALSE(fs::exists(temp));
  REQUIRE(fs::is_empty(dir));
  REQUIRE_FALSE(StreamFileWriter::temp_owner_pid(file).has_value());
}

TEST_CASE("commit replaces an existing file atomically; append continues it", "[hdf5]") {
  fs::path file = scratch_dir("hdf5-append") / "a.h5";
  {
    StreamFileWriter w(file);
    for (int i = 0; i < 3; ++i) w.append("out", all_dtypes(i));
    w.commit();
  }
  {
    StreamFileWriter w(file, {}, write_opts([](WriterOptions& o) { o.append = true; }));
    REQUIRE(w.records("out") == 3);
    for (int i = 3; i < 5; ++i) w.append("out", all_dtypes(i));
    w.append("extra", batch_of(0, 4));
    // Until commit the original is untouched.
    REQUIRE(StreamFileReader(file).port("out").records() == 3);
    w.commit();
  }
  StreamFileReader r(file);
  REQUIRE(r.port("out").records() == 5);
  for (int i = 0; i < 5; ++i) require_same(*r.read_record("out", i), all_dtypes(i));
  require_same(*r.read_record("extra", 0), batch_of(0, 4));
  {
    StreamFileWriter w(file);  // overwrite
    w.append("out", all_dtypes(9));
    w.commit();
  }
  REQUIRE(StreamFileReader(file).port("out").records() == 1);
  REQUIRE_FALSE(StreamFileReader(file).has_port("extra"));
}

TEST_CASE("a declared port without records replays as empty", "[hdf5]") {
  fs::path file = scratch_dir("hdf5-empty") / "e.h5";
  {
    StreamFileWriter w(file);
    w.add_port("nothing");
    w.commit();
  }
  StreamFileReader r(file);
  REQUIRE(r.ports() == std::vector<std::string>{"nothing"});
  REQUIRE(r.port("nothing").records() == 0);
  REQUIRE(drain(r.replay("nothing")).empty());
  REQUIRE_THROWS_WITH(r.port("missing"), Catch::Contains("no port 'missing'") && Catch::Contains("nothing"));
}

TEST_CASE("shuffled replay is a seeded, chunk-aware permutation", "[hdf5]") {
  fs::path file = scratch_dir("hdf5-shuffle") / "s.h5";
  const std::int64_t n = 5000;
  {
    // ~1 KiB rows in 8 KiB chunks: many chunks, so block order and window shuffling both matter.
    StreamFileWriter w(file, {}, write_opts([](WriterOptions& o) { o.chunk_bytes = 8192; }));
    for (std::int64_t i = 0; i < n; ++i) {
      Record r;
      r.set("x", Array::from_vector<std::int64_t>({128}, std::vector<std::int64_t>(128, i)));
      r.set("id", Array::scalar<std::int64_t>(i));
      w.append("out", r);
    }
    w.commit();
  }
  StreamFileReader reader(file);
  const Table& t = reader.port("out");
  auto order = [&](ReadOptions o) {
    std::vector<std::int64_t> ids;
    for (auto& r : drain(t.cursor(o))) {
      const Array& id = r->get("id");
      for (std::int64_t k = 0; k < id.numel(); ++k) {
        ids.push_back(id.as_int(k));
        // Each row's payload travelled with its id.
        REQUIRE(r->get("x").as_int(id.rank() == 0 ? 0 : k * 128 + 127) == id.as_int(k));
      }
    }
    return ids;
  };
  auto a = order(read_opts([](ReadOptions& o) { o.shuffle = true; o.seed = 1; o.shuffle_window = 600; }));
  auto b = order(read_opts([](ReadOptions& o) { o.shuffle = true; o.seed = 1; o.shuffle_window = 600; }));
  auto c = order(read_opts([](ReadOptions& o) { o.shuffle = true; o.seed = 2; o.shuffle_window = 600; }));
  auto batched = order(read_opts([](ReadOptions& o) { o.batch_size = 64; o.shuffle = true; o.seed = 1; o.shuffle_window = 600; }));
  REQUIRE(a.size() == static_cast<std::size_t>(n));
  REQUIRE(a == b);
  REQUIRE(a != c);
  REQUIRE(batched == a);  // batching does not change the order
  std::vector<std::int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (std::int64_t i = 0; i < n; ++i) REQUIRE(sorted[static_cast<std::size_t>(i)] == i);
  // Not merely rotated blocks: neighbours in the output are rarely neighbours in the file.
  int adjacent = 0;
  for (std::size_t i = 1; i < a.size(); ++i) adjacent += a[i] == a[i - 1] + 1;
  REQUIRE(adjacent < n / 20);
  // The first window draws from a few whole blocks, far apart in the file.
  std::int64_t lo = *std::min_element(a.begin(), a.begin() + 500), hi = *std::max_element(a.begin(), a.begin() + 500);
  REQUIRE(hi - lo > 600);
  // start/stop restrict the units before shuffling.
  auto part = order(read_opts([](ReadOptions& o) { o.start = 100; o.stop = 300; o.shuffle = true; o.seed = 3; }));
  REQUIRE(part.size() == 200);
  REQUIRE(*std::min_element(part.begin(), part.end()) == 100);
  REQUIRE(*std::max_element(part.begin(), part.end()) == 299);
}

TEST_CASE("truncated, garbage and uncommitted files are reported as corrupt", "[hdf5]") {
  fs::path dir = scratch_dir("hdf5-corrupt");
  fs::path good = dir / "good.h5";
  {
    StreamFileWriter w(good);
    for (int i = 0; i < 2000; ++i) w.append("out", all_dtypes(i));
    w.commit();
  }
  auto expect_corrupt = [](const fs::path& p, const std::string& reason) {
    try {
      StreamFileReader r(p);
      FAIL("accepted " << p);
    } catch (const CorruptFileError& e) {
      INFO(e.what());
      REQUIRE(e.path() == p);
      REQUIRE_THAT(std::string(e.what()), Catch::Contains(p.string()) && Catch::Contains(reason));
    }
  };
  fs::path truncated = dir / "truncated.h5";
  fs::copy_file(good, truncated);
  fs::resize_file(truncated, fs::file_size(good) / 2);
  expect_corrupt(truncated, "truncated");

  fs::path garbage = dir / "garbage.h5";
  embedflow::test::write_file(garbage, "this is not hdf5\n");
  expect_corrupt(garbage, "not an HDF5 file");
  fs::path empty = dir / "empty.h5";
  embedflow::test::write_file(empty, "");
  expect_corrupt(empty, "empty file");

  // Damaged metadata: overwrite bytes in the middle of the header region.
  fs::path scribbled = dir / "scribbled.h5";
  fs::copy_file(good, scribbled);
  {
    std::fstream f(scribbled, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(0);
    std::string junk(2048, '\x5a');
    f.seekp(8);  // keep the signature, wreck the superblock and the root object header
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  REQUIRE_THROWS_AS(StreamFileReader(scribbled), CorruptFileError);

  REQUIRE_THROWS_WITH(StreamFileReader(dir / "absent.h5"), Catch::Contains("absent.h5: no such file"));
}

TEST_CASE("h5py reads our files and finds the documented layout", "[hdf5][python]") {
  fs::path file = scratch_dir("hdf5-h5py-reads") / "ours.h5";
  {
    StreamFileWriter w(file, {{"fingerprint", "f00d"}});
    for (std::int64_t i = 0; i < 10; ++i) w.append("records", all_dtypes(i));
    w.append("batches", batch_of(0, 3));
    w.append("batches", batch_of(3, 2));
    w.commit();
  }
  auto res = run_python(R"PY(
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
assert f.attrs["embedflow_format"] == "embedflow-stream/1", f.attrs["embedflow_format"]
assert f.attrs["fingerprint"] == "f00d"
assert f.attrs["complete"] == 1
assert list(f.attrs["ports"]) == ["records", "batches"], list(f.attrs["ports"])
r = f["records"]
assert r.attrs["layout"] == "records" and r.attrs["records"] == 10
assert list(r.attrs["fields"]) == ["u8", "i32", "i64", "f32", "f64", "flag", "name"]
assert r["u8"].dtype == np.uint8 and r["u8"].shape == (10, 2, 3), r["u8"]
assert r["u8"][4].tolist() == [[1, 2, 3], [4, 5, 204]]
assert r["i32"].dtype == np.int32 and r["i32"][3] == -21
assert r["i64"].dtype == np.int64 and r["i64"][5].tolist() == [5, (1 << 40) + 5]
assert r["f32"].dtype == np.float32 and np.allclose(r["f32"][2], [1.0, -1.25, 3e-8])
assert r["f64"].dtype == np.float64 and r["f64"][1] == 0.25
assert r["flag"].dtype == np.bool_, r["flag"].dtype
assert r["flag"][:, 0].tolist() == [i % 2 == 1 for i in range(10)]
assert r["name"][7].decode("utf-8") == "r\u00e9cord 7", r["name"][7]
assert r["name"].chunks is not None and r["name"].maxshape[0] is None
b = f["batches"]
assert b.attrs["layout"] == "batches" and b.attrs["rows"] == 5
assert b["record_offsets"][:].tolist() == [0, 3] and b["record_sizes"][:].tolist() == [3, 2]
assert b["embedding"].shape == (5, 2) and b["embedding"][4].tolist() == [4.0, -4.0]
assert [s.decode() for s in b["name"][:]] == ["item-%d" % i for i in range(5)]
assert b["flag"][:].tolist() == [True, False, False, True, False]
assert b["id"].maxshape == (None,)
print("ok")
)PY",
                        {file.string()});
  INFO(res.out << res.err);
  REQUIRE(res.exit_code == 0);
  REQUIRE(res.out == "ok\n");
}

TEST_CASE("h5dump reads our files", "[hdf5]") {
  fs::path file = scratch_dir("hdf5-h5dump") / "dump.h5";
  {
    StreamFileWriter w(file, {{"fingerprint", "beef"}});
    for (std::int64_t i = 0; i < 3; ++i) w.append("out", all_dtypes(i));
    w.commit();
  }
  auto res = run_process({"/usr/bin/h5dump", "-d", "/out/name", file.string()});
  INFO(res.out << res.err);
  REQUIRE(res.exit_code == 0);
  REQUIRE_THAT(res.out, Catch::Contains("H5T_CSET_UTF8") && Catch::Contains("cord 2"));
  auto header = run_process({"/usr/bin/h5dump", "-H", "-A", file.string()});
  REQUIRE(header.exit_code == 0);
  REQUIRE_THAT(header.out, Catch::Contains("\"beef\"") && Catch::Contains("DATASET \"record_offsets\"") &&
                               Catch::Contains("H5T_ENUM"));
}

TEST_CASE("we read files h5py wrote", "[hdf5][python]") {
  fs::path file = scratch_dir("hdf5-h5py-writes") / "theirs.h5";
  auto res = run_python(R"PY(
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    g = f.create_group("data")
    g["u8"] = np.arange(6 * 4, dtype=np.uint8).reshape(6, 4)
    g["i16"] = np.array([-3, -2, -1, 0, 1, 2], dtype=np.int16)
    g["i32"] = np.arange(6, dtype=np.int32) * 100
    g["i64"] = np.arange(6, dtype=np.int64) << 35
    g["u32"] = np.array([4000000000] * 6, dtype=np.uint32)
    g["f16"] = np.linspace(0, 1, 6).astype(np.float16)
    g["f32"] = np.linspace(0, 1, 12, dtype=np.float32).reshape(6, 2)
    g["f64"] = np.linspace(-1, 1, 6)
    g["b"] = np.array([True, False, True, True, False, False])
    g.create_dataset("vs", data=["alpha", "\u00e9t\u00e9", "", "d", "e", "f"], dtype=h5py.string_dtype())
    g["fs"] = np.array([b"ab", b"cde", b"f", b"", b"ghij", b"k"], dtype="S4")
    g.create_dataset("chunked", data=np.arange(6 * 3, dtype=np.float64).reshape(6, 3), chunks=(2, 3), compression="gzip")
    f["lonely"] = np.arange(10, dtype=np.int64)
    f.create_group("mixed")
    f["mixed/a"] = np.arange(3)
    f["mixed/b"] = np.arange(4)
print("ok")
)PY",
                        {file.string()});
  INFO(res.out << res.err);
  REQUIRE(res.exit_code == 0);
  REQUIRE_FALSE(is_stream_file(file));

  Table t = open_table(file, "data");
  REQUIRE(t.rows() == 6);
  REQUIRE_FALSE(t.has_records());
  REQUIRE(t.field("u8").dtype == DType::u8);
  REQUIRE(t.field("i16").dtype == DType::i32);
  REQUIRE(t.field("u32").dtype == DType::i64);
  REQUIRE(t.field("f16").dtype == DType::f32);
  REQUIRE(t.field("b").dtype == DType::boolean);
  REQUIRE(t.field("vs").dtype == DType::string);
  REQUIRE(t.field("fs").dtype == DType::string);
  REQUIRE(t.field("chunked").chunk_rows == 2);
  Record all = t.read_rows(0, 6);
  REQUIRE(all.get("u8").shape() == Shape{6, 4});
  REQUIRE(all.get("u8").data<std::uint8_t>()[23] == 23);
  REQUIRE(all.get("i16").data<std::int32_t>()[0] == -3);
  REQUIRE(all.get("i32").data<std::int32_t>()[5] == 500);
  REQUIRE(all.get("i64").data<std::int64_t>()[3] == (std::int64_t{3} << 35));
  REQUIRE(all.get("u32").data<std::int64_t>()[0] == 4000000000LL);
  REQUIRE(all.get("f16").data<float>()[5] == 1.0f);
  REQUIRE(all.get("f32").data<float>()[11] == 1.0f);
  REQUIRE(all.get("f64").data<double>()[0] == -1.0);
  const auto* b = all.get("b").data<bool>();
  REQUIRE((b[0] && !b[1] && b[2] && b[3] && !b[4] && !b[5]));
  REQUIRE(all.get("vs").string_at(1) == "\xc3\xa9t\xc3\xa9");
  REQUIRE(all.get("vs").string_at(2).empty());
  REQUIRE(all.get("fs").string_at(1) == "cde");
  REQUIRE(all.get("fs").string_at(4) == "ghij");
  REQUIRE(all.get("chunked").data<double>()[17] == 17.0);

  // Replay as single rows (no leading axis) and as batches.
  auto rows = drain(t.cursor(read_opts([](ReadOptions& o) { o.fields = {"f32", "vs"}; })));
  REQUIRE(rows.size() == 6);
  REQUIRE(rows[0]->get("f32").shape() == Shape{2});
  REQUIRE(rows[0]->get("vs").shape() == Shape{});
  REQUIRE(rows[0]->get("vs").string_at(0) == "alpha");
  auto batches = drain(t.cursor(read_opts([](ReadOptions& o) { o.fields = {"chunked"}; o.batch_size = 4; })));
  REQUIRE(batches.size() == 2);
  REQUIRE(batches[1]->get("chunked").shape() == Shape{2, 3});

  // Shuffled batches mix contiguous datasets (copied from the mapped file), converted ones
  // (i16, f16) and strings (read and gathered); rows must stay aligned across all of them.
  std::set<std::int64_t> rows_seen;
  for (const auto& batch : drain(t.cursor(read_opts([](ReadOptions& o) {
         o.fields = {"u8", "i16", "i32", "vs", "f16"};
         o.batch_size = 4;
         o.shuffle = true;
         o.seed = 11;
       })))) {
    for (std::int64_t k = 0; k < batch->batch_size(); ++k) {
      std::int64_t row = batch->get("i32").data<std::int32_t>()[k] / 100;
      rows_seen.insert(row);
      REQUIRE(batch->get("u8").data<std::uint8_t>()[4 * k + 3] == 4 * row + 3);
      REQUIRE(batch->get("i16").data<std::int32_t>()[k] == row - 3);
      REQUIRE(batch->get("f16").data<float>()[k] == Approx(row / 5.0).epsilon(1e-3));
      static const char* names[] = {"alpha", "\xc3\xa9t\xc3\xa9", "", "d", "e", "f"};
      REQUIRE(batch->get("vs").string_at(k) == names[row]);
    }
  }
  REQUIRE(rows_seen.size() == 6);

  Table single = open_table(file, "/lonely");
  REQUIRE(single.fields().size() == 1);
  REQUIRE(single.fields()[0].name == "lonely");
  REQUIRE(single.rows() == 10);
  REQUIRE(single.read_record(9)->get("lonely").item<std::int64_t>() == 9);

  REQUIRE_THROWS_WITH(open_table(file, "mixed"), Catch::Contains("differ in length") && Catch::Contains("a: 3, b: 4"));
  REQUIRE(open_table(file, "mixed", {"b"}).rows() == 4);
  REQUIRE_THROWS_WITH(open_table(file, "nope"), Catch::Contains("no object '/nope'") && Catch::Contains("data, lonely, mixed"));
  REQUIRE_THROWS_WITH(open_table(file, "data", {"zzz"}), Catch::Contains("no dataset 'zzz'"));
}

TEST_CASE("appends from several threads to several ports are all kept", "[hdf5]") {
  fs::path file = scratch_dir("hdf5-threads") / "t.h5";
  {
    StreamFileWriter w(file, {}, write_opts([](WriterOptions& o) { o.chunk_bytes = 1024; o.flush_bytes = 2048; }));
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&w, t] {
        for (std::int64_t i = 0; i < 500; ++i) w.append(t % 2 ? "odd" : "even", batch_of(i * 2, 2));
      });
    for (auto& th : threads) th.join();
    w.commit();
  }
  StreamFileReader r(file);
  REQUIRE(r.port("odd").records() == 1000);
  REQUIRE(r.port("even").rows() == 2000);
  std::int64_t sum = 0;
  for (const auto& rec : drain(r.replay("odd"))) sum += rec->get("id").data<std::int64_t>()[0];
  REQUIRE(sum == 2 * (499 * 500));  // each thread's ids 0, 2, ..., 998
}

TEST_CASE("a SIGKILLed writer leaves nothing a reader accepts at the final path", "[hdf5]") {
  fs::path dir = scratch_dir("hdf5-sigkill");
  fs::path file = dir / "killed.h5";
  fs::path ready = dir / "ready";
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The child writes well past the flush threshold, says so, and keeps writing until killed.
    try {
      StreamFileWriter w(file, {}, write_opts([](WriterOptions& o) { o.chunk_bytes = 4096; o.flush_bytes = 8192; }));
      for (std::int64_t i = 0;; ++i) {
        w.append("out", batch_of(i * 10, 10));
        if (i == 2000) std::ofstream(ready) << "1";
        if (i > 2000) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    } catch (...) {
    }
    _exit(3);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!fs::exists(ready) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  REQUIRE(fs::exists(ready));
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  REQUIRE(WIFSIGNALED(status));

  REQUIRE_FALSE(fs::exists(file));
  REQUIRE_THROWS_AS(StreamFileReader(file), DataError);
  // The temporary is left behind (nobody could delete it) but is recognisably a dead writer's,
  // and even read directly it is refused.
  std::vector<fs::path> temps;
  for (const auto& e : fs::directory_iterator(dir))
    if (StreamFileWriter::temp_owner_pid(e.path())) temps.push_back(e.path());
  REQUIRE(temps.size() == 1);
  REQUIRE(StreamFileWriter::temp_owner_pid(temps[0]) == std::optional<long>(child));
  REQUIRE(fs::file_size(temps[0]) > 100000);
  REQUIRE_THROWS_AS(StreamFileReader(temps[0]), CorruptFileError);
  // Renamed into place by hand, it is still refused: it was never committed.
  fs::rename(temps[0], file);
  REQUIRE_THROWS_AS(StreamFileReader(file), CorruptFileError);
}

TEST_CASE("a committed file whose datasets disagree with its record index is corrupt", "[hdf5][python]") {
  fs::path file = scratch_dir("hdf5-index") / "index.h5";
  {
    StreamFileWriter w(file);
    for (std::int64_t i = 0; i < 4; ++i) w.append("out", batch_of(i * 3, 3));
    w.commit();
  }
  // Shrink one field dataset behind the writer's back.
  auto res = run_python(R"PY(
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    f["out/embedding"].resize((10, 2))
print("ok")
)PY",
                        {file.string()});
  REQUIRE(res.exit_code == 0);
  REQUIRE_THROWS_WITH(StreamFileReader(file), Catch::Contains("index.h5") &&
                                                  Catch::Contains("dataset '/out/embedding' has 10 rows") &&
                                                  Catch::Contains("describe 12"));
  res = run_python(R"PY(
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    f["out/embedding"].resize((12, 2))
    f["out/record_sizes"][2] = 4
    del f["out/name"]
print("ok")
)PY",
                   {file.string()});
  REQUIRE(res.exit_code == 0);
  REQUIRE_THROWS_WITH(StreamFileReader(file), Catch::Contains("record 3 has offset 9") || Catch::Contains("record_sizes add up"));
}

TEST_CASE("u64 ids below 2^63 read exactly; one at or above 2^63 is an error naming file and dataset", "[hdf5][python]") {
  fs::path file = scratch_dir("hdf5-u64") / "ids.h5";
  auto res = run_python(R"PY(
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f["small"] = np.array([0, 5, 2**63 - 1], dtype=np.uint64)
    big = np.arange(100, dtype=np.uint64)
    big[77] = np.uint64(2**63)
    f.create_dataset("big", data=big, chunks=(10,))
print("ok")
)PY",
                        {file.string()});
  INFO(res.out << res.err);
  REQUIRE(res.exit_code == 0);

  Table small = open_table(file, "small");
  REQUIRE(small.field("small").dtype == DType::i64);
  Record s = small.read_rows(0, 3);
  CHECK(s.get("small").as_int(1) == 5);
  CHECK(s.get("small").as_int(2) == std::numeric_limits<std::int64_t>::max());

  Table big = open_table(file, "big");
  CHECK(big.read_rows(0, 70).get("big").as_int(69) == 69);  // rows before the big id are fine
  CHECK_THROWS_WITH(big.read_rows(0, 100), Catch::Contains("ids.h5") && Catch::Contains("dataset '/big'") &&
                                               Catch::Contains(">= 2^63"));
  std::int64_t seen = 0;
  CHECK_THROWS_WITH(big.for_each([&](const RecordPtr&) { ++seen; }), Catch::Contains("ids.h5") && Catch::Contains(">= 2^63"));
}

TEST_CASE("a compressed dataset declaring chunks it does not store is refused at open", "[hdf5][python]") {
  fs::path file = scratch_dir("hdf5-declared-deflate") / "huge.h5";
  auto res = run_python(R"PY(
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    d = f.create_dataset("x", shape=(2**40, 8), maxshape=(None, 8), chunks=(64, 8), dtype=np.float32, compression="gzip")
    d[:64] = 1.0
    f.create_dataset("ok", data=np.arange(1000, dtype=np.float32), chunks=(100,), compression="gzip")
print("ok")
)PY",
                        {file.string()});
  INFO(res.out << res.err);
  REQUIRE(res.exit_code == 0);
  CHECK_THROWS_WITH(open_table(file, "x"), Catch::Contains("huge.h5") && Catch::Contains("declares 1099511627776 rows") &&
                                               Catch::Contains("does not store the chunk at row 1099511627712"));
  Table ok = open_table(file, "ok");
  CHECK(ok.read_rows(0, 1000).get("ok").as_double(999) == 999.0);
}

namespace {
// Runs `body` in a child process, so that a reader that hangs fails this test after `seconds`
// instead of stalling the suite; returns what the child printed on its last line.
std::string in_child_with_time_limit(const std::function<std::string()>& body, int seconds) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    std::string said;
    try {
      said = body();
    } catch (const std::exception& e) {
      said = std::string("threw: ") + e.what();
    }
    ssize_t ignored = write(fds[1], said.data(), said.size());
    (void)ignored;
    _exit(0);
  }
  close(fds[1]);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      close(fds[0]);
      return "hung";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "crashed";
  return out;
}

// Damages the first global heap collection of `src` into `dst` as `how` says (python, so the
// byte layout is spelled out independently of the reader's parser).
void damage_global_heap(const fs::path& src, const fs::path& dst, const std::string& how) {
  auto res = run_python(R"PY(
import sys
src, dst, how = sys.argv[1:4]
data = bytearray(open(src, "rb").read())
g = data.find(b"GCOL")
assert g >= 0 and data[g + 4] == 1, "no global heap collection"
size = int.from_bytes(data[g + 8:g + 16], "little")
objects, p = {}, g + 16
while p + 16 <= g + size:
    idx = int.from_bytes(data[p:p + 2], "little")
    osize = int.from_bytes(data[p + 8:p + 16], "little")
    objects[idx] = (p, osize, bytes(data[p + 16:p + 16 + osize]))
    if idx == 0:
        break
    p += 16 + (osize + 7) // 8 * 8
if how == "free-space-of-zero-bytes":   # libhdf5 1.10 loops forever on it
    at = objects[0][0]
    data[at + 8:at + 16] = (0).to_bytes(8, "little")
elif how == "object-longer-than-its-string":   # libhdf5 copies past the string's buffer
    at = next(p for p, s, d in objects.values() if d == b"alpha")
    data[at + 8:at + 16] = (7).to_bytes(8, "little")   # same 8-byte padding, so the walk still fits
else:
    raise SystemExit("unknown damage " + how)
open(dst, "wb").write(data)
print("ok")
)PY",
                        {src.string(), dst.string(), how});
  INFO(res.out << res.err);
  REQUIRE(res.exit_code == 0);
}
}  // namespace

TEST_CASE("a damaged global heap behind variable-length strings is a located error, never a hang", "[hdf5][python]") {
  fs::path dir = scratch_dir("hdf5-global-heap");
  fs::path good = dir / "strings.h5";
  auto res = run_python(R"PY(
import sys, h5py
with h5py.File(sys.argv[1], "w") as f:
    f.create_dataset("name", data=["alpha", "beta", "gamma", "delta"], dtype=h5py.string_dtype())
print("ok")
)PY",
                        {good.string()});
  INFO(res.out << res.err);
  REQUIRE(res.exit_code == 0);
  auto read_names = [](const fs::path& p) {
    return [p] {
      Record r = open_table(p).read_rows(0, 4);
      std::string s;
      for (std::int64_t i = 0; i < 4; ++i) s += r.get("name").string_at(i) + ",";
      return s;
    };
  };
  REQUIRE(in_child_with_time_limit(read_names(good), 60) == "alpha,beta,gamma,delta,");

  fs::path zero = dir / "zero-free-space.h5";
  damage_global_heap(good, zero, "free-space-of-zero-bytes");
  std::string said = in_child_with_time_limit(read_names(zero), 60);
  CHECK_THAT(said, Catch::StartsWith("threw: ") && Catch::Contains(zero.string()) && Catch::Contains("dataset '/name'") &&
                       Catch::Contains("free-space object of 0 bytes"));

  fs::path longer = dir / "longer-object.h5";
  damage_global_heap(good, longer, "object-longer-than-its-string");
  said = in_child_with_time_limit(read_names(longer), 60);
  CHECK_THAT(said, Catch::StartsWith("threw: ") && Catch::Contains(longer.string()) &&
                       Catch::Contains("string 0 has length 5 but its heap object holds 7 bytes"));
}

TEST_CASE("a stream file whose attributes' heap is damaged is corrupt, not a hang", "[hdf5][python]") {
  fs::path dir = scratch_dir("hdf5-attribute-heap");
  fs::path good = dir / "good.h5";
  {
    StreamFileWriter w(good);
    for (int i = 0; i < 3; ++i) w.append("out", all_dtypes(i));
    w.commit();
  }
  fs::path damaged = dir / "damaged.h5";
  damage_global_heap(good, damaged, "free-space-of-zero-bytes");
  auto open_and_replay = [](const fs::path& p) {
    return [p] {
      StreamFileReader r(p);
      std::int64_t n = 0;
      for (const auto& port : r.ports())
        for (Cursor c = r.replay(port); c.next();) ++n;
      return std::to_string(n) + " records";
    };
  };
  REQUIRE(in_child_with_time_limit(open_and_replay(good), 60) == "3 records");
  std::string said = in_child_with_time_limit(open_and_replay(damaged), 60);
  CHECK_THAT(said, Catch::StartsWith("threw: ") && Catch::Contains(damaged.string()) &&
                       Catch::Contains("attribute '") && Catch::Contains("free-space object of 0 bytes"));

  // The inputs random fuzzing found: libhdf5 alone loops on the first and copies between
  // overlapping ranges on the second.
  for (const char* name : {"vlen-attribute-global-heap.h5", "vlen-attribute-memcpy-overlap.h5"}) {
    fs::path found = fs::path(EMBEDFLOW_SOURCE_DIR) / "fuzz/corpus/hdf5_stream" / name;
    REQUIRE(fs::exists(found));
    said = in_child_with_time_limit(open_and_replay(found), 60);
    INFO(name);
    CHECK_THAT(said, Catch::StartsWith("threw: ") && Catch::Contains(name) && Catch::Contains("heap"));
  }
}
