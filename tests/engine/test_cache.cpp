// Stage caches end to end through the CLI: hits skip upstream work (counted by the node's own
// log), parameter and input-file changes miss and --explain-cache says why, killed and
// interrupted runs leave nothing a later run trusts, corrupt entries are rebuilt with a warning,
// string columns and multi-port nodes replay exactly, and `embedflow cache` manages the dir.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cli.hpp"

using namespace embedflow::test;
namespace fs = std::filesystem;

namespace {

std::string testing_path() { return std::string("--plugin-path=") + EMBEDFLOW_TESTING_PLUGIN_DIR; }

int count_lines(const fs::path& p) {
  if (!fs::exists(p)) return 0;
  std::ifstream in(p);
  int n = 0;
  for (std::string l; std::getline(in, l);) ++n;
  return n;
}

std::vector<fs::path> entries(const fs::path& dir, bool temporaries = false) {
  std::vector<fs::path> out;
  if (!fs::exists(dir)) return out;
  for (const auto& de : fs::directory_iterator(dir)) {
    std::string name = de.path().filename().string();
    bool temp = name.find(".h5.tmp-") != std::string::npos;
    if (temp == temporaries && (temp || de.path().extension() == ".h5")) out.push_back(de.path());
  }
  return out;
}

// lines -> jittery (cached) -> scale -> print. The reader logs each time it runs.
struct Fixture {
  fs::path dir, cache, data, log, printed, graph;
  explicit Fixture(const std::string& name, int lines = 50, const std::string& cache_spec = "true") {
    dir = scratch_dir(name);
    cache = dir / "cache";
    data = dir / "data.txt";
    log = dir / "reader.log";
    printed = dir / "printed.txt";
    graph = dir / "g.yaml";
    std::string text;
    for (int i = 0; i < lines; ++i) text += "line " + std::to_string(i) + (i % 7 == 0 ? " with, commas \"quotes\"" : "") + "\n";
    write_file(data, text);
    write_file(graph, "# cache test graph\nseed: 11\nnodes:\n"
                      "  read: {type: testing.lines, params: {path: " + data.string() + ", log: " + log.string() + "}}\n"
                      "  shuffle: {type: testing.jittery, cache: " + cache_spec + "}\n"
                      "  scale: {type: core.map_affine, params: {scale: 2.0, jitter: 0.1}}\n"
                      "  show: {type: core.sink, params: {mode: print, out: " + printed.string() + "}}\n"
                      "edges: [read -> shuffle, shuffle -> scale, scale -> show]\n");
  }
  Result run(std::vector<std::string> extra = {}) const {
    std::vector<std::string> args{"run", graph.string(), testing_path(), "--cache-dir", cache.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_cli(args);
  }
};

// XORs 8 bytes in the middle of the first stored chunk of a numeric dataset of an entry (h5py
// finds it): structure, record index and fingerprint stay valid, only values change. Prints the
// dataset. With `forge_stamp`, the entry's verification stamp is then rewritten to match the
// damaged file, as if the damage had happened below the file system (a bad sector), which no
// status-change time shows.
Result damage_entry(const fs::path& entry, bool forge_stamp = false) {
  return run_python(R"(
import os, sys, h5py
path, forge = sys.argv[1], sys.argv[2] == "1"
with h5py.File(path, "r") as f:
    target = None
    for port in f.values():
        for name, d in port.items():
            if name in ("record_offsets", "record_sizes") or d.dtype.kind not in "iuf" or d.chunks is None:
                continue
            info = d.id.get_chunk_info(0)
            if info.size >= 32:
                target = (port.name + "/" + name, info.byte_offset + info.size // 2 - 4)
                break
        if target:
            break
assert target, "no numeric chunk of 32 bytes or more"
with open(path, "r+b") as raw:
    raw.seek(target[1])
    b = bytearray(raw.read(8))
    raw.seek(target[1])
    raw.write(bytes(x ^ 0x5A for x in b))
if forge:
    st = os.stat(path)
    with open(path + ".verified", "w") as s:
        s.write(f"embedflow-cache-stamp 1 dev {st.st_dev} ino {st.st_ino} size {st.st_size} "
                f"ctime {st.st_ctime_ns // 10**9}.{st.st_ctime_ns % 10**9}\n")
print(target[0])
)",
                    {entry.string(), forge_stamp ? "1" : "0"});
}

}  // namespace

TEST_CASE("a cache hit replays the stream and skips the upstream node") {
  Fixture f("cache-hit");
  Result first = f.run({"--explain-cache"});
  REQUIRE(first.exit_code == 0);
  CHECK_THAT(first.err, Catch::Contains("shuffle: miss, runs and writes shuffle-"));
  CHECK_THAT(first.err, Catch::Contains("no earlier entry for node 'shuffle'"));
  CHECK(count_lines(f.log) == 1);
  REQUIRE(entries(f.cache).size() == 1);
  CHECK(entries(f.cache, true).empty());
  std::string printed_first = read_file(f.printed);
  REQUIRE(count_lines(f.printed) == 50);

  Result second = f.run({"--explain-cache"});
  REQUIRE(second.exit_code == 0);
  CHECK_THAT(second.err, Catch::Contains("shuffle: hit, replays shuffle-"));
  CHECK_THAT(second.err, Catch::Contains("read: skipped: feeds only 'shuffle'"));
  CHECK(count_lines(f.log) == 1);  // the reader did not run again
  CHECK(read_file(f.printed) == printed_first);  // strings, ints and doubles replay exactly

  // --no-cache runs everything and writes nothing new; --rebuild-cache runs and rewrites.
  REQUIRE(f.run({"--no-cache"}).exit_code == 0);
  CHECK(count_lines(f.log) == 2);
  REQUIRE(f.run({"--rebuild-cache"}).exit_code == 0);
  CHECK(count_lines(f.log) == 3);
  CHECK(entries(f.cache).size() == 1);
  CHECK(read_file(f.printed) == printed_first);
}

TEST_CASE("a parameter change misses and --explain-cache names it") {
  Fixture f("cache-param");
  REQUIRE(f.run().exit_code == 0);
  // A parameter of the cached node's upstream changes its fingerprint too.
  Result changed = f.run({"--explain-cache", "--set", "read.delay_us=0", "--set", "seed=12"});
  REQUIRE(changed.exit_code == 0);
  CHECK_THAT(changed.err, Catch::Contains("shuffle: miss"));
  CHECK_THAT(changed.err, Catch::Contains("seed: "));  // the derived node seed changed
  CHECK(count_lines(f.log) == 2);
  CHECK(entries(f.cache).size() == 2);

  // A parameter that does not affect output (delay_us is not fingerprinted) still hits.
  Result same = f.run({"--explain-cache", "--set", "read.delay_us=5", "--set", "seed=12"});
  REQUIRE(same.exit_code == 0);
  CHECK_THAT(same.err, Catch::Contains("shuffle: hit"));
  CHECK(count_lines(f.log) == 2);
}

TEST_CASE("a touched or edited input file misses, naming the file") {
  Fixture f("cache-file");
  REQUIRE(f.run().exit_code == 0);
  // Same bytes, new mtime: a miss (the issue asks for size, mtime and content).
  auto t = fs::last_write_time(f.data);
  fs::last_write_time(f.data, t + std::chrono::seconds(5));
  Result touched = f.run({"--explain-cache"});
  REQUIRE(touched.exit_code == 0);
  CHECK_THAT(touched.err, Catch::Contains("shuffle: miss"));
  CHECK_THAT(touched.err, Catch::Contains("upstream 'read': file.path: size="));
  CHECK(count_lines(f.log) == 2);
  Result again = f.run({"--explain-cache"});
  CHECK_THAT(again.err, Catch::Contains("shuffle: hit"));

  // hash: full reads every byte; switching modes changes the key once.
  Fixture full("cache-file-full", 50, "{hash: full}");
  REQUIRE(full.run().exit_code == 0);
  Result hit = full.run({"--explain-cache"});
  CHECK_THAT(hit.err, Catch::Contains("shuffle: hit"));
  CHECK(count_lines(full.log) == 1);
}

TEST_CASE("a run killed with SIGKILL mid-write leaves nothing trusted, and the next run rebuilds") {
  Fixture f("cache-sigkill", 20000);
  // A slow reader keeps the cached node writing for seconds.
  Child child = spawn_cli({"run", f.graph.string(), testing_path(), "--cache-dir", f.cache.string(), "-q", "--set",
                           "read.delay_us=500"});
  bool started = false;
  for (int i = 0; i < 200 && !started; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    started = !entries(f.cache, true).empty() && count_lines(f.printed) > 100;
  }
  REQUIRE(started);
  kill(child.pid, SIGKILL);
  Result killed = wait_child(child);
  CHECK(killed.exit_code != 0);
  CHECK(entries(f.cache).empty());          // no final name was ever written
  REQUIRE(entries(f.cache, true).size() == 1);  // the temporary stays for gc

  Result ls = run_cli({"cache", "ls", "--cache-dir", f.cache.string()});
  CHECK_THAT(ls.out, Catch::Contains("temporary of pid " + std::to_string(child.pid) + " (gone)"));

  Result rerun = f.run({"--explain-cache"});
  REQUIRE(rerun.exit_code == 0);
  CHECK_THAT(rerun.err, Catch::Contains("shuffle: miss"));
  CHECK(entries(f.cache).size() == 1);
  CHECK(count_lines(f.printed) == 20000);

  Result gc = run_cli({"cache", "gc", "--cache-dir", f.cache.string()});
  REQUIRE(gc.exit_code == 0);
  CHECK_THAT(gc.out, Catch::Contains("left by a run that is gone"));
  CHECK(entries(f.cache, true).empty());
  CHECK(entries(f.cache).size() == 1);
}

TEST_CASE("an interrupted run (SIGINT) drains but does not commit its cache entry") {
  Fixture f("cache-sigint", 20000);
  Child child = spawn_cli({"run", f.graph.string(), testing_path(), "--cache-dir", f.cache.string(), "--set",
                           "read.delay_us=500"});
  bool started = false;
  for (int i = 0; i < 200 && !started; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    started = count_lines(f.printed) > 100;
  }
  REQUIRE(started);
  kill(child.pid, SIGINT);
  Result r = wait_child(child);
  CHECK(r.exit_code == 130);
  CHECK_THAT(r.err, Catch::Contains("interrupted: cache entry not written"));
  CHECK(entries(f.cache).empty());
  CHECK(entries(f.cache, true).empty());  // the writer removed its temporary
}

TEST_CASE("a corrupt or truncated entry is reported, deleted and rebuilt") {
  Fixture f("cache-corrupt");
  REQUIRE(f.run().exit_code == 0);
  std::string expected = read_file(f.printed);
  auto files = entries(f.cache);
  REQUIRE(files.size() == 1);
  fs::path entry = files[0];
  fs::resize_file(entry, fs::file_size(entry) / 2);

  Result r = f.run();
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("cache file " + entry.string() + " is corrupt"));
  CHECK_THAT(r.err, Catch::Contains("deleting it and rebuilding"));
  CHECK(count_lines(f.log) == 2);
  CHECK(read_file(f.printed) == expected);
  REQUIRE(fs::exists(entry));

  // Garbage that is not HDF5 at all.
  write_file(entry, "not an hdf5 file\n");
  Result g = f.run();
  REQUIRE(g.exit_code == 0);
  CHECK_THAT(g.err, Catch::Contains("is corrupt"));
  CHECK(read_file(f.printed) == expected);
  Result hit = f.run({"--explain-cache"});
  CHECK_THAT(hit.err, Catch::Contains("shuffle: hit"));
}

TEST_CASE("damaged data bytes inside an entry are caught by its checksums, warned about and rebuilt") {
  Fixture f("cache-damaged", 2000);
  REQUIRE(f.run().exit_code == 0);
  const std::string expected = read_file(f.printed);
  auto files = entries(f.cache);
  REQUIRE(files.size() == 1);
  const fs::path entry = files[0];
  Result damage = damage_entry(entry);
  INFO(damage.out << damage.err);
  REQUIRE(damage.exit_code == 0);

  Result r = f.run();
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("cache file " + entry.string() + " is corrupt"));
  CHECK_THAT(r.err, Catch::Contains("deleting it and rebuilding"));
  CHECK(count_lines(f.log) == 2);  // rebuilt from the reader, not replayed
  CHECK(read_file(f.printed) == expected);
  Result hit = f.run({"--explain-cache"});
  CHECK_THAT(hit.err, Catch::Contains("shuffle: hit"));
  CHECK(count_lines(f.log) == 2);
}

TEST_CASE("an entry unchanged since it was written replays without reading its checksums again; cache verify reads "
          "them, deletes a damaged entry, and the next run rebuilds it") {
  Fixture f("cache-stamp", 2000);
  REQUIRE(f.run().exit_code == 0);
  const std::string expected = read_file(f.printed);
  auto files = entries(f.cache);
  REQUIRE(files.size() == 1);
  const fs::path entry = files[0];
  CHECK(fs::exists(entry.string() + ".verified"));  // stamped when written

  Result hit = f.run({"--verbose"});
  INFO(hit.err);
  REQUIRE(hit.exit_code == 0);
  CHECK_THAT(hit.err, Catch::Contains("cache entry unchanged since it was written or verified: " + entry.string()));
  CHECK(count_lines(f.log) == 1);
  CHECK(read_file(f.printed) == expected);

  Result ok = run_cli({"cache", "verify", "--cache-dir", f.cache.string()});
  INFO(ok.out << ok.err);
  CHECK(ok.exit_code == 0);
  CHECK_THAT(ok.out, Catch::Contains("1 entry verified, 0 corrupt"));

  // Damage the file system cannot see: a run trusts the stamp (the entry replays; the reader does
  // not run), `cache verify` does not.
  Result damage = damage_entry(entry, true);
  INFO(damage.out << damage.err);
  REQUIRE(damage.exit_code == 0);
  REQUIRE(f.run().exit_code == 0);
  CHECK(count_lines(f.log) == 1);
  Result bad = run_cli({"cache", "verify", "shuffle", "--cache-dir", f.cache.string()});
  INFO(bad.out << bad.err);
  CHECK(bad.exit_code == 1);
  CHECK_THAT(bad.out, Catch::Contains("corrupt: " + entry.string()));
  CHECK_THAT(bad.out, Catch::Contains("0 entries verified, 1 corrupt"));
  CHECK_FALSE(fs::exists(entry));
  CHECK_FALSE(fs::exists(entry.string() + ".verified"));
  REQUIRE(f.run().exit_code == 0);
  CHECK(count_lines(f.log) == 2);  // rebuilt from the reader
  CHECK(read_file(f.printed) == expected);

  Result none = run_cli({"cache", "verify", "nosuchnode", "--cache-dir", f.cache.string()});
  CHECK(none.exit_code == 2);
  CHECK_THAT(none.err, Catch::Contains("no entry matches 'nosuchnode'"));
}

TEST_CASE("h5py reads a cache entry: layout, strings and attributes") {
  Fixture f("cache-h5py", 30);
  REQUIRE(f.run().exit_code == 0);
  auto files = entries(f.cache);
  REQUIRE(files.size() == 1);
  Result py = run_python(R"(
import sys, json, h5py
f = h5py.File(sys.argv[1], "r")
a = f.attrs
for key in ("fingerprint", "graph", "node", "node_type", "embedflow_version", "created", "manifest"):
    assert key in a, key
assert a["node"] == "shuffle" and a["node_type"] == "testing.jittery"
assert sys.argv[1].endswith(a["fingerprint"] + ".h5")
m = json.loads(a["manifest"])
assert {n["node"] for n in m["nodes"]} == {"shuffle", "read"}
out = f["out"]
assert out["n"].shape == (30,) and out["n"].maxshape == (None,)
assert out["n"].chunks is not None
assert list(out["n"][:3]) == [0, 1, 2]
text = [t.decode() for t in out["text"][:]]
assert text[0] == 'line 0 with, commas "quotes"' and text[1] == "line 1", text[:2]
assert abs(out["value"][4] - 2.0) < 1e-12
print("ok")
)", {files[0].string()});
  INFO(py.err);
  CHECK(py.exit_code == 0);
  CHECK_THAT(py.out, Catch::Contains("ok"));
  Result dump = run_process({"/usr/bin/h5dump", "-H", files[0].string()});
  CHECK(dump.exit_code == 0);
  CHECK_THAT(dump.out, Catch::Contains("DATASET \"text\""));
}

TEST_CASE("embedflow cache ls, info and rm") {
  Fixture f("cache-cli");
  REQUIRE(f.run().exit_code == 0);
  REQUIRE(f.run({"--set", "scale.scale=3.0"}).exit_code == 0);  // downstream of the cache: same entry
  REQUIRE(f.run({"--set", "seed=5"}).exit_code == 0);
  REQUIRE(entries(f.cache).size() == 2);

  Result ls = run_cli({"cache", "ls", "--cache-dir", f.cache.string()});
  REQUIRE(ls.exit_code == 0);
  CHECK_THAT(ls.out, Catch::Contains("NODE"));
  CHECK_THAT(ls.out, Catch::Contains("testing.jittery"));
  CHECK_THAT(ls.out, Catch::Contains(f.graph.string()));
  CHECK_THAT(ls.out, Catch::Contains("2 entries"));
  Result json = run_cli({"cache", "ls", "--json", "--cache-dir", f.cache.string()});
  write_file(f.dir / "ls.json", json.out);
  Result parsed = run_python("import sys, json; e = json.loads(open(sys.argv[1]).read()); print(len(e), e[0]['node'], e[0]['ok'])",
                      {(f.dir / "ls.json").string()});
  CHECK_THAT(parsed.out, Catch::Contains("2 shuffle True"));

  std::string fp = entries(f.cache)[0].stem().string().substr(std::string("shuffle-").size());
  Result info = run_cli({"cache", "info", fp.substr(0, 8), "--cache-dir", f.cache.string()});
  REQUIRE(info.exit_code == 0);
  CHECK_THAT(info.out, Catch::Contains("port out: 50 records"));
  CHECK_THAT(info.out, Catch::Contains("text: str[]"));
  CHECK_THAT(info.out, Catch::Contains("\"param.path\""));

  check_cli_fails({"cache", "rm", "nosuchnode", "--cache-dir", f.cache.string()}, 2, "no entry matches 'nosuchnode'");
  Result rm = run_cli({"cache", "rm", fp.substr(0, 8), "--cache-dir", f.cache.string()});
  REQUIRE(rm.exit_code == 0);
  CHECK(entries(f.cache).size() == 1);
  Result rm_node = run_cli({"cache", "rm", "shuffle", "--cache-dir", f.cache.string()});
  REQUIRE(rm_node.exit_code == 0);
  CHECK(entries(f.cache).empty());

  check_cli_fails({"cache", "gc", "--older-than", "soon", "--cache-dir", f.cache.string()}, 2,
                  "--older-than takes a duration");
}

TEST_CASE("gc evicts by age and by total size, least recently used first") {
  Fixture f("cache-gc");
  REQUIRE(f.run().exit_code == 0);
  REQUIRE(f.run({"--set", "seed=2"}).exit_code == 0);
  REQUIRE(f.run({"--set", "seed=3"}).exit_code == 0);
  auto files = entries(f.cache);
  REQUIRE(files.size() == 3);
  // Age one entry by a day: --older-than 12h removes only it.
  fs::path old = files[0];
  fs::last_write_time(old, fs::file_time_type::clock::now() - std::chrono::hours(24));
  Result dry = run_cli({"cache", "gc", "--older-than", "12h", "--dry-run", "--cache-dir", f.cache.string()});
  CHECK_THAT(dry.out, Catch::Contains("would remove " + old.filename().string()));
  CHECK(entries(f.cache).size() == 3);
  Result gc = run_cli({"cache", "gc", "--older-than", "12h", "--cache-dir", f.cache.string()});
  REQUIRE(gc.exit_code == 0);
  CHECK_FALSE(fs::exists(old));
  CHECK(entries(f.cache).size() == 2);
  // A hit refreshes recency: replay seed=3's entry, then cap the size at one entry.
  REQUIRE(f.run({"--set", "seed=3"}).exit_code == 0);
  auto size = fs::file_size(entries(f.cache)[0]);
  Result cap = run_cli({"cache", "gc", "--max-size", std::to_string(size + size / 2), "--cache-dir", f.cache.string()});
  REQUIRE(cap.exit_code == 0);
  REQUIRE(entries(f.cache).size() == 1);
  Result hit = f.run({"--set", "seed=3", "--explain-cache"});
  CHECK_THAT(hit.err, Catch::Contains("shuffle: hit"));
  // An entry deleted by hand leaves its verification stamp; gc sweeps the stamp (a dry run only
  // names it) and keeps the stamp of the entry still there.
  const fs::path kept = entries(f.cache)[0];
  REQUIRE(fs::exists(kept.string() + ".verified"));
  REQUIRE(f.run({"--set", "seed=4"}).exit_code == 0);
  fs::path gone;
  for (const auto& e : entries(f.cache))
    if (e != kept) gone = e;
  REQUIRE(fs::exists(gone.string() + ".verified"));
  fs::remove(gone);
  Result dry_stamps = run_cli({"cache", "gc", "--dry-run", "--cache-dir", f.cache.string()});
  CHECK_THAT(dry_stamps.out, Catch::Contains("would remove " + gone.filename().string() + ".verified (its entry is gone)"));
  CHECK(fs::exists(gone.string() + ".verified"));
  Result sweep = run_cli({"cache", "gc", "--cache-dir", f.cache.string()});
  REQUIRE(sweep.exit_code == 0);
  CHECK_THAT(sweep.out, Catch::Contains("removed " + gone.filename().string() + ".verified"));
  CHECK_FALSE(fs::exists(gone.string() + ".verified"));
  CHECK(fs::exists(kept.string() + ".verified"));
  CHECK(entries(f.cache).size() == 1);
}

TEST_CASE("cache options are validated with locations") {
  auto dir = scratch_dir("cache-options");
  write_file(dir / "g.yaml", "nodes:\n"
                             "  a: {type: core.range, params: {count: 3}, cache: {hsh: full, compression: 12}}\n"
                             "  b: {type: core.sink}\n"
                             "edges: [a -> b]\n");
  Result r = run_cli({"validate", (dir / "g.yaml").string()});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("g.yaml:2:"));
  CHECK_THAT(r.err, Catch::Contains("unknown parameter 'hsh'; did you mean 'hash'?"));
  CHECK_THAT(r.err, Catch::Contains("compression"));
}

TEST_CASE("a compressed cached source and a cached batcher replay batches with their sizes") {
  auto dir = scratch_dir("cache-multiport");
  fs::path cache = dir / "cache";
  // core.range is cached with deflate; the batch node downstream replays identically.
  write_file(dir / "g.yaml", "seed: 1\nnodes:\n"
                             "  numbers: {type: core.range, params: {count: 100}, cache: {compression: 4}}\n"
                             "  batches: {type: core.batch, params: {size: 8}, cache: true}\n"
                             "  show: {type: core.sink, params: {mode: print, out: " + (dir / "p.txt").string() + "}}\n"
                             "edges: [numbers -> batches, batches -> show]\n");
  REQUIRE(run_cli({"run", (dir / "g.yaml").string(), "--cache-dir", cache.string()}).exit_code == 0);
  std::string first = read_file(dir / "p.txt");
  Result second = run_cli({"run", (dir / "g.yaml").string(), "--cache-dir", cache.string(), "--explain-cache"});
  REQUIRE(second.exit_code == 0);
  CHECK_THAT(second.err, Catch::Contains("batches: hit"));
  CHECK_THAT(second.err, Catch::Contains("numbers: skipped: hit, and no running node consumes it"));
  CHECK(read_file(dir / "p.txt") == first);  // batches replay with their sizes (the last is short)
  CHECK_THAT(first, Catch::Contains("{index: [96, 97, 98, 99], value: ["));
}

TEST_CASE("a string column edited inside an entry is caught by its checksum, warned about and rebuilt") {
  Fixture f("cache-string-edited", 200);
  REQUIRE(f.run().exit_code == 0);
  const std::string expected = read_file(f.printed);
  auto files = entries(f.cache);
  REQUIRE(files.size() == 1);
  const fs::path entry = files[0];
  // HDF5 has no checksum filter for variable-length strings: rewrite one row of the `text`
  // column through h5py, leaving every structure, the record index and the fingerprint valid.
  Result edit = run_python(R"(
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    text = f["out"]["text"]
    assert text[3].decode() == "line 3", text[3]
    text[3] = "line 3 edited"
print("edited")
)",
                           {entry.string()});
  INFO(edit.out << edit.err);
  REQUIRE(edit.exit_code == 0);

  Result r = f.run();
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("cache file " + entry.string() + " is corrupt") &&
                        Catch::Contains("string column '/out/text' does not match its checksum"));
  CHECK(count_lines(f.log) == 2);  // rebuilt from the reader, not replayed
  CHECK(read_file(f.printed) == expected);
  Result hit = f.run({"--explain-cache"});
  CHECK_THAT(hit.err, Catch::Contains("shuffle: hit"));
  CHECK(count_lines(f.log) == 2);
}

// core.shard taking its place from the launcher (world_size 0, rank -1) has the same parameters on
// every rank: the key holds the resolved place, so the ranks sharing a cache directory each write
// and replay their own share, and a rank run again replays its own.
TEST_CASE("a sharding node placed by WORLD_SIZE and RANK is cached per rank") {
  fs::path dir = scratch_dir("cache-ranks");
  const fs::path graph = dir / "g.yaml";
  auto printed = [&](int rank) { return dir / ("rank" + std::to_string(rank) + ".txt"); };
  auto run = [&](int rank) {
    write_file(graph, "# cached shard\nnodes:\n"
                      "  numbers: {type: core.range, params: {count: 10}}\n"
                      "  rows:    {type: core.batch, params: {size: 5}}\n"
                      "  shard:   {type: core.shard, cache: true}\n"
                      "  show:    {type: core.sink, params: {mode: print, out: " + printed(rank).string() + "}}\n"
                      "edges: [numbers.out -> rows.in, rows.out -> shard.in, shard.out -> show.in]\n");
    return run_cli({"run", graph.string(), "--cache-dir", (dir / "cache").string(), "--explain-cache"},
                   {"WORLD_SIZE=2", "RANK=" + std::to_string(rank)});
  };
  Result r0 = run(0), r1 = run(1);
  INFO(r0.err << r1.err);
  REQUIRE(r0.exit_code == 0);
  REQUIRE(r1.exit_code == 0);
  CHECK_THAT(r1.err, Catch::Contains("shard: miss"));
  CHECK(read_file(printed(0)) == "{index: [0, 1], value: [0, 1], unsharded_rows: [5, 5]}\n"
                                 "{index: [5, 6], value: [5, 6], unsharded_rows: [5, 5]}\n");
  CHECK(read_file(printed(1)) == "{index: [2, 3, 4], value: [2, 3, 4], unsharded_rows: [5, 5, 5]}\n"
                                 "{index: [7, 8, 9], value: [7, 8, 9], unsharded_rows: [5, 5, 5]}\n");
  CHECK(entries(dir / "cache").size() == 2);
  fs::remove(printed(1));
  Result again = run(1);
  REQUIRE(again.exit_code == 0);
  CHECK_THAT(again.err, Catch::Contains("shard: hit"));
  CHECK(read_file(printed(1)) == "{index: [2, 3, 4], value: [2, 3, 4], unsharded_rows: [5, 5, 5]}\n"
                                 "{index: [7, 8, 9], value: [7, 8, 9], unsharded_rows: [5, 5, 5]}\n");
}
