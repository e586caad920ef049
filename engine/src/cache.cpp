// Stage caches: planning a run from cache entries, writing entries, replaying them, and the
// cache dir as `embedflow cache` sees it. See cache.hpp for the design.
#include "embedflow_engine/cache.hpp"

#include <signal.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <set>

#include "cache_internal.hpp"
#include "embedflow/hdf5/stream_file.hpp"
#include "embedflow/log.hpp"
#include "embedflow/version.hpp"

namespace embedflow::engine {

namespace h5 = embedflow::hdf5;

fs::path default_cache_dir() {
  if (const char* d = std::getenv("EMBEDFLOW_CACHE_DIR"); d && *d) return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return fs::path(d) / "embedflow";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache" / "embedflow";
  return fs::path(".embedflow-cache");
}

std::map<std::string, Manifest> manifests_from_json(const std::string& text) {
  std::map<std::string, Manifest> out;
  try {
    YAML::Node root = YAML::Load(text);
    for (const auto& n : root["nodes"]) {
      Manifest m;
      m.node = n["node"].as<std::string>();
      m.type = n["type"].as<std::string>();
      m.fingerprint = n["fingerprint"].as<std::string>();
      for (const auto& l : n["lines"]) m.lines.emplace_back(l[0].as<std::string>(), l[1].as<std::string>());
      out[m.node] = std::move(m);
    }
  } catch (const std::exception&) {
    out.clear();
  }
  return out;
}

namespace {

std::string entry_name(const std::string& node, const std::string& fingerprint) {
  return node + "-" + fingerprint + ".h5";
}

// --- the writer side: a tap on a cached node that runs ------------------------------------

class CacheTap final : public OutputTap {
 public:
  CacheTap(std::string node, fs::path final_path, std::map<std::string, std::string> attributes, int compression,
           std::vector<std::string> ports, const std::atomic<bool>* stop)
      : node_(std::move(node)), ports_(std::move(ports)), stop_(stop) {
    h5::WriterOptions options;
    options.deflate_level = compression;
    options.checksum = true;  // Fletcher32 per chunk, verified before a later run replays the entry
    try {
      writer_ = std::make_unique<h5::StreamFileWriter>(std::move(final_path), std::move(attributes), options);
      for (const auto& p : ports_) writer_->add_port(p);
    } catch (const std::exception& e) {
      give_up(e.what());
    }
  }

  void on_record(std::size_t port, const RecordPtr& record) override {
    if (!writer_) return;
    try {
      writer_->append(ports_.at(port), *record);
    } catch (const std::exception& e) {
      give_up(e.what());
    }
  }

  void on_finish(bool whole) override {
    if (!writer_) return;
    if (!whole) {
      log_info(node_, "stopped early (every consumer was done): cache entry not written");
      writer_->abort();
      writer_.reset();
      return;
    }
    // Ctrl-C drains the graph and closes every node, but what this node saw may be cut short:
    // such a stream must never become an entry a later run trusts.
    if (stop_ && stop_->load()) {
      log_info(node_, "interrupted: cache entry not written");
      writer_->abort();
      writer_.reset();
      return;
    }
    try {
      writer_->commit();
      write_stamp(writer_->final_path());
      log_info(node_, "cache entry written: ", writer_->final_path().string());
    } catch (const std::exception& e) {
      give_up(e.what());
    }
    writer_.reset();
  }

 private:
  // A cache that cannot be written costs a re-run later, not this run's results.
  void give_up(const std::string& why) {
    log_warning(node_, "cache entry not written: ", why);
    if (writer_) writer_->abort();
    writer_.reset();
  }

  std::string node_;
  std::vector<std::string> ports_;
  const std::atomic<bool>* stop_;
  std::unique_ptr<h5::StreamFileWriter> writer_;
};

// --- the reader side: a source standing in for a node whose entry hit ----------------------

class ReplayNode final : public Node {
 public:
  ReplayNode(std::shared_ptr<h5::StreamFileReader> reader, std::vector<std::string> ports)
      : reader_(std::move(reader)), ports_(std::move(ports)) {}

  void open(NodeContext& ctx) override {
    std::uint64_t total = 0;
    for (const auto& p : ports_) total += static_cast<std::uint64_t>(reader_->port(p).records());
    ctx.set_expected_items(total);
  }

  bool produce(Emitter& out) override {
    // Ports replay one after another; the order between ports is not part of a stream.
    while (port_ < ports_.size()) {
      if (!cursor_) cursor_ = std::make_unique<h5::Cursor>(reader_->replay(ports_[port_]));
      if (RecordPtr r = cursor_->next()) {
        out.emit(port_, std::move(r));
        return true;
      }
      cursor_.reset();
      ++port_;
    }
    return false;
  }

 private:
  std::shared_ptr<h5::StreamFileReader> reader_;
  std::vector<std::string> ports_;
  std::size_t port_ = 0;
  std::unique_ptr<h5::Cursor> cursor_;
};

// --- explaining a miss -------------------------------------------------------------------------

struct PreviousEntry {
  fs::path file;
  std::map<std::string, Manifest> manifests;
};

// The newest readable entry of `node` other than `current`, preferring the same graph file.
std::optional<PreviousEntry> previous_entry(const fs::path& dir, const std::string& node, const std::string& graph,
                                            const fs::path& current) {
  std::optional<PreviousEntry> best;
  bool best_same_graph = false;
  std::string best_created;
  std::error_code ec;
  for (const auto& de : fs::directory_iterator(dir, ec)) {
    std::string name = de.path().filename().string();
    if (name.rfind(node + "-", 0) != 0 || de.path().extension() != ".h5" || de.path() == current) continue;
    try {
      h5::StreamFileReader r(de.path());
      if (r.attribute("node").value_or("") != node) continue;
      bool same_graph = r.attribute("graph").value_or("") == graph;
      std::string created = r.attribute("created").value_or("");
      if (best && (best_same_graph > same_graph || (best_same_graph == same_graph && best_created >= created))) continue;
      auto manifests = manifests_from_json(r.attribute("manifest").value_or(""));
      if (manifests.empty()) continue;
      best = PreviousEntry{de.path(), std::move(manifests)};
      best_same_graph = same_graph;
      best_created = created;
    } catch (const std::exception&) {
      continue;  // corrupt or foreign files say nothing about what changed
    }
  }
  return best;
}

// Lines of `now` that differ from `before`, recursing into upstream nodes through input lines.
void diff_manifests(const std::string& node, const std::map<std::string, Manifest>& before, Fingerprinter& fp,
                    const std::map<std::string, std::size_t>& index, const std::string& prefix,
                    std::set<std::string>& visited, std::vector<std::string>& reasons) {
  if (!visited.insert(node).second) return;
  const Manifest& now = fp.manifest(index.at(node));
  auto old_it = before.find(node);
  if (old_it == before.end()) {
    reasons.push_back(cat(prefix, "node '", node, "' was not upstream before"));
    return;
  }
  const Manifest& old = old_it->second;
  if (old.fingerprint == now.fingerprint) return;
  std::map<std::string, std::string> old_lines(old.lines.begin(), old.lines.end());
  std::set<std::string> now_keys;
  std::size_t before_count = reasons.size();
  for (const auto& [key, value] : now.lines) {
    now_keys.insert(key);
    auto it = old_lines.find(key);
    if (it == old_lines.end()) {
      reasons.push_back(cat(prefix, key, " added: ", value));
    } else if (it->second != value) {
      if (key.rfind("input.", 0) == 0) {
        // "a.out FP, b.out FP": recurse into the upstream nodes named on both sides.
        std::vector<std::string> now_nodes, old_nodes;
        auto names = [](const std::string& text, std::vector<std::string>& out) {
          std::size_t pos = 0;
          while (pos < text.size()) {
            std::size_t end = text.find(", ", pos);
            std::string item = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
            out.push_back(item.substr(0, item.find(' ')));
            if (end == std::string::npos) break;
            pos = end + 2;
          }
        };
        names(value, now_nodes);
        names(it->second, old_nodes);
        std::vector<std::string> a = now_nodes, b = old_nodes;
        std::sort(a.begin(), a.end());
        std::sort(b.begin(), b.end());
        if (a != b) {
          std::string was, is;
          for (const auto& s : old_nodes) was += (was.empty() ? "" : ", ") + s;
          for (const auto& s : now_nodes) is += (is.empty() ? "" : ", ") + s;
          reasons.push_back(cat(prefix, key, " now comes from ", is, " (was ", was, ")"));
        }
        for (const auto& src : now_nodes) {
          std::string up = src.substr(0, src.rfind('.'));
          if (index.count(up)) diff_manifests(up, before, fp, index, cat(prefix, "upstream '", up, "': "), visited, reasons);
        }
      } else {
        reasons.push_back(cat(prefix, key, ": ", it->second, " -> ", value));
      }
    }
  }
  for (const auto& [key, value] : old.lines)
    if (!now_keys.count(key)) reasons.push_back(cat(prefix, key, " removed (was ", value, ")"));
  if (reasons.size() == before_count) reasons.push_back(cat(prefix, "fingerprint changed"));
}

}  // namespace

// --- planning ---------------------------------------------------------------------------------

struct CachePlanner::Impl {
  const ResolvedGraph& graph;
  CacheRunOptions options;
  Fingerprinter fingerprints;
  std::map<std::string, std::size_t> index;

  Impl(const ResolvedGraph& g, CacheRunOptions o) : graph(g), options(std::move(o)), fingerprints(g) {
    for (std::size_t i = 0; i < g.nodes.size(); ++i) index[g.nodes[i].id()] = i;
  }

  std::vector<std::string> port_names(std::size_t node) const {
    std::vector<std::string> out;
    for (const auto& p : graph.nodes[node].type->outputs) out.push_back(p.name);
    return out;
  }

  // Opens and checks an entry; a damaged or mismatched file is deleted with a warning.
  std::shared_ptr<h5::StreamFileReader> open_entry(std::size_t node, const fs::path& file, std::string& why) {
    const std::string& id = graph.nodes[node].id();
    std::error_code ec;
    if (!fs::exists(file, ec)) {
      why = "no entry";
      return nullptr;
    }
    std::string problem;
    try {
      auto reader = std::make_shared<h5::StreamFileReader>(file);
      std::vector<std::string> expected = port_names(node), have = reader->ports();
      std::sort(expected.begin(), expected.end());
      std::sort(have.begin(), have.end());
      if (reader->attribute("fingerprint").value_or("") != fingerprints.manifest(node).fingerprint)
        problem = "its fingerprint attribute does not match its name";
      else if (expected != have)
        problem = "its ports differ from the node's outputs";
      else if (!reader->attribute("string_checksums"))
        problem = "its string columns carry no checksums (written by an older embedflow)";
      else {
        // Damaged data bytes must not replay as a hit: every chunk's checksum is read now, before
        // any record flows (the file is then in the page cache for the replay), unless the entry
        // is the very file this process wrote or verified before (its stamp: cache_stamp.cpp).
        // Either way the replay need not check them again.
        if (stamp_holds(file)) {
          log_debug(id, "cache entry unchanged since it was written or verified: ", file.string());
        } else {
          reader->verify_checksums();
          write_stamp(file);
        }
        reader->skip_checksums();
        return reader;
      }
    } catch (const std::exception& e) {
      problem = e.what();
    }
    log_warning(id, "cache file ", file.string(), " is corrupt (", problem, "); deleting it and rebuilding");
    remove_cache_entry(file, ec);
    why = cat("the entry was corrupt and has been deleted (", problem, ")");
    return nullptr;
  }

  std::vector<std::string> explain_miss(std::size_t node, const fs::path& file) {
    const std::string& id = graph.nodes[node].id();
    auto prev = previous_entry(options.dir, id, options.graph_file, file);
    if (!prev) return {cat("no earlier entry for node '", id, "' in ", options.dir.string())};
    std::vector<std::string> reasons;
    std::set<std::string> visited;
    diff_manifests(id, prev->manifests, fingerprints, index, "", visited, reasons);
    reasons.insert(reasons.begin(), cat("differs from ", prev->file.filename().string(), ":"));
    return reasons;
  }

  std::vector<NodePlan> plan() {
    const std::size_t n = graph.nodes.size();
    std::vector<NodePlan> plans(n);
    std::vector<std::shared_ptr<h5::StreamFileReader>> hits(n);
    std::vector<fs::path> files(n);
    std::vector<std::vector<std::string>> why(n);
    std::vector<bool> cached(n, false);
    std::error_code ec;
    fs::create_directories(options.dir, ec);
    if (ec) throw DataError(cat("cannot create cache dir ", options.dir.string(), ": ", ec.message()));

    for (std::size_t i = 0; i < n; ++i) {
      const ResolvedNode& rn = graph.nodes[i];
      if (!rn.cache.enabled) continue;
      if (rn.type->outputs.empty()) {
        log_warning(rn.id(), "cache: the node has no output ports, so there is nothing to cache; it runs uncached");
        continue;
      }
      cached[i] = true;
      const Manifest& m = fingerprints.manifest(i);
      files[i] = options.dir / entry_name(rn.id(), m.fingerprint);
      if (options.rebuild) {
        why[i] = {"--rebuild-cache"};
        continue;
      }
      std::string miss;
      hits[i] = open_entry(i, files[i], miss);
      if (!hits[i]) why[i] = miss == "no entry" && options.explain ? explain_miss(i, files[i]) : std::vector<std::string>{miss};
    }

    // Reverse topological order: a node runs when it is not a hit and something needs its
    // output (or it is a sink); a hit replays only when a running node consumes it.
    std::vector<NodePlan::Mode> mode(n, NodePlan::Mode::skip);
    std::vector<std::string> skip_reason(n);
    for (auto it = graph.order.rbegin(); it != graph.order.rend(); ++it) {
      std::size_t i = *it;
      const ResolvedNode& rn = graph.nodes[i];
      bool has_consumers = false, consumer_runs = false;
      std::string consumers;
      for (const auto& port : rn.out_edges)
        for (std::size_t e : port) {
          std::size_t to = graph.edges[e].to.node;
          has_consumers = true;
          if (mode[to] == NodePlan::Mode::run) consumer_runs = true;
          consumers += (consumers.empty() ? "'" : ", '") + graph.nodes[to].id() + "'";
        }
      if (hits[i]) {
        mode[i] = consumer_runs ? NodePlan::Mode::replay : NodePlan::Mode::skip;
        if (!consumer_runs) skip_reason[i] = cat("hit, and no running node consumes it (", consumers, ")");
      } else if (!has_consumers || consumer_runs) {
        mode[i] = NodePlan::Mode::run;
      } else {
        skip_reason[i] = cat("feeds only ", consumers, ", which replay from cache or are skipped");
      }
    }

    for (std::size_t i = 0; i < n; ++i) {
      const ResolvedNode& rn = graph.nodes[i];
      plans[i].mode = mode[i];
      if (mode[i] == NodePlan::Mode::replay) {
        plans[i].replay = std::make_unique<ReplayNode>(hits[i], port_names(i));
        fs::last_write_time(files[i], fs::file_time_type::clock::now(), ec);  // recency, for gc --max-size
        if (!ec) write_stamp(files[i]);  // the touch moved its status-change time
        if (!options.explain) log_info(rn.id(), "cache hit: replaying ", files[i].string());
      } else if (mode[i] == NodePlan::Mode::run && cached[i]) {
        std::map<std::string, std::string> attrs{
            {"fingerprint", fingerprints.manifest(i).fingerprint},
            {"graph", options.graph_file},
            {"node", rn.id()},
            {"node_type", rn.type->name},
            {"plugin", cat(rn.type->plugin, " ", rn.type->plugin_version)},
            {"manifest", manifests_to_json(fingerprints.closure(i))}};
        plans[i].tap = std::make_shared<CacheTap>(rn.id(), files[i], std::move(attrs), rn.cache.compression,
                                                  port_names(i), options.stop);
        if (!options.explain) log_info(rn.id(), "cache miss: writing ", files[i].filename().string());
      } else if (mode[i] == NodePlan::Mode::skip && !options.explain) {
        log_info(rn.id(), "skipped: ", skip_reason[i]);
      }
    }

    if (options.explain && options.explain_out) {
      std::ostream& out = *options.explain_out;
      out << "cache plan (" << options.dir.string() << "):\n";
      for (std::size_t i : graph.order) {
        const ResolvedNode& rn = graph.nodes[i];
        out << "  " << rn.id() << ": ";
        if (mode[i] == NodePlan::Mode::replay) {
          out << "hit, replays " << files[i].filename().string() << " (" << human_bytes(fs::file_size(files[i], ec))
              << ")\n";
        } else if (mode[i] == NodePlan::Mode::skip) {
          out << "skipped: " << skip_reason[i] << "\n";
        } else if (cached[i]) {
          out << "miss, runs and writes " << files[i].filename().string() << "\n";
          for (const auto& w : why[i]) out << "      " << w << "\n";
        } else {
          out << "runs (not cached)\n";
        }
      }
      out.flush();
    }
    return plans;
  }
};

CachePlanner::CachePlanner(const ResolvedGraph& graph, CacheRunOptions options)
    : impl_(std::make_unique<Impl>(graph, std::move(options))) {}
CachePlanner::~CachePlanner() = default;
std::vector<NodePlan> CachePlanner::plan() { return impl_->plan(); }

bool CachePlanner::any_cached(const ResolvedGraph& graph) {
  for (const auto& n : graph.nodes)
    if (n.cache.enabled) return true;
  return false;
}

// --- the cache dir ------------------------------------------------------------------------------

std::vector<CacheEntry> list_cache(const fs::path& dir, bool validate) {
  std::vector<CacheEntry> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& de : fs::directory_iterator(dir, ec)) {
    if (!de.is_regular_file(ec)) continue;
    CacheEntry e;
    e.file = de.path();
    e.bytes = de.file_size(ec);
    e.modified = de.last_write_time(ec);
    std::string name = e.file.filename().string();
    if (auto pid = h5::StreamFileWriter::temp_owner_pid(e.file)) {
      e.temporary = true;
      e.owner_pid = pid;
      e.owner_alive = ::kill(static_cast<pid_t>(*pid), 0) == 0 || errno == EPERM;
      std::string base = name.substr(0, name.find(".h5.tmp-"));
      e.node = base.substr(0, base.rfind('-'));
      out.push_back(std::move(e));
      continue;
    }
    if (e.file.extension() != ".h5") continue;
    std::string stem = e.file.stem().string();
    e.node = stem.substr(0, stem.rfind('-'));
    e.fingerprint = stem.substr(stem.rfind('-') + 1);
    if (validate) {
      try {
        h5::StreamFileReader r(e.file);
        e.node = r.attribute("node").value_or(e.node);
        e.node_type = r.attribute("node_type").value_or("");
        e.graph = r.attribute("graph").value_or("");
        e.fingerprint = r.attribute("fingerprint").value_or(e.fingerprint);
        e.created = r.attribute("created").value_or("");
        e.plugin = r.attribute("plugin").value_or("");
        if (!r.attribute("fingerprint")) e.problem = "not a cache entry (no fingerprint attribute)";
      } catch (const std::exception& ex) {
        e.problem = ex.what();
      }
    }
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(), [](const CacheEntry& a, const CacheEntry& b) { return a.modified > b.modified; });
  return out;
}

std::vector<CacheEntry> find_cache_entries(const fs::path& dir, const std::string& key) {
  std::vector<CacheEntry> out;
  for (auto& e : list_cache(dir)) {
    std::string name = e.file.filename().string();
    bool match = name == key || e.file.stem().string() == key || e.node == key || e.file == fs::path(key) ||
                 (key.size() >= 4 && e.fingerprint.rfind(key, 0) == 0);
    if (match) out.push_back(std::move(e));
  }
  return out;
}

std::string human_bytes(std::uintmax_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

}  // namespace embedflow::engine
