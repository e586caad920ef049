// Cursor: sequential or chunk-aware shuffled replay of a Table in large slabs, with prefetch on a
// background thread; shuffled batches are gathered row by row from the file mapping.

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <random>
#include <thread>

#include "column.hpp"
#include "embedflow/parallel.hpp"
#include "embedflow/rng.hpp"

namespace embedflow::hdf5 {
using detail::raw_buffer;
using detail::select_columns;

namespace {

// Rows of every selected column for one contiguous block of the file, or for all the ranges of
// a joined load, concatenated.
struct Slab {
  std::vector<Array> columns;
};
using SlabPtr = std::shared_ptr<const Slab>;
// A load's blocks, one slab each: separate chunk-sized buffers rather than one window-sized
// one, so they recycle through the buffer pool.
using LoadData = std::vector<SlabPtr>;

// One read: blocks (row ranges) to fetch, and the units to return from them, in order. A unit
// is [begin, end) rows within one block.
struct Unit {
  std::uint32_t block;
  std::int64_t begin, end;
};
struct Load {
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
  std::vector<Unit> units;
  // Joined (a sharded cursor's loads): the ranges ascend and are read together into one slab
  // (Column::read_ranges), range k starting at its row offsets[k]. Empty: one slab per range.
  std::vector<std::int64_t> offsets;
};

}  // namespace

struct Cursor::Impl {
  std::shared_ptr<const Table> table;  // a copy: keeps columns and file open
  std::vector<std::size_t> columns;
  std::vector<std::string> names;
  ReadOptions options;
  bool slice_records = false;  // units are stored batches (slice) rather than single rows
  std::vector<Load> loads;
  BufferPool* pool = &BufferPool::instance();
  // Prefetch: one worker reads loads in order into `ready`, at most kDepth ahead.
  static constexpr std::size_t kDepth = 2;
  std::thread worker;
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<LoadData> ready;
  std::exception_ptr failure;
  bool stopping = false;
  std::size_t next_load = 0;  // next load the consumer takes (without prefetch: reads)
  LoadData slab;
  std::size_t current_load = 0;
  std::size_t unit_in_load = 0;
  std::int64_t total_units = 0, returned = 0, total_out = 0;
  std::atomic<std::int64_t> rows_read{0};
  // Sharded batches (batch_size > 0, or stored batches): per record returned, the rank's rows and
  // the unsharded batch's rows (its unsharded_rows).
  bool sharded = false;
  std::int64_t first_unit = 0;  // the first unit selected (start, clamped)
  std::vector<std::int64_t> shard_rows, shard_unsharded;
  // Columns gathered straight from the file mapping (shuffled batches), parallel to `columns`.
  std::vector<bool> mapped;
  bool any_mapped = false;
  // Rows collected for the batch being built.
  struct Pending {
    SlabPtr slab;
    std::int64_t row;     // within the slab
    std::int64_t global;  // within the table
  };
  std::vector<Pending> pending;

  ~Impl() {
    if (worker.joinable()) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        stopping = true;
      }
      changed.notify_all();
      worker.join();
    }
  }

  LoadData read_load(std::size_t i) {
    LoadData blocks;
    std::int64_t rows = 0;
    for (const auto& range : loads[i].ranges) rows += range.second - range.first;
    rows_read.fetch_add(columns.empty() ? 0 : rows, std::memory_order_relaxed);
    if (!loads[i].offsets.empty()) {
      auto s = std::make_shared<Slab>();
      for (std::size_t c = 0; c < columns.size(); ++c) {
        const Table::Column& col = *table->columns_[columns[c]];
        if (mapped[c]) {  // the rows are copied from the mapping in gather()
          for (const auto& span : col.spans(loads[i].ranges)) col.will_need(span.begin, span.end);
          s->columns.emplace_back();
        } else {
          s->columns.push_back(col.read_ranges(loads[i].ranges, pool));
        }
      }
      blocks.push_back(std::move(s));
      return blocks;
    }
    for (const auto& range : loads[i].ranges) {
      auto s = std::make_shared<Slab>();
      for (std::size_t i = 0; i < columns.size(); ++i) {
        const Table::Column& col = *table->columns_[columns[i]];
        if (mapped[i]) {
          col.will_need(range.first, range.second);
          s->columns.emplace_back();
        } else {
          s->columns.push_back(col.read_ranges({range}, pool));
        }
      }
      blocks.push_back(std::move(s));
    }
    return blocks;
  }

  void start_prefetch() {
    if (!options.prefetch || loads.size() < 2) return;
    worker = std::thread([this] {
      try {
        for (std::size_t i = 0; i < loads.size(); ++i) {
          {
            std::unique_lock<std::mutex> lock(mutex);
            changed.wait(lock, [this] { return stopping || ready.size() < kDepth; });
            if (stopping) return;
          }
          LoadData s = read_load(i);
          {
            std::lock_guard<std::mutex> lock(mutex);
            ready.push_back(std::move(s));
          }
          changed.notify_all();
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        failure = std::current_exception();
        changed.notify_all();
      }
    });
  }

  // Advances to the next load; false at the end.
  bool advance() {
    slab.clear();  // lets its buffers return to the pool once emitted records are dropped
    if (next_load >= loads.size()) return false;
    if (!worker.joinable()) {
      slab = read_load(next_load);
    } else {
      std::unique_lock<std::mutex> lock(mutex);
      changed.wait(lock, [this] { return !ready.empty() || failure; });
      if (ready.empty()) std::rethrow_exception(failure);
      slab = std::move(ready.front());
      ready.pop_front();
      lock.unlock();
      changed.notify_all();
    }
    current_load = next_load++;
    unit_in_load = 0;
    return true;
  }

  Record make_slice(const Slab& s, std::int64_t b, std::int64_t e) const {
    Record r;
    for (std::size_t i = 0; i < names.size(); ++i) r.set(names[i], s.columns[i].slice(b, e));
    return r;
  }

  Record make_row(const Slab& s, std::int64_t row) const {
    Record r;
    for (std::size_t i = 0; i < names.size(); ++i) r.set(names[i], s.columns[i].row(row));
    return r;
  }

  // Copies the pending rows into one batch (used when they are not one contiguous slice).
  Record gather() const {
    Record r;
    auto n = static_cast<std::int64_t>(pending.size());
    for (std::size_t i = 0; i < names.size(); ++i) {
      const Table::Column& col = *table->columns_[columns[i]];
      Shape shape = col.info.inner;
      shape.insert(shape.begin(), n);
      if (col.info.dtype == DType::string) {
        const Array& proto = pending[0].slab->columns[i];
        std::int64_t per_row = proto.dim(0) ? proto.numel() / proto.dim(0) : 0;
        std::vector<std::string> values;
        values.reserve(static_cast<std::size_t>(n * per_row));
        for (const auto& p : pending)
          for (std::int64_t k = 0; k < per_row; ++k) values.push_back(p.slab->columns[i].string_at(p.row * per_row + k));
        r.set(names[i], Array::strings(std::move(values)).reshape(shape));
        continue;
      }
      std::size_t row_bytes = col.row_bytes;
      auto buf = raw_buffer(pool, static_cast<std::size_t>(n) * row_bytes);
      std::uint8_t* dst = buf.get();
      auto source = [&](std::size_t k) {
        if (mapped[i]) return col.row_address(pending[k].global);
        return static_cast<const std::uint8_t*>(pending[k].slab->columns[i].raw()) +
               static_cast<std::size_t>(pending[k].row) * row_bytes;
      };
      if (row_bytes == 8) {  // labels, ids: a fixed-size copy the compiler inlines
        for (std::size_t k = 0; k < pending.size(); ++k, dst += 8) std::memcpy(dst, source(k), 8);
      } else {
        // Rows come from random places in a window larger than the CPU caches; prefetching a
        // few rows ahead hides most of the memory latency that dominates shuffled replay.
        constexpr std::size_t kAhead = 8;
        for (std::size_t k = 0; k < pending.size(); ++k, dst += row_bytes) {
          if (k + kAhead < pending.size() && row_bytes >= 64) {
            const std::uint8_t* next = source(k + kAhead);
            for (std::size_t off = 0; off < row_bytes; off += 64) __builtin_prefetch(next + off);
          }
          std::memcpy(dst, source(k), row_bytes);
        }
      }
      std::uint8_t* p = buf.get();
      r.set(names[i], Array::wrap(col.info.dtype, shape, p, std::shared_ptr<const void>(std::move(buf), p)));
    }
    return r;
  }

  Record take_batch() {
    bool contiguous = !any_mapped;
    for (std::size_t k = 1; k < pending.size() && contiguous; ++k)
      contiguous = pending[k].slab == pending[0].slab && pending[k].row == pending[k - 1].row + 1;
    Record r = contiguous ? make_slice(*pending[0].slab, pending[0].row, pending[0].row + static_cast<std::int64_t>(pending.size()))
                          : gather();
    pending.clear();
    return r;
  }

  // A sharded batch's record: the rank's rows plus unsharded_rows, as core.shard emits it.
  RecordPtr sharded_batch(Record r) {
    const std::int64_t n = shard_rows[static_cast<std::size_t>(returned)];
    const std::int64_t whole = shard_unsharded[static_cast<std::size_t>(returned)];
    r.set("unsharded_rows", Array::from_vector<std::int64_t>({n}, std::vector<std::int64_t>(static_cast<std::size_t>(n), whole)));
    ++returned;
    return share(std::move(r));
  }

  RecordPtr next() {
    std::int64_t batch = options.batch_size;
    for (;;) {
      if (slab.empty() || unit_in_load >= loads[current_load].units.size()) {
        if (!advance()) break;
        continue;
      }
      const Load& load = loads[current_load];
      const Unit& u = load.units[unit_in_load++];
      // Joined loads have one slab, range k at offsets[k].
      const SlabPtr& block = load.offsets.empty() ? slab[u.block] : slab[0];
      const std::int64_t at = load.offsets.empty() ? 0 : load.offsets[u.block];
      if (batch == 0) {
        if (sharded && slice_records) return sharded_batch(make_slice(*block, at + u.begin, at + u.end));
        ++returned;
        return share(slice_records ? make_slice(*block, at + u.begin, at + u.end) : make_row(*block, at + u.begin));
      }
      pending.push_back(Pending{block, at + u.begin, load.ranges[u.block].first + u.begin});
      if (sharded && static_cast<std::int64_t>(pending.size()) == shard_rows[static_cast<std::size_t>(returned)])
        return sharded_batch(take_batch());
      if (!sharded && static_cast<std::int64_t>(pending.size()) == batch) {
        ++returned;
        return share(take_batch());
      }
    }
    if (!pending.empty() && !options.drop_last) {
      ++returned;
      return share(take_batch());
    }
    pending.clear();
    slab.clear();
    return nullptr;
  }

  // Cuts the selected units into loads (slabs in order, or shuffled windows of chunk-aligned
  // blocks) and starts the prefetch.
  void plan();
  // Keeps of each load only the rows of this rank's share, as joined loads (see ReadOptions).
  void shard();
};

void Cursor::Impl::plan() {
  const Table& t = *table;
  // Shuffled batches copy every row anyway: copy it once, from the page cache, rather than
  // reading blocks into buffers and copying again.
  for (std::size_t c : columns) {
    bool m = options.shuffle && options.batch_size > 0 && t.columns_[c]->direct();
    mapped.push_back(m);
    any_mapped = any_mapped || m;
  }
  slice_records = options.batch_size == 0 && t.has_records() && t.layout() == Layout::batches;
  // Units: records when replaying stored batches, rows otherwise.
  std::int64_t available = slice_records ? t.records() : t.rows();
  std::int64_t start = std::clamp<std::int64_t>(options.start, 0, available);
  std::int64_t stop = options.stop < 0 ? available : std::clamp<std::int64_t>(options.stop, start, available);
  auto unit_rows = [&](std::int64_t u) -> std::pair<std::int64_t, std::int64_t> {
    return slice_records ? std::make_pair(t.record_begin(u), t.record_end(u)) : std::make_pair(u, u + 1);
  };
  std::size_t row_bytes = 0;
  std::int64_t chunk_rows = 0;
  std::size_t widest = 0;
  for (std::size_t c : columns) {
    const auto& col = *t.columns_[c];
    std::size_t rb = col.info.dtype == DType::string ? static_cast<std::size_t>(col.row_elems) * 16 : col.row_bytes;
    row_bytes += rb;
    if (rb >= widest) {
      widest = rb;
      chunk_rows = col.info.chunk_rows;
    }
  }
  row_bytes = std::max<std::size_t>(row_bytes, 1);
  // Sequential: slabs of about slab_bytes. Shuffled: blocks of whole chunks of the widest
  // column (at least 256 KiB), so each block is one contiguous run of chunks on disk.
  std::int64_t target_rows = std::max<std::int64_t>(1, static_cast<std::int64_t>(options.slab_bytes / row_bytes));
  if (options.shuffle) {
    std::int64_t min_rows = std::max<std::int64_t>(1, static_cast<std::int64_t>((256u << 10) / row_bytes));
    std::int64_t c = chunk_rows > 0 ? chunk_rows : min_rows;
    target_rows = ((std::max(min_rows, c) + c - 1) / c) * c;
  }
  // Blocks: [unit_begin, unit_end), cut at multiples of target_rows (aligned to the dataset,
  // not to `start`, so they coincide with chunk boundaries).
  std::vector<std::pair<std::int64_t, std::int64_t>> blocks;
  for (std::int64_t u = start; u < stop;) {
    std::int64_t first_row = unit_rows(u).first;
    std::int64_t limit = (first_row / target_rows + 1) * target_rows;
    std::int64_t v = u + 1;
    while (v < stop && unit_rows(v).second <= limit) ++v;
    blocks.emplace_back(u, v);
    u = v;
  }
  total_units = stop - start;
  first_unit = start;
  if (!options.shuffle) {
    for (const auto& [ub, ue] : blocks) {
      Load l;
      std::int64_t base = unit_rows(ub).first;
      l.ranges.emplace_back(base, unit_rows(ue - 1).second);
      for (std::int64_t u = ub; u < ue; ++u) {
        auto [rb, re] = unit_rows(u);
        l.units.push_back(Unit{0, rb - base, re - base});
      }
      loads.push_back(std::move(l));
    }
  } else {
    Rng rng(options.seed);
    std::shuffle(blocks.begin(), blocks.end(), rng);
    std::int64_t window_units = options.shuffle_window;
    if (window_units <= 0) window_units = std::max<std::int64_t>(1, static_cast<std::int64_t>((16u << 20) / row_bytes));
    for (std::size_t i = 0; i < blocks.size();) {
      Load l;
      std::int64_t units = 0;
      // A window takes whole blocks until it holds window_units units (at least one block).
      while (i < blocks.size() && (units == 0 || units + (blocks[i].second - blocks[i].first) <= window_units)) {
        auto [ub, ue] = blocks[i++];
        std::int64_t base = unit_rows(ub).first;
        std::int64_t end = unit_rows(ue - 1).second;
        l.ranges.emplace_back(base, end);
        for (std::int64_t u = ub; u < ue; ++u) {
          auto [rb, re] = unit_rows(u);
          l.units.push_back(Unit{static_cast<std::uint32_t>(l.ranges.size() - 1), rb - base, re - base});
        }
        units += ue - ub;
      }
      std::shuffle(l.units.begin(), l.units.end(), rng);
      loads.push_back(std::move(l));
    }
  }
  if (options.batch_size > 0) {
    total_out = total_units / options.batch_size + (!options.drop_last && total_units % options.batch_size ? 1 : 0);
  } else {
    total_out = total_units;
  }
  if (options.shard_world_size != 0) shard();
  start_prefetch();
}

void Cursor::Impl::shard() {
  const Table& t = *table;
  const std::string path = t.path().string();
  const ParallelPlace place{options.shard_world_size, options.shard_rank};
  if (place.world_size < 1 || place.rank < 0 || place.rank >= place.world_size)
    throw ConfigError(cat(path, ": shard rank ", place.rank, " is outside [0, ", place.world_size, ")"));
  sharded = true;
  const std::int64_t batch = options.batch_size;
  if (batch > 0 || slice_records)
    for (const std::string& name : names)
      if (name == "unsharded_rows")
        throw ConfigError(cat(path, ": '", t.object(), "' has a field 'unsharded_rows' (its records were sharded already); "
                                    "leave it out of fields or read it unsharded"));
  // The batches are the unsharded cursor's: batch k holds positions [kB, kB + n) of the order.
  // Every batch returned must give each rank a row.
  if (batch > 0 && total_units > 0) {
    const std::int64_t batches = total_units / batch + (total_units % batch ? 1 : 0);
    const std::int64_t last = total_units - (batches - 1) * batch;
    const bool last_dropped = options.drop_last && last < batch;
    if (batch < place.world_size && (batches > 1 || !last_dropped))
      throw DataError(cat(path, ": batch 0 holds ", batch, " rows, fewer than the ", place.world_size,
                          " ranks sharing it; batch_size must be at least the number of ranks"));
    if (last < place.world_size && !last_dropped)
      throw DataError(cat(path, ": batch ", batches - 1, " (the last of ", batches, ") holds ", last, " of the ", total_units,
                          " rows, fewer than the ", place.world_size, " ranks sharing it; set drop_last: true"));
  }
  // Stored batches: each is split as core.shard would, so each must have a row per rank.
  if (slice_records)
    for (std::int64_t u = first_unit; u < first_unit + total_units; ++u)
      if (t.record_end(u) - t.record_begin(u) < place.world_size)
        throw DataError(cat(path, ": stored batch ", u, " of '", t.object(), "' holds ", t.record_end(u) - t.record_begin(u),
                            " rows, fewer than the ", place.world_size, " ranks sharing it"));
  const RowRange positions = rank_rows(total_units, place);  // single rows: this rank's part of the order
  std::vector<Load> kept;
  std::int64_t pos = 0;  // the unit's position in the epoch's order
  for (const Load& l : loads) {
    // This rank's rows of the load, in the order they are returned.
    std::vector<std::pair<std::int64_t, std::int64_t>> rows;
    for (const Unit& u : l.units) {
      const std::int64_t p = pos++;
      std::int64_t b = l.ranges[u.block].first + u.begin, e = l.ranges[u.block].first + u.end;
      if (batch > 0) {
        const std::int64_t first = p / batch * batch;
        const std::int64_t n = std::min(batch, total_units - first);
        if (options.drop_last && n < batch) continue;
        const RowRange mine = rank_rows(n, place);
        if (p - first < mine.first || p - first >= mine.last) continue;
        if (p - first == mine.first) {
          shard_rows.push_back(mine.last - mine.first);
          shard_unsharded.push_back(n);
        }
      } else if (slice_records) {
        const std::int64_t n = e - b;
        const RowRange mine = rank_rows(n, place);
        e = b + mine.last;
        b += mine.first;
        shard_rows.push_back(mine.last - mine.first);
        shard_unsharded.push_back(n);
      } else if (p < positions.first || p >= positions.last) {
        continue;
      }
      rows.emplace_back(b, e);
    }
    if (rows.empty()) continue;
    // The rows as ascending runs (adjacent rows merged), read together (Column::read_ranges).
    std::vector<std::pair<std::int64_t, std::int64_t>> sorted = rows;
    std::sort(sorted.begin(), sorted.end());
    Load j;
    for (const auto& r : sorted) {
      if (!j.ranges.empty() && j.ranges.back().second == r.first) j.ranges.back().second = r.second;
      else j.ranges.push_back(r);
    }
    std::int64_t offset = 0;
    for (const auto& r : j.ranges) {
      j.offsets.push_back(offset);
      offset += r.second - r.first;
    }
    for (const auto& [b, e] : rows) {
      auto k = static_cast<std::size_t>(
          std::upper_bound(j.ranges.begin(), j.ranges.end(), b, [](std::int64_t v, const auto& r) { return v < r.first; }) -
          j.ranges.begin() - 1);
      j.units.push_back(Unit{static_cast<std::uint32_t>(k), b - j.ranges[k].first, e - j.ranges[k].first});
    }
    kept.push_back(std::move(j));
  }
  loads = std::move(kept);
  if (batch > 0 || slice_records) total_out = static_cast<std::int64_t>(shard_rows.size());
  else total_out = positions.last - positions.first;
}

Cursor Table::cursor(ReadOptions options) const {
  if (options.batch_size < 0) throw ConfigError(cat(file_->path.string(), ": batch_size must be >= 0"));
  auto impl = std::make_unique<Cursor::Impl>();
  impl->table = std::make_shared<const Table>(*this);
  impl->columns = select_columns(*this, options.fields);
  for (std::size_t c : impl->columns) impl->names.push_back(fields_[c].name);
  impl->options = std::move(options);
  impl->plan();
  return Cursor(std::move(impl));
}

Cursor::Cursor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Cursor::Cursor(Cursor&&) noexcept = default;
Cursor& Cursor::operator=(Cursor&&) noexcept = default;
Cursor::~Cursor() = default;
RecordPtr Cursor::next() { return impl_->next(); }
std::int64_t Cursor::units() const { return impl_->total_out; }
std::int64_t Cursor::returned() const { return impl_->returned; }
std::int64_t Cursor::rows_read() const { return impl_->rows_read.load(std::memory_order_relaxed); }

}  // namespace embedflow::hdf5
