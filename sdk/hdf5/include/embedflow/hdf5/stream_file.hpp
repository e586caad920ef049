// HDF5 stream files: a record stream stored so that it replays exactly, and plain HDF5 tables
// (h5py-written groups of same-length datasets) read as rows. Used by the engine for
// `cache: true` and by the io plugin family (io.hdf5_reader, io.hdf5_writer).
//
// File layout (format "embedflow-stream/1"; see docs/hdf5.md):
//   /                       attributes: embedflow_format, embedflow_version, created (UTC ISO
//                           8601), complete = 1, ports (string list), plus the writer's own
//                           (fingerprint, graph, node, ...), all variable-length UTF-8 strings
//   /<port>/                one group per output port; attributes layout ("records"|"batches"),
//                           fields (string list, in record order), records, rows (i64)
//   /<port>/<field>         one chunked dataset per field, shape [rows, inner...], leading axis
//                           extensible; optional deflate; strings are variable-length UTF-8;
//                           bool is h5py's enum {FALSE, TRUE} over int8
//   /<port>/record_offsets  i64[records]: first row of each record
//   /<port>/record_sizes    i64[records]: rows of each record
// Layout "records": each record is one row and replays without the leading axis (a record
// {image: u8[28,28], label: i64[]} is stored as image u8[N,28,28], label i64[N]).
// Layout "batches": each record contributes its leading dimension's rows and replays as a slice
// with its original size. The first record of a port fixes its layout, field names, dtypes and
// inner shapes; a later record that differs is a DataError naming the port and record index.
//
// Crash safety: StreamFileWriter writes `<final>.tmp-<pid>-<n>` and renames it to the final
// name only in commit(), after fsync of the file (and then of the directory). A file at the final
// name therefore was complete when written; StreamFileReader still verifies the `complete`
// attribute and every dataset length, and reports damage as CorruptFileError.
//
// Thread safety: a writer serialises its own appends (an internal mutex), a reader may be used
// from several threads, each cursor from one thread at a time. HDF5 itself is built thread-safe
// on Debian (one global lock), so reads overlap only with non-HDF5 work.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "embedflow/error.hpp"
#include "embedflow/record.hpp"

namespace embedflow::hdf5 {

inline constexpr const char* kFormat = "embedflow-stream/1";

// Version of the HDF5 library this was built against, e.g. "1.10.8".
const char* hdf5_version();

// The file exists but is not a usable stream file: truncated, not HDF5, not committed, or its
// datasets disagree with its record index. A cache treats this as "delete and rebuild".
class CorruptFileError : public DataError {
 public:
  CorruptFileError(std::filesystem::path path, const std::string& what);
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A field of a port or table: dtype and the shape of one row (without the leading axis).
struct FieldInfo {
  std::string name;
  DType dtype = DType::f32;
  Shape inner;
  std::int64_t chunk_rows = 0;  // rows per HDF5 chunk (0 = contiguous dataset)
};

enum class Layout { records, batches };
const char* layout_name(Layout l);

// ---------------------------------------------------------------------------------------------
// Writing

struct WriterOptions {
  int deflate_level = 0;                  // 0 = uncompressed, 1..9 = deflate (with byte shuffle)
  std::size_t chunk_bytes = 1u << 20;     // target bytes per chunk; chunks span whole rows
  std::size_t flush_bytes = 8u << 20;     // per field: buffered bytes that trigger a slab write
  bool fsync = true;                      // fsync the file and its directory in commit()
  // Continue an existing stream file at the final path instead of replacing it. The existing
  // file is copied to the temporary name first, so a crash leaves it untouched.
  bool append = false;
  // HDF5's Fletcher32 filter on every fixed-size dataset: each chunk carries a checksum of its
  // stored bytes. HDF5 allows no filter on variable-length strings, so each string column gets a
  // checksum of its strings (attribute `embedflow_checksum`, and `string_checksums` on the root).
  // StreamFileReader::verify_checksums() checks both (stage caches turn this on). Costs the
  // unfiltered direct-read path on replay, so plain exports leave it off.
  bool checksum = false;
};

class StreamFileWriter {
 public:
  // Creates `<final_path>.tmp-<pid>-<n>` (parent directories must exist). `attributes` are
  // stored on the root group beside the standard ones; "created" and "embedflow_version" are
  // filled in unless given.
  StreamFileWriter(std::filesystem::path final_path, std::map<std::string, std::string> attributes = {},
                   WriterOptions options = {});
  // Without commit(): closes and deletes the temporary file; the final path is untouched.
  ~StreamFileWriter();
  StreamFileWriter(const StreamFileWriter&) = delete;
  StreamFileWriter& operator=(const StreamFileWriter&) = delete;

  // Declares a port so it is present even if no record arrives (an empty stream replays as
  // empty). `layout` forces the layout; otherwise the first record decides: "batches" when every
  // field has rank >= 1 and all share the leading dimension, else "records".
  void add_port(const std::string& port, std::optional<Layout> layout = std::nullopt);
  // Appends one record to a port (declaring it if needed). Copies the data into a buffer that
  // is written in slabs of whole chunks. Throws DataError naming the file, port and record index
  // when the record does not match the port's schema.
  void append(const std::string& port, const Record& record);
  void set_attribute(const std::string& key, const std::string& value);

  // Writes what is buffered, the record index and attributes; closes, fsyncs, renames to the
  // final path and fsyncs the directory. After commit() the writer accepts nothing more.
  void commit();
  // commit() to another name.
  void commit_as(const std::filesystem::path& target);
  // What an interrupted run keeps (`<path>.partial`): committed like commit_as(), but marked as
  // cut short, `complete` = 0 and a `partial` attribute saying why, so no reader takes it for a
  // whole stream (StreamFileReader refuses it unless asked for a partial file).
  void commit_partial(const std::filesystem::path& target);
  // Drops everything written so far (what the destructor does without commit()).
  void abort();

  const std::filesystem::path& final_path() const { return final_path_; }
  const std::filesystem::path& temp_path() const { return temp_path_; }
  std::int64_t records(const std::string& port) const;  // appended so far (incl. existing on append)
  bool committed() const { return committed_; }

  // If `path` is a writer's temporary file name, the pid of the process that wrote it (for
  // garbage-collecting temporaries left by killed runs: a pid that no longer runs).
  static std::optional<long> temp_owner_pid(const std::filesystem::path& path);

  struct Impl;

 private:
  void commit_to(const std::filesystem::path& target, bool partial);
  std::filesystem::path final_path_, temp_path_;
  std::unique_ptr<Impl> impl_;
  mutable std::mutex mutex_;
  bool committed_ = false;
};

// ---------------------------------------------------------------------------------------------
// Reading

class File;  // an open HDF5 file (shared by readers and cursors)

// How a Table is replayed.
struct ReadOptions {
  std::vector<std::string> fields;  // subset to read, in this order; empty = all
  // 0: units as stored: records of a stream-file port (batches keep their sizes), or single
  //    rows of a plain table (each without the leading axis).
  // N: batches of N rows (the last may be smaller unless drop_last).
  std::int64_t batch_size = 0;
  bool drop_last = false;
  // Range of units: records when batch_size == 0 and the table has record boundaries, rows
  // otherwise. stop < 0 = to the end. Applied before shuffling.
  std::int64_t start = 0, stop = -1;
  // Chunk-aware shuffle: units are grouped into blocks aligned to the HDF5 chunks; the block
  // order is permuted, then units are permuted within windows of consecutive (permuted) blocks.
  // Every read is a contiguous run of whole chunks, so shuffled replay costs about as much I/O
  // as sequential replay. Shuffled batches of uncompressed, unconverted columns are copied row
  // by row straight from the file's mapped page cache (one copy instead of read + gather).
  bool shuffle = false;
  std::uint64_t seed = 0;
  std::int64_t shuffle_window = 0;      // units per window; 0 = about 16 MiB of data
  std::size_t slab_bytes = 1u << 20;    // sequential read size (whole chunks at the default chunk size)
  bool prefetch = true;                 // read the next slab on a background thread
  // Data-parallel sharding, rank `shard_rank` of `shard_world_size` (a ParallelPlace,
  // embedflow/parallel.hpp; world 0 = off). The cursor walks the unsharded epoch (same units,
  // same seeded order, same batches) and reads and returns only the rank's share of it, through
  // rank_rows (a world of 1 keeps everything but still adds unsharded_rows, which a node's
  // schema promises when its world comes from the environment):
  //   batch_size N > 0  rows rank_rows(n) of every batch of n rows, plus a field
  //                     `unsharded_rows: i64[rows]` holding n (what core.shard would add), so
  //                     every rank returns the same number of batches. A batch of fewer than
  //                     shard_world_size rows that drop_last does not drop is a DataError.
  //   0, stored batches rows rank_rows(n) of every stored batch of n rows, with unsharded_rows,
  //                     the same way (a stored batch of fewer rows than ranks is a DataError; a
  //                     port that already has an `unsharded_rows` field is a ConfigError).
  //   0, single rows    positions rank_rows(units) of the epoch's order.
  // Only the share is read. Without shuffle a rank's part of a batch is one contiguous
  // hyperslab, read as such. Shuffled, each window's rows of the rank are read in ascending
  // runs: a deflated column reads only the chunks holding them (whole, as HDF5 must), others
  // only the rows, merging runs less than a page apart (the kernel reads those pages anyway);
  // columns copied from the file mapping copy and prefetch only the rank's rows.
  std::int64_t shard_world_size = 0;
  std::int64_t shard_rank = 0;
};

class Cursor;

// Rows of a set of same-length datasets: a stream-file port, a plain group (h5py), or a single
// dataset (one field named after it).
class Table {
 public:
  const std::filesystem::path& path() const;
  const std::string& object() const;  // "/out", "/", "/images"
  std::int64_t rows() const { return rows_; }
  const std::vector<FieldInfo>& fields() const { return fields_; }
  const FieldInfo& field(const std::string& name) const;  // ConfigError listing the fields
  // Stream-file ports have record boundaries; plain tables do not (every row is a unit).
  bool has_records() const { return !offsets_.empty(); }
  Layout layout() const { return layout_; }
  std::int64_t records() const;                  // units when batch_size == 0
  std::int64_t record_begin(std::int64_t i) const;  // first row of record i
  std::int64_t record_end(std::int64_t i) const;

  // Rows [begin, end) of the named fields (all when empty), each with the leading axis.
  Record read_rows(std::int64_t begin, std::int64_t end, const std::vector<std::string>& fields = {}) const;
  // Record i as stored (random access); rows tables return row i without the leading axis.
  RecordPtr read_record(std::int64_t i, const std::vector<std::string>& fields = {}) const;
  // Sequential or shuffled replay; the cursor keeps the file open.
  Cursor cursor(ReadOptions options = {}) const;
  // Replays every unit in order through `fn`.
  void for_each(const std::function<void(const RecordPtr&)>& fn, ReadOptions options = {}) const;

  struct Column;

 private:
  friend class StreamFileReader;
  friend Table open_table(const std::filesystem::path&, const std::string&, const std::vector<std::string>&);
  friend Table load_stream_port(const std::shared_ptr<File>&, const std::string&, Table);
  friend class Cursor;
  std::shared_ptr<File> file_;
  std::string object_;
  std::int64_t rows_ = 0;
  std::vector<FieldInfo> fields_;
  std::vector<std::shared_ptr<Column>> columns_;
  Layout layout_ = Layout::records;
  std::vector<std::int64_t> offsets_;  // records + 1 entries for stream-file ports, else empty
};

// Opens a group or dataset of any HDF5 file as a table. `object` "" means: the only port of a
// stream file, or else the root group. `fields` (optional) limits which datasets of a plain
// group are opened, so a group may hold others of types embedflow cannot read. Throws DataError naming the file when it is missing or
// unreadable, when the object is absent (listing what is there), when datasets in a group
// disagree on their length, or when a dtype has no embedflow equivalent.
Table open_table(const std::filesystem::path& path, const std::string& object = "",
                 const std::vector<std::string>& fields = {});

// True when the file at `path` carries the embedflow_format attribute (does not validate it).
bool is_stream_file(const std::filesystem::path& path);

// A validated stream file. The constructor checks the whole structure: the file opens (not
// truncated), it is an embedflow stream file that was committed, every listed port group exists
// with its record index, and every dataset's length agrees with record_offsets/record_sizes.
class StreamFileReader {
 public:
  // DataError when the file does not exist; CorruptFileError for everything else that is wrong,
  // including a partial file (an interrupted run's, complete = 0) unless `allow_partial`.
  explicit StreamFileReader(const std::filesystem::path& path, bool allow_partial = false);
  // The file is an interrupted run's partial stream (StreamFileWriter::commit_partial).
  bool partial() const { return partial_; }

  const std::filesystem::path& path() const;
  const std::vector<std::string>& ports() const { return port_names_; }
  bool has_port(const std::string& port) const;
  const Table& port(const std::string& port) const;  // DataError naming the ports present
  const std::map<std::string, std::string>& attributes() const { return attributes_; }
  std::optional<std::string> attribute(const std::string& key) const;

  // Reads every stored chunk of every dataset of every port (and the record index), so that a
  // filter checksum (Fletcher32) or a decompression error on damaged bytes surfaces here, and
  // checks that every chunk the shape declares is stored. Throws CorruptFileError naming the file
  // and dataset; a string column whose strings do not match its stored checksum (edited or
  // damaged) too. Files written without `checksum` only get the decompression and count checks.
  void verify_checksums() const;
  // From now on reads skip the Fletcher32 check of every chunk they decode: for a file whose
  // checksums verify_checksums() has read and that has not changed since (the stage cache keeps
  // a stamp of each entry it verified). String columns' checksums are only read by
  // verify_checksums() either way.
  void skip_checksums() const;

  // Replays a port's records in order (original sizes), with prefetch.
  Cursor replay(const std::string& port, ReadOptions options = {}) const;
  void read_port(const std::string& port, const std::function<void(const RecordPtr&)>& fn) const;
  RecordPtr read_record(const std::string& port, std::int64_t index) const;

 private:
  std::shared_ptr<File> file_;
  std::vector<std::string> port_names_;
  std::map<std::string, Table> ports_;
  std::map<std::string, std::string> attributes_;
  bool partial_ = false;
};

// Pull-style replay: next() returns the next record, or null at the end. Reads whole slabs
// (sequential) or windows of chunk-aligned blocks (shuffled); records are zero-copy slices of a
// slab except shuffled/rebatched batches, which are gathered into new arrays.
class Cursor {
 public:
  Cursor(Cursor&&) noexcept;
  Cursor& operator=(Cursor&&) noexcept;
  ~Cursor();
  RecordPtr next();
  std::int64_t units() const;     // how many records next() will return in total
  std::int64_t returned() const;  // records returned so far
  // Rows of the table this cursor has asked the file for so far, the same rows of every field:
  // whole slabs unsharded, only the rank's rows sharded (about 1/W). A field may fetch a little
  // around them, as ReadOptions says: the rest of a chunk it decompresses, or a sub-page gap.
  std::int64_t rows_read() const;

  struct Impl;

 private:
  friend class Table;
  explicit Cursor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace embedflow::hdf5
