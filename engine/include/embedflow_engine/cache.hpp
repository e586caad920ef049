// Stage caches: `cache: true` (or `cache: {hash: full, compression: 4}`) on a node stores its
// output streams in an HDF5 stream file under the cache dir, keyed by the node's fingerprint.
//
// A fingerprint is a hash of the node's manifest: its type and plugin version, the stream-file
// format, its seed (unless the node type is deterministic), every parameter that affects output (nested components included, with their
// plugins' versions), the size, mtime and a content hash of every file a path parameter names,
// and, for each input port, the fingerprint of the upstream port feeding it. Upstream
// fingerprints chain, so a change anywhere above a node changes its key.
//
// Planning: a cached node whose entry exists and validates is a hit and is replayed from the
// file; a node that feeds only hit (or skipped) nodes is skipped; everything else runs. A cached
// node that runs is tapped: its outputs are appended to a temporary file that is renamed into
// place only when the node closes cleanly (never on error or Ctrl-C). A corrupt entry is reported
// as a warning naming the file, deleted and rebuilt.
//
// Layout of the cache dir: one file per entry, `<node>-<fingerprint>.h5`, whose root attributes
// carry fingerprint, graph, node, node_type, plugin, created, embedflow_version and `manifest`
// (JSON: the manifests of the node and all its ancestors, which --explain-cache diffs against
// the newest entry of the same node to say what changed). Temporaries are
// `<entry>.tmp-<pid>-<n>`; `cache gc` removes those whose process is gone.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "embedflow/params.hpp"
#include "embedflow_engine/graph.hpp"
#include "embedflow_engine/runtime.hpp"

namespace embedflow::engine {

namespace fs = std::filesystem;

// $EMBEDFLOW_CACHE_DIR, else $XDG_CACHE_HOME/embedflow, else ~/.cache/embedflow.
fs::path default_cache_dir();

// One node's manifest: ordered (key, value) lines, e.g. ("param.radius", "10"),
// ("file.path", "data/a.csv size=... mtime=... hash=..."), ("input.photos", "read.out 3fa2...").
struct Manifest {
  std::string node, type;
  std::vector<std::pair<std::string, std::string>> lines;
  std::string fingerprint;  // 32 hex digits
};

// Computes manifests on demand (files are hashed only for nodes that need a fingerprint).
class Fingerprinter {
 public:
  explicit Fingerprinter(const ResolvedGraph& graph);
  const Manifest& manifest(std::size_t node);
  // The manifests of `node` and every node upstream of it.
  std::vector<const Manifest*> closure(std::size_t node);

 private:
  const ResolvedGraph& graph_;
  std::vector<std::unique_ptr<Manifest>> manifests_;
  std::vector<bool> full_hash_;  // some cached node downstream (or the node itself) asked for hash: full
};

// Hash of a file for fingerprints: size, mtime and either sampled blocks (first and last MiB and
// 16 blocks of 64 KiB between) or, with `full`, every byte. "absent" for a missing path; a
// directory hashes its sorted recursive listing (names, sizes, mtimes).
std::string describe_file(const fs::path& path, bool full);

struct CacheRunOptions {
  fs::path dir;
  std::string graph_file;   // recorded in each entry (absolute path)
  bool explain = false;     // print a line per node saying why it runs, replays or is skipped
  bool rebuild = false;     // ignore existing entries (they are overwritten)
  std::ostream* explain_out = nullptr;
  const std::atomic<bool>* stop = nullptr;
};

// Plans a run: per node (indexed like graph.nodes) run, replay or skip, with taps on cached
// nodes that run. Keeps the readers of hit entries open until the plans are consumed.
class CachePlanner {
 public:
  CachePlanner(const ResolvedGraph& graph, CacheRunOptions options);
  ~CachePlanner();
  std::vector<NodePlan> plan();
  // Any node has cache enabled (nothing to do otherwise).
  static bool any_cached(const ResolvedGraph& graph);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// --- the cache dir, for `embedflow cache ls|info|rm|gc` ------------------------------------

struct CacheEntry {
  fs::path file;
  std::string node, node_type, graph, fingerprint, created, plugin;
  std::uintmax_t bytes = 0;
  fs::file_time_type modified;   // refreshed on every hit (gc --max-size evicts the oldest)
  bool temporary = false;        // a writer's temporary file
  std::optional<long> owner_pid; // temporaries: the writing process
  bool owner_alive = false;
  std::string problem;           // non-empty when the entry does not validate
};

// "812 B", "1.5 KiB", "3.2 GiB".
std::string human_bytes(std::uintmax_t bytes);

// Every entry and temporary in `dir` (none when it does not exist), newest first.
std::vector<CacheEntry> list_cache(const fs::path& dir, bool validate = true);
// Entries whose file name, node id or fingerprint prefix is `key`.
std::vector<CacheEntry> find_cache_entries(const fs::path& dir, const std::string& key);
// Deletes an entry and its verification stamp (`<entry>.verified`); false, with `ec` set, when
// the entry could not be removed.
bool remove_cache_entry(const fs::path& entry, std::error_code& ec);
// Verification stamps whose entry is gone (deleted by hand, or by a tool that knows no stamps):
// they can never match a new file, so `cache gc` deletes them.
std::vector<fs::path> orphaned_cache_stamps(const fs::path& dir);
// Reads every checksum of an entry, whatever its stamp says, and stamps it when they hold (a run
// replays an entry that still matches its stamp without reading its checksums: cache_stamp.cpp).
// Throws hdf5::CorruptFileError (or DataError) naming the file.
void verify_cache_entry(const fs::path& entry);

}  // namespace embedflow::engine
