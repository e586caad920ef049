// Cache fingerprints: manifests of nodes and the hashes of the files they read.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "embedflow/error.hpp"
#include "embedflow/parallel.hpp"
#include "embedflow/hdf5/stream_file.hpp"
#include "embedflow/rng.hpp"
#include "embedflow_engine/cache.hpp"
#include "embedflow_engine/describe.hpp"
#include "cache_internal.hpp"

namespace embedflow::engine {

// --- hashing --------------------------------------------------------------------------------

void Hash128::update(const void* data, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  length_ += n;
  // Whole 8-byte words through two independent multiply-rotate lanes; the tail byte-wise.
  while (n >= 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    a_ = rotl((a_ ^ w) * 0x9e3779b97f4a7c15ULL, 31) * 0xc2b2ae3d27d4eb4fULL;
    b_ = rotl((b_ + w) * 0x165667b19e3779f9ULL, 27) * 0x27d4eb2f165667c5ULL;
    p += 8;
    n -= 8;
  }
  for (; n > 0; --n, ++p) {
    a_ = (a_ ^ *p) * 0x100000001b3ULL;
    b_ = rotl(b_ + *p, 7) * 0x9e3779b97f4a7c15ULL;
  }
}

void Hash128::update(std::string_view s) {
  update(s.data(), s.size());
  update("\x1f", 1);  // separator, so ("ab","c") and ("a","bc") differ
}

std::string Hash128::hex() const {
  std::uint64_t hi = mix64(a_ ^ mix64(length_)), lo = mix64(b_ ^ mix64(hi));
  static const char* digits = "0123456789abcdef";
  std::string out(32, '0');
  for (int i = 0; i < 16; ++i) {
    out[15 - i] = digits[(hi >> (4 * i)) & 15];
    out[31 - i] = digits[(lo >> (4 * i)) & 15];
  }
  return out;
}

namespace {

std::string mtime_text(const struct stat& st) {
  return cat(st.st_mtim.tv_sec, ".", std::to_string(1000000000LL + st.st_mtim.tv_nsec).substr(1));
}

// Reads [offset, offset + n) of an open file into the hash; returns false on a read error.
bool hash_range(int fd, std::uint64_t offset, std::uint64_t n, Hash128& h, std::vector<char>& buf) {
  while (n > 0) {
    std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(n, buf.size()));
    ssize_t got = ::pread(fd, buf.data(), want, static_cast<off_t>(offset));
    if (got < 0) return false;
    if (got == 0) break;
    h.update(buf.data(), static_cast<std::size_t>(got));
    offset += static_cast<std::uint64_t>(got);
    n -= static_cast<std::uint64_t>(got);
  }
  return true;
}

std::string hash_file(const fs::path& path, std::uint64_t size, bool full) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return cat("unreadable (", std::strerror(errno), ")");
  std::vector<char> buf(1 << 20);
  Hash128 h;
  bool ok = true;
  constexpr std::uint64_t kEdge = 1 << 20, kBlock = 64 << 10;
  constexpr int kBlocks = 16;
  if (full || size <= 2 * kEdge + kBlocks * kBlock) {
    ok = hash_range(fd, 0, size, h, buf);
  } else {
    // First and last MiB (headers, appended rows) and evenly spaced blocks between.
    ok = hash_range(fd, 0, kEdge, h, buf) && hash_range(fd, size - kEdge, kEdge, h, buf);
    std::uint64_t span = size - 2 * kEdge - kBlock;
    for (int i = 0; ok && i < kBlocks; ++i) ok = hash_range(fd, kEdge + span * i / (kBlocks - 1), kBlock, h, buf);
  }
  ::close(fd);
  if (!ok) return cat("unreadable (", std::strerror(errno), ")");
  return h.hex().substr(0, 16) + (full ? " (full)" : " (sampled)");
}

}  // namespace

std::string describe_file(const fs::path& path, bool full) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return "absent";
  if (S_ISDIR(st.st_mode)) {
    // A directory read as a dataset (an image folder): its listing, not its bytes. Content
    // changes show up through sizes and mtimes.
    std::vector<std::string> listing;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
      struct stat est;
      if (::stat(it->path().c_str(), &est) != 0 || S_ISDIR(est.st_mode)) continue;
      listing.push_back(cat(fs::relative(it->path(), path).string(), " ", est.st_size, " ", mtime_text(est)));
    }
    std::sort(listing.begin(), listing.end());
    Hash128 h;
    for (const auto& l : listing) h.update(l);
    return cat("directory files=", listing.size(), " listing=", h.hex().substr(0, 16));
  }
  auto size = static_cast<std::uint64_t>(st.st_size);
  return cat("size=", size, " mtime=", mtime_text(st), " hash=", hash_file(path, size, full));
}

// --- manifests --------------------------------------------------------------------------------

namespace {

using Lines = std::vector<std::pair<std::string, std::string>>;

void describe_params(const Registry* registry, const std::vector<ParamSpec>& specs, const Value& values,
                     const std::string& prefix, bool full_hash, Lines& lines);

void describe_value(const Registry* registry, const ParamSpec& spec, const Value& v, const std::string& key,
                    bool full_hash, Lines& lines) {
  if (spec.type == ParamType::component && v.is_map() && v.get("type")) {
    const std::string& type = v.get("type")->as_string();
    const ComponentType* ct = registry ? registry->component_type(type) : nullptr;
    lines.emplace_back(key, ct ? cat(type, " (", ct->plugin, " ", ct->plugin_version, ")") : type);
    if (ct) describe_params(registry, ct->params, v, key + ".", full_hash, lines);
    return;
  }
  lines.emplace_back(key, v.str());
  if (spec.type == ParamType::path && v.is_string()) lines.emplace_back("file." + key.substr(6), describe_file(v.as_string(), full_hash));
}

void describe_params(const Registry* registry, const std::vector<ParamSpec>& specs, const Value& values,
                     const std::string& prefix, bool full_hash, Lines& lines) {
  for (const ParamSpec& s : specs) {
    if (!s.affects_output) continue;  // log intervals, output paths: not part of the stream
    const Value* v = values.is_map() ? values.get(s.name) : nullptr;
    if (!v || v->is_null()) continue;
    describe_value(registry, s, *v, prefix + s.name, full_hash, lines);
  }
}

// A node that shards by rank may take its place from the launcher's environment (the SDK's
// add_shard_params pair shard_world_size 0 / shard_rank -1, or core.shard's world_size 0 / rank
// -1): the same parameters on every rank. The key holds the place they resolve to, so ranks that
// share a cache directory never replay each other's share. Pairs left out of fingerprints (the
// trainer's ranks, whose output is the same model) are skipped.
void describe_parallel_place(const std::vector<ParamSpec>& specs, const Value& values, Lines& lines) {
  auto fingerprinted = [&](const std::string& name) {
    return std::any_of(specs.begin(), specs.end(), [&](const ParamSpec& s) { return s.name == name && s.affects_output; });
  };
  for (const auto& [world, rank] : {std::pair<const char*, const char*>{"shard_world_size", "shard_rank"}, {"world_size", "rank"}}) {
    const Value* w = values.get(world);
    const Value* r = values.get(rank);
    if (!fingerprinted(world) || !fingerprinted(rank) || !w || !r || !w->is_integer() || !r->is_integer()) continue;
    try {
      const ParallelPlace place = resolve_parallel_place(w->as_integer(), r->as_integer());
      // A world of one reads everything: its key stays the unsharded node's.
      if (place.world_size > 1) lines.emplace_back("parallel_place", cat("rank ", place.rank, " of ", place.world_size));
    } catch (const ConfigError& e) {
      lines.emplace_back("parallel_place", cat("unresolved: ", e.what()));  // validation reports it
    }
    return;
  }
}

}  // namespace

Fingerprinter::Fingerprinter(const ResolvedGraph& graph)
    : graph_(graph), manifests_(graph.nodes.size()), full_hash_(graph.nodes.size(), false) {
  // hash: full on a cached node applies to every file read above it, since the readers that
  // open those files are usually upstream sources, not the cached node itself.
  for (std::size_t i = 0; i < graph.nodes.size(); ++i) {
    if (!graph.nodes[i].cache.enabled || !graph.nodes[i].cache.full_hash) continue;
    std::vector<std::size_t> todo{i};
    while (!todo.empty()) {
      std::size_t n = todo.back();
      todo.pop_back();
      if (full_hash_[n]) continue;
      full_hash_[n] = true;
      for (const auto& port : graph.nodes[n].in_edges)
        for (std::size_t e : port) todo.push_back(graph.edges[e].from.node);
    }
  }
}

const Manifest& Fingerprinter::manifest(std::size_t node) {
  if (manifests_[node]) return *manifests_[node];
  const ResolvedNode& rn = graph_.nodes[node];
  auto m = std::make_unique<Manifest>();
  m->node = rn.id();
  m->type = rn.type->name;
  Lines& lines = m->lines;
  lines.emplace_back("type", rn.type->name);
  lines.emplace_back("plugin", cat(rn.type->plugin, " ", rn.type->plugin_version));
  lines.emplace_back("format", hdf5::kFormat);
  // A deterministic node's output does not depend on its seed, so runs differing only in seed
  // (a sweep's seeds) share its entry.
  bool seeded = !rn.type->deterministic;
  if (!seeded && !rn.type->random_when.empty()) {
    const Value* v = rn.params.all().count(rn.type->random_when) ? &rn.params.all().at(rn.type->random_when) : nullptr;
    seeded = v && v->is_boolean() && v->as_boolean();
  }
  if (seeded) lines.emplace_back("seed", std::to_string(rn.seed));
  Value values = Value::map({});
  for (const auto& [k, v] : rn.params.all()) values.set(k, v);
  describe_params(graph_.registry, rn.type->params, values, "param.", full_hash_[node], lines);
  describe_parallel_place(rn.type->params, values, lines);
  for (std::size_t p = 0; p < rn.in_edges.size(); ++p) {
    std::string sources;
    for (std::size_t e : rn.in_edges[p]) {
      const ResolvedEdge& edge = graph_.edges[e];
      const ResolvedNode& from = graph_.nodes[edge.from.node];
      sources += cat(sources.empty() ? "" : ", ", from.id(), ".", from.type->outputs[edge.from.port].name, " ",
                     manifest(edge.from.node).fingerprint);
    }
    if (!sources.empty()) lines.emplace_back("input." + rn.type->inputs[p].name, sources);
  }
  Hash128 h;
  for (const auto& [k, v] : lines) {
    h.update(k);
    h.update(v);
  }
  m->fingerprint = h.hex();
  manifests_[node] = std::move(m);
  return *manifests_[node];
}

std::vector<const Manifest*> Fingerprinter::closure(std::size_t node) {
  std::vector<const Manifest*> out;
  std::set<std::size_t> seen;
  std::vector<std::size_t> todo{node};
  while (!todo.empty()) {
    std::size_t n = todo.back();
    todo.pop_back();
    if (!seen.insert(n).second) continue;
    out.push_back(&manifest(n));
    for (const auto& port : graph_.nodes[n].in_edges)
      for (std::size_t e : port) todo.push_back(graph_.edges[e].from.node);
  }
  return out;
}

// --- manifest JSON (stored in each cache file's `manifest` attribute) ---------------------------

std::string manifests_to_json(const std::vector<const Manifest*>& manifests) {
  using json = nlohmann::ordered_json;
  json nodes = json::array();
  for (const Manifest* m : manifests) {
    json lines = json::array();
    for (const auto& [key, value] : m->lines) lines.push_back({key, value});
    nodes.push_back({{"node", m->node}, {"type", m->type}, {"fingerprint", m->fingerprint}, {"lines", std::move(lines)}});
  }
  // Manifest lines quote parameter values and file names: invalid UTF-8 becomes U+FFFD.
  return json{{"nodes", std::move(nodes)}}.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace embedflow::engine
