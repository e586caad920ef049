// Sharded reading of HDF5 tables (ReadOptions::shard_world_size / shard_rank, and io.hdf5_reader's
// shard_world_size / shard_rank): every rank walks the unsharded epoch and reads only its share.
// The tables are written by h5py, whose values (and, without shuffle, whose own reading of the
// file) are the oracle.
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <numeric>
#include <set>
#include <sstream>

#include "embedflow/hdf5/stream_file.hpp"
#include "embedflow/parallel.hpp"
#include "harness.hpp"

using namespace embedflow;
using namespace embedflow::hdf5;
namespace fs = std::filesystem;
using namespace embedflow::test;

namespace {

constexpr std::int64_t kRows = 1000;

// 1000 rows written by h5py: id i64 (chunks of 64), plain f32[8] = 8 id + k (uncompressed, so
// shuffled batches copy it from the file mapping), feature f32[300] = id + k / 1000 (deflate,
// chunks of 32 rows, so it is read through HDF5 selections), name "row-<id>" (vlen strings).
fs::path h5py_table() {
  static const fs::path file = [] {
    const fs::path f = scratch_dir("io-shard-table") / "table.h5";
    Result py = run_python(R"PY(
import sys, h5py, numpy as np
n = 1000
ids = np.arange(n, dtype=np.int64)
with h5py.File(sys.argv[1], "w") as f:
    f.create_dataset("id", data=ids, chunks=(64,))
    f.create_dataset("plain", data=np.arange(n * 8, dtype=np.float32).reshape(n, 8), chunks=(64, 8))
    f.create_dataset("feature", data=(ids[:, None] + np.arange(300)[None, :] / 1000.0).astype(np.float32),
                     chunks=(32, 300), compression="gzip", compression_opts=1)
    f.create_dataset("name", data=np.array(["row-%d" % i for i in ids], dtype=object), dtype=h5py.string_dtype())
)PY", {f.string()});
    INFO(py.out << py.err);
    REQUIRE(py.exit_code == 0);
    return f;
  }();
  return file;
}

// One record a cursor returned: its ids, and its unsharded_rows (-1 when absent).
struct Rec {
  std::vector<std::int64_t> ids;
  std::int64_t unsharded = -1;
};
struct Drained {
  std::vector<Rec> records;
  std::int64_t rows = 0, rows_read = 0;
  std::vector<std::int64_t> ids() const {
    std::vector<std::int64_t> all;
    for (const Rec& r : records) all.insert(all.end(), r.ids.begin(), r.ids.end());
    return all;
  }
};

// Every value of a record is what h5py wrote for its ids.
void check_values(const Record& r, std::int64_t n) {
  const Array& id = r.get("id");
  const Array& plain = r.get("plain");
  const Array& feature = r.get("feature");
  const Array& name = r.get("name");
  REQUIRE(plain.numel() == n * 8);
  REQUIRE(feature.numel() == n * 300);
  REQUIRE(name.numel() == n);
  for (std::int64_t k = 0; k < n; ++k) {
    const std::int64_t i = id.as_int(k);
    for (std::int64_t j = 0; j < 8; ++j) REQUIRE(plain.data<float>()[k * 8 + j] == static_cast<float>(i * 8 + j));
    for (std::int64_t j = 0; j < 300; j += 37)
      REQUIRE(feature.data<float>()[k * 300 + j] == static_cast<float>(static_cast<double>(i) + static_cast<double>(j) / 1000.0));
    REQUIRE(name.string_at(k) == "row-" + std::to_string(i));
  }
}

Drained drain(const Table& t, const ReadOptions& o) {
  Drained d;
  Cursor c = t.cursor(o);
  const std::int64_t promised = c.units();
  while (RecordPtr r = c.next()) {
    Rec rec;
    const Array& id = r->get("id");
    const std::int64_t n = id.numel();
    for (std::int64_t k = 0; k < n; ++k) rec.ids.push_back(id.as_int(k));
    check_values(*r, n);
    if (const Array* u = r->find("unsharded_rows")) {
      REQUIRE(u->numel() == n);
      rec.unsharded = u->as_int(0);
      for (std::int64_t k = 0; k < n; ++k) REQUIRE(u->as_int(k) == rec.unsharded);
    }
    d.rows += n;
    d.records.push_back(std::move(rec));
  }
  REQUIRE(static_cast<std::int64_t>(d.records.size()) == promised);
  d.rows_read = c.rows_read();
  return d;
}

}  // namespace

TEST_CASE("sharded cursors: the ranks' rows of every batch, in rank order, are the unsharded batch, and each rank "
          "reads only its rows", "[hdf5][shard][python]") {
  const Table t = open_table(h5py_table());
  struct Range {
    std::int64_t start, stop;
  };
  // 1000 rows: batches of 9 leave 1, of 10 and 25 none; rows [7, 970): 963 rows, batches of 9
  // leave none, of 10 leave 3 (fewer than 4 ranks), of 25 leave 13.
  for (Range range : {Range{0, -1}, Range{7, 970}}) {
    const std::int64_t units = (range.stop < 0 ? kRows : range.stop) - range.start;
    for (bool shuffle : {false, true}) {
      for (std::int64_t batch : {0, 9, 10, 25}) {
        for (bool drop : {false, true}) {
          if (drop && batch == 0) continue;
          for (std::uint64_t seed : {11u, 12u}) {  // two epochs' orders
            INFO("rows [" << range.start << "," << range.stop << ") shuffle " << shuffle << " batch " << batch << " drop_last "
                          << drop << " seed " << seed);
            ReadOptions o;
            o.batch_size = batch;
            o.drop_last = drop;
            o.start = range.start;
            o.stop = range.stop;
            o.shuffle = shuffle;
            o.seed = seed;
            o.shuffle_window = 300;       // several windows
            o.slab_bytes = 64 << 10;      // several sequential loads; batches straddle them
            const Drained whole = drain(t, o);
            REQUIRE(whole.rows_read == units);  // the unsharded cursor reads every row
            for (std::int64_t world : {2, 3, 4}) {
              INFO("world " << world);
              const std::int64_t last = batch > 0 ? units % batch : 0;
              const bool short_last = batch > 0 && last != 0 && last < world && !drop;
              std::vector<Drained> ranks;
              for (std::int64_t rank = 0; rank < world; ++rank) {
                ReadOptions s = o;
                s.shard_world_size = world;
                s.shard_rank = rank;
                if (short_last) {
                  CHECK_THROWS_WITH(t.cursor(s), Catch::Contains("table.h5: batch " + std::to_string(units / batch)) &&
                                                     Catch::Contains("holds " + std::to_string(last) + " of the " +
                                                                     std::to_string(units) + " rows, fewer than the " +
                                                                     std::to_string(world) + " ranks"));
                  continue;
                }
                ranks.push_back(drain(t, s));
                const Drained& mine = ranks.back();
                // Reads exactly the rows it returns: a cursor that read everything and dropped
                // the rest would count `units` here.
                CHECK(mine.rows_read == mine.rows);
                CHECK(mine.rows_read < whole.rows_read);
              }
              if (short_last) continue;
              std::set<std::int64_t> union_ids;
              for (const Drained& d : ranks)
                for (std::int64_t id : d.ids()) REQUIRE(union_ids.insert(id).second);  // disjoint
              const std::vector<std::int64_t> all = whole.ids();
              CHECK(union_ids == std::set<std::int64_t>(all.begin(), all.end()));
              if (!drop) CHECK(static_cast<std::int64_t>(union_ids.size()) == units);
              if (batch == 0) {
                // Per row: rank r holds positions rank_rows(units) of the order.
                std::vector<std::int64_t> joined;
                for (std::int64_t rank = 0; rank < world; ++rank) {
                  const RowRange share = rank_rows(units, ParallelPlace{world, rank});
                  const std::vector<std::int64_t> mine = ranks[static_cast<std::size_t>(rank)].ids();
                  CHECK(std::vector<std::int64_t>(all.begin() + share.first, all.begin() + share.last) == mine);
                  for (const Rec& r : ranks[static_cast<std::size_t>(rank)].records) CHECK(r.unsharded == -1);
                  joined.insert(joined.end(), mine.begin(), mine.end());
                }
                CHECK(joined == all);
                continue;
              }
              for (const Drained& d : ranks) REQUIRE(d.records.size() == whole.records.size());  // equal step counts
              for (std::size_t b = 0; b < whole.records.size(); ++b) {
                const auto n = static_cast<std::int64_t>(whole.records[b].ids.size());
                std::vector<std::int64_t> joined;
                for (std::int64_t rank = 0; rank < world; ++rank) {
                  const Rec& r = ranks[static_cast<std::size_t>(rank)].records[b];
                  const RowRange share = rank_rows(n, ParallelPlace{world, rank});
                  CHECK(static_cast<std::int64_t>(r.ids.size()) == share.last - share.first);
                  CHECK(r.unsharded == n);
                  joined.insert(joined.end(), r.ids.begin(), r.ids.end());
                }
                REQUIRE(joined == whole.records[b].ids);
              }
            }
          }
        }
      }
    }
  }
}

TEST_CASE("a sharded read asks the kernel for about 1/W of the bytes, sequential and shuffled", "[hdf5][shard][python]") {
  // /proc/self/io's rchar counts the bytes the process's read calls returned (page cache hits
  // included), independently of the cursor's own count. 2000 rows of 4 KiB, chunks of 16 rows,
  // uncompressed; x is native f32, xbe big-endian f32 (converted on reading, so shuffled batches
  // read it through HDF5 as well rather than copying it from the file mapping).
  const fs::path file = scratch_dir("io-shard-bytes") / "wide.h5";
  Result py = run_python(R"PY(
import sys, h5py, numpy as np
x = np.arange(2000 * 1024, dtype=np.float32).reshape(2000, 1024)
with h5py.File(sys.argv[1], "w") as f:
    f.create_dataset("x", data=x, chunks=(16, 1024))
    f.create_dataset("xbe", data=x.astype(">f4"), chunks=(16, 1024))
)PY", {file.string()});
  INFO(py.out << py.err);
  REQUIRE(py.exit_code == 0);
  auto rchar = [] {
    std::ifstream io("/proc/self/io");
    std::string key;
    std::int64_t value = 0;
    while (io >> key >> value)
      if (key == "rchar:") return value;
    FAIL("no rchar in /proc/self/io");
    return std::int64_t{0};
  };
  const Table t = open_table(file);
  struct Pass {
    std::int64_t bytes = 0, rows = 0;
  };
  auto pass = [&](const std::string& field, bool shuffle, std::int64_t world, std::int64_t rank) {
    ReadOptions o;
    o.fields = {field};
    o.batch_size = 64;
    o.shuffle = shuffle;
    o.seed = 3;
    o.prefetch = false;  // the reads happen on this thread, between the two samples
    o.shard_world_size = world;
    o.shard_rank = rank;
    Pass p;
    const std::int64_t before = rchar();
    Cursor c = t.cursor(o);
    while (RecordPtr r = c.next()) {
      const Array& x = r->get(field);
      for (std::int64_t k = 0; k < x.dim(0); ++k) REQUIRE(std::fmod(x.data<float>()[k * 1024], 1024.0f) == 0.0f);
      p.rows += x.dim(0);
    }
    p.bytes = rchar() - before;
    return p;
  };
  for (const auto& [field, shuffle] : {std::make_pair(std::string("x"), false), std::make_pair(std::string("xbe"), true)}) {
    const Pass whole = pass(field, shuffle, 0, 0);
    REQUIRE(whole.rows == 2000);
    CHECK(whole.bytes >= 2000 * 4096);
    for (std::int64_t world : {2, 4}) {
      for (std::int64_t rank = 0; rank < world; ++rank) {
        const Pass mine = pass(field, shuffle, world, rank);
        INFO(field << " shuffle " << shuffle << " world " << world << " rank " << rank << ": " << mine.bytes << " of " << whole.bytes
                   << " bytes");
        CHECK(mine.rows * world == 2000);
        CHECK(mine.bytes >= mine.rows * 4096);
        CHECK(static_cast<double>(mine.bytes) < 1.15 * static_cast<double>(whole.bytes) / static_cast<double>(world));
      }
    }
  }
}

TEST_CASE("sharded replay of stored batches splits each one as core.shard would", "[hdf5][shard]") {
  const fs::path dir = scratch_dir("io-shard-stored");
  const std::vector<std::int64_t> sizes = {5, 7, 12, 4, 9, 16, 6, 4, 11, 8, 13, 5};
  {
    StreamFileWriter w(dir / "batches.h5");
    std::int64_t first = 0;
    for (std::int64_t n : sizes) {
      std::vector<std::int64_t> ids(static_cast<std::size_t>(n));
      std::iota(ids.begin(), ids.end(), first);
      Record r;
      r.set("id", Array::from_vector<std::int64_t>({n}, ids));
      w.append("out", r);
      first += n;
    }
    w.commit();
  }
  StreamFileReader reader(dir / "batches.h5");
  const Table& t = reader.port("out");
  for (bool shuffle : {false, true}) {
    for (std::int64_t start : {0, 3}) {
      ReadOptions o;
      o.shuffle = shuffle;
      o.seed = 5;
      o.start = start;  // counts stored batches
      std::vector<std::vector<std::int64_t>> whole;
      {
        Cursor c = t.cursor(o);
        while (RecordPtr r = c.next()) {
          const Array& id = r->get("id");
          whole.emplace_back(id.data<std::int64_t>(), id.data<std::int64_t>() + id.numel());
        }
      }
      REQUIRE(whole.size() == sizes.size() - static_cast<std::size_t>(start));
      for (std::int64_t world : {2, 3, 4}) {
        std::vector<std::vector<RecordPtr>> ranks(static_cast<std::size_t>(world));
        std::int64_t read = 0;
        for (std::int64_t rank = 0; rank < world; ++rank) {
          ReadOptions s = o;
          s.shard_world_size = world;
          s.shard_rank = rank;
          Cursor c = t.cursor(s);
          while (RecordPtr r = c.next()) ranks[static_cast<std::size_t>(rank)].push_back(r);
          read += c.rows_read();
          CHECK(ranks[static_cast<std::size_t>(rank)].size() == whole.size());
        }
        std::int64_t total = 0;
        for (std::size_t b = 0; b < whole.size(); ++b) {
          INFO("shuffle " << shuffle << " start " << start << " world " << world << " batch " << b);
          std::vector<std::int64_t> joined;
          for (const auto& mine : ranks) {
            const Array& id = mine[b]->get("id");
            joined.insert(joined.end(), id.data<std::int64_t>(), id.data<std::int64_t>() + id.numel());
            CHECK(mine[b]->get("unsharded_rows").as_int(0) == static_cast<std::int64_t>(whole[b].size()));
          }
          CHECK(joined == whole[b]);
          total += static_cast<std::int64_t>(whole[b].size());
        }
        CHECK(read == total);  // each row read by one rank only
      }
    }
  }
  // A stored batch of 4 rows cannot be shared by 5 ranks.
  ReadOptions five;
  five.shard_world_size = 5;
  five.shard_rank = 1;
  CHECK_THROWS_WITH(t.cursor(five), Catch::Contains("batches.h5: stored batch 3 of '/out' holds 4 rows, fewer than the 5 ranks"));
  // A rank outside the world.
  five.shard_rank = 5;
  CHECK_THROWS_AS(t.cursor(five), ConfigError);

  // Batches that carry unsharded_rows were sharded already.
  {
    StreamFileWriter w(dir / "sharded.h5");
    Record r;
    r.set("id", Array::from_vector<std::int64_t>({2}, {0, 1}));
    r.set("unsharded_rows", Array::from_vector<std::int64_t>({2}, {4, 4}));
    w.append("out", r);
    w.commit();
  }
  StreamFileReader sharded(dir / "sharded.h5");
  ReadOptions two;
  two.shard_world_size = 2;
  CHECK_THROWS_WITH(sharded.port("out").cursor(two), Catch::Contains("sharded.h5: '/out' has a field 'unsharded_rows'"));
  two.fields = {"id"};
  CHECK(sharded.port("out").cursor(two).units() == 1);
}

namespace {

// ids and unsharded_rows of every record a run collected at read.out, and the per-record sum of
// the feature values.
struct Emitted {
  std::vector<std::vector<std::int64_t>> ids;
  std::vector<std::int64_t> unsharded;
  std::vector<double> feature_sums;
};

Emitted emitted(const GraphRun& r) {
  Emitted e;
  for (const auto& rec : r.records("read.out")) {
    const Array& id = rec->get("id");
    e.ids.emplace_back(id.data<std::int64_t>(), id.data<std::int64_t>() + id.numel());
    if (const Array* u = rec->find("unsharded_rows")) e.unsharded.push_back(u->as_int(0));
    if (const Array* f = rec->find("feature")) {
      double sum = 0;
      for (std::int64_t k = 0; k < f->numel(); ++k) sum += f->data<float>()[k];
      e.feature_sums.push_back(sum);
    }
  }
  return e;
}

std::string reader_graph(const fs::path& file, const std::string& params) {
  return "seed: 4\nnodes:\n  read: {type: io.hdf5_reader, params: {path: " + file.string() + ", " + params +
         "}}\n  sink: {type: core.sink, params: {mode: count}}\nedges: [read.out -> sink.in]\n";
}

}  // namespace

TEST_CASE("io.hdf5_reader sharded without shuffle emits the rows h5py's own batching gives each rank", "[io][shard][python]") {
  const fs::path file = h5py_table();
  // h5py reads rows [7, 970) and cuts batches of 10 (drop_last), then each into 3 rank slices
  // [n r / 3, n (r+1) / 3): one line per rank and batch, "rank batch feature_sum id...".
  Result py = run_python(R"PY(
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    ids = f["id"][7:970]
    feature = f["feature"][7:970].astype(np.float64)
W, B = 3, 10
for b in range(len(ids) // B):
    for r in range(W):
        lo, hi = b * B + B * r // W, b * B + B * (r + 1) // W
        print(r, b, repr(float(feature[lo:hi].sum())), *ids[lo:hi])
)PY", {file.string()});
  INFO(py.err);
  REQUIRE(py.exit_code == 0);
  std::vector<Emitted> want(3);
  std::istringstream lines(py.out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream in(line);
    std::size_t rank = 0, batch = 0;
    double sum = 0;
    in >> rank >> batch >> sum;
    std::vector<std::int64_t> ids;
    for (std::int64_t id; in >> id;) ids.push_back(id);
    want[rank].ids.push_back(ids);
    want[rank].feature_sums.push_back(sum);
  }
  REQUIRE(want[0].ids.size() == 96);
  GraphRunner runner(plugins(), reader_graph(file, "fields: [id, feature], batch_size: 10, drop_last: true, start: 7, stop: 970"),
                     "h5py_shard.yaml");
  runner.collect("read.out");
  for (std::size_t rank = 0; rank < 3; ++rank) {
    const GraphRun r = runner.run({"read.shard_world_size=3", "read.shard_rank=" + std::to_string(rank)});
    INFO(r.message());
    REQUIRE(r.exit_code == 0);
    const Emitted got = emitted(r);
    CHECK(got.ids == want[rank].ids);
    REQUIRE(got.feature_sums.size() == want[rank].feature_sums.size());
    for (std::size_t b = 0; b < got.feature_sums.size(); ++b)
      CHECK(got.feature_sums[b] == Approx(want[rank].feature_sums[b]).epsilon(1e-9));
    CHECK(got.unsharded == std::vector<std::int64_t>(96, 10));
  }
}

TEST_CASE("io.hdf5_reader sharded and shuffled over two epochs: rank slices concatenate to the unsharded batches; "
          "WORLD_SIZE/RANK give the same share; bad places and short batches are located errors", "[io][shard][python]") {
  const fs::path file = h5py_table();
  GraphRunner runner(plugins(), reader_graph(file, "fields: [id, plain], batch_size: 25, shuffle: true, shuffle_window: 300, "
                                                   "epochs: 2, start: 7, stop: 970"),
                     "shard.yaml");
  runner.collect("read.out");
  const GraphRun whole_run = runner.run();
  INFO(whole_run.message());
  REQUIRE(whole_run.exit_code == 0);
  const Emitted whole = emitted(whole_run);
  REQUIRE(whole.ids.size() == 2 * 39);  // 963 rows: 38 batches of 25 and one of 13, per epoch
  CHECK(whole.ids[0] != whole.ids[39]);  // the epochs' orders differ
  CHECK(whole.unsharded.empty());
  {
    // The world from an environment without WORLD_SIZE is one rank: every row, with the
    // unsharded_rows the schema declares.
    const char* launcher = std::getenv("WORLD_SIZE");
    if (!launcher) {
      const GraphRun one = runner.run({"read.shard_world_size=0"});
      INFO(one.message());
      REQUIRE(one.exit_code == 0);
      const Emitted e = emitted(one);
      CHECK(e.ids == whole.ids);
      REQUIRE(e.unsharded.size() == whole.ids.size());
      for (std::size_t b = 0; b < whole.ids.size(); ++b) CHECK(e.unsharded[b] == static_cast<std::int64_t>(whole.ids[b].size()));
    }
  }
  for (std::int64_t world : {2, 3, 4}) {
    INFO("world " << world);
    std::vector<Emitted> ranks;
    for (std::int64_t rank = 0; rank < world; ++rank) {
      const GraphRun r = runner.run({"read.shard_world_size=" + std::to_string(world), "read.shard_rank=" + std::to_string(rank)});
      INFO(r.message());
      REQUIRE(r.exit_code == 0);
      ranks.push_back(emitted(r));
      // The launcher's variables name the same share.
      ScopedEnv w("WORLD_SIZE", std::to_string(world)), k("RANK", std::to_string(rank));
      const GraphRun env = runner.run({"read.shard_world_size=0"});
      INFO(env.message());
      REQUIRE(env.exit_code == 0);
      CHECK(emitted(env).ids == ranks.back().ids);
    }
    for (const Emitted& e : ranks) REQUIRE(e.ids.size() == whole.ids.size());
    for (std::size_t b = 0; b < whole.ids.size(); ++b) {
      std::vector<std::int64_t> joined;
      for (const Emitted& e : ranks) {
        joined.insert(joined.end(), e.ids[b].begin(), e.ids[b].end());
        CHECK(e.unsharded[b] == static_cast<std::int64_t>(whole.ids[b].size()));
      }
      CHECK(joined == whole.ids[b]);
    }
  }
  // Per row (batch_size 0): rank r's records are positions rank_rows(963) of each epoch's order.
  const GraphRun rows_run = runner.run({"read.batch_size=0"});
  REQUIRE(rows_run.exit_code == 0);
  const Emitted rows = emitted(rows_run);
  REQUIRE(rows.ids.size() == 2 * 963);
  std::vector<std::vector<std::int64_t>> joined(2);
  for (std::int64_t rank = 0; rank < 3; ++rank) {
    const GraphRun r = runner.run({"read.batch_size=0", "read.shard_world_size=3", "read.shard_rank=" + std::to_string(rank)});
    INFO(r.message());
    REQUIRE(r.exit_code == 0);
    const Emitted e = emitted(r);
    REQUIRE(e.ids.size() == 2 * 321);
    CHECK(e.unsharded.empty());
    for (std::size_t i = 0; i < e.ids.size(); ++i) joined[i / 321].push_back(e.ids[i][0]);
  }
  for (std::size_t epoch = 0; epoch < 2; ++epoch)
    for (std::size_t i = 0; i < 963; ++i) REQUIRE(joined[epoch][i] == rows.ids[epoch * 963 + i][0]);

  // A last batch of 3 rows cannot be shared by 4 ranks: the error names node, epoch and batch.
  const GraphRun small = runner.run({"read.batch_size=10", "read.shard_world_size=4", "read.shard_rank=1"});
  CHECK(small.exit_code == 1);
  CHECK_THAT(small.error, Catch::Contains("'read'") && Catch::Contains("epoch 0: ") &&
                              Catch::Contains("table.h5: batch 96 (the last of 97) holds 3 of the 963 rows, fewer than the 4 ranks"));
  CHECK(runner.run({"read.batch_size=10", "read.drop_last=true", "read.shard_world_size=4", "read.shard_rank=1"}).exit_code == 0);
  // A rank outside the world is refused at load, located at the node's parameter.
  const GraphRun bad = runner.run({"read.shard_world_size=2", "read.shard_rank=2"});
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.problem_text(), Catch::Contains("--set read.shard_rank=2: node 'read': ") &&
                                     Catch::Contains("shard_world_size / shard_rank: rank 2 is outside [0, 2)"));
  // An explicit world the launcher contradicts, too.
  ScopedEnv w("WORLD_SIZE", "3");
  const GraphRun disagree = runner.run({"read.shard_world_size=2", "read.shard_rank=0"});
  CHECK(disagree.exit_code == 2);
  CHECK_THAT(disagree.problem_text(), Catch::Contains("world_size 2 disagrees with the launcher's WORLD_SIZE=3"));
}
