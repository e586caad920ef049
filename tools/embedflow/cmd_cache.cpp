// `embedflow cache ls|info|rm|gc`: the stage cache's entries listed, described and removed.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "embedflow/hdf5/stream_file.hpp"
#include "embedflow_engine/cache.hpp"

namespace embedflow::cli {
using namespace engine;
using namespace runs;
namespace fs = std::filesystem;

namespace {

double age_seconds(const CacheEntry& e) {
  return std::chrono::duration<double>(fs::file_time_type::clock::now() - e.modified).count();
}

std::string human_age(double s) {
  if (s < 120) return cat(static_cast<long>(s), "s");
  if (s < 7200) return cat(static_cast<long>(s / 60), "m");
  if (s < 172800) return cat(static_cast<long>(s / 3600), "h");
  return cat(static_cast<long>(s / 86400), "d");
}

// "90s", "30m", "12h", "7d" (a bare number is days).
std::optional<double> parse_duration(const std::string& text) {
  try {
    std::size_t used = 0;
    double v = std::stod(text, &used);
    std::string unit = text.substr(used);
    double scale = unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : (unit == "d" || unit.empty()) ? 86400 : -1;
    if (scale < 0 || v < 0) return std::nullopt;
    return v * scale;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// "500M", "10G", "2048" (bytes), binary units.
std::optional<std::uintmax_t> parse_size(const std::string& text) {
  try {
    std::size_t used = 0;
    double v = std::stod(text, &used);
    std::string unit = text.substr(used);
    if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
    if (!unit.empty() && unit.back() == 'i') unit.pop_back();
    double scale = unit.empty() ? 1 : unit == "K" || unit == "k" ? 1024.0 : unit == "M" ? 1048576.0
                 : unit == "G" ? 1073741824.0 : unit == "T" ? 1099511627776.0 : -1;
    if (scale < 0 || v < 0) return std::nullopt;
    return static_cast<std::uintmax_t>(v * scale);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void print_entry_line(std::ostream& out, const CacheEntry& e) {
  std::string state = e.temporary ? cat("temporary of pid ", e.owner_pid.value_or(0), e.owner_alive ? " (running)" : " (gone)")
                      : !e.problem.empty() ? "corrupt: " + e.problem
                                           : e.node_type;
  char line[512];
  std::snprintf(line, sizeof line, "%-20s %-24s %9s %6s  %-12s %s", e.node.c_str(), state.c_str(),
                human_bytes(e.bytes).c_str(), human_age(age_seconds(e)).c_str(), e.fingerprint.substr(0, 12).c_str(),
                e.graph.c_str());
  out << line << "\n";
}

int cache_ls(const fs::path& dir, bool json) {
  auto entries = list_cache(dir);
  if (json) {
    using ordered_json = nlohmann::ordered_json;
    ordered_json list = ordered_json::array();
    for (const auto& e : entries)
      list.push_back({{"file", e.file.string()}, {"node", e.node}, {"node_type", e.node_type}, {"bytes", e.bytes},
                      {"age_s", static_cast<long>(age_seconds(e))}, {"fingerprint", e.fingerprint}, {"graph", e.graph},
                      {"created", e.created}, {"temporary", e.temporary}, {"ok", e.problem.empty() && !e.temporary}});
    // One entry per line; names read from cache files may hold invalid UTF-8 (U+FFFD then).
    std::cout << "[";
    for (std::size_t i = 0; i < list.size(); ++i)
      std::cout << (i ? ",\n " : "\n ") << list[i].dump(-1, ' ', false, ordered_json::error_handler_t::replace);
    std::cout << "\n]\n";
    return kExitOk;
  }
  if (entries.empty()) {
    std::cout << "no cache entries in " << dir.string() << "\n";
    return kExitOk;
  }
  char head[256];
  std::snprintf(head, sizeof head, "%-20s %-24s %9s %6s  %-12s %s", "NODE", "TYPE", "SIZE", "AGE", "FINGERPRINT", "GRAPH");
  std::cout << head << "\n";
  std::uintmax_t total = 0;
  for (const auto& e : entries) {
    print_entry_line(std::cout, e);
    total += e.bytes;
  }
  std::cout << entries.size() << (entries.size() == 1 ? " entry, " : " entries, ") << human_bytes(total) << " in "
            << dir.string() << "\n";
  return kExitOk;
}

int cache_info(const fs::path& dir, const std::vector<std::string>& keys) {
  if (keys.empty()) {
    std::cerr << "embedflow cache info: name an entry (file name, node id or fingerprint prefix)\n";
    return kExitInvalid;
  }
  int rc = kExitOk;
  for (const auto& key : keys) {
    auto entries = find_cache_entries(dir, key);
    if (entries.empty()) {
      std::cerr << "embedflow cache info: no entry matches '" << key << "' in " << dir.string() << "\n";
      rc = kExitInvalid;
      continue;
    }
    for (const auto& e : entries) {
      std::cout << e.file.string() << "\n";
      std::cout << "  node:        " << e.node << " (" << e.node_type << ", plugin " << e.plugin << ")\n"
                << "  graph:       " << e.graph << "\n"
                << "  created:     " << e.created << "\n"
                << "  last used:   " << human_age(age_seconds(e)) << " ago\n"
                << "  size:        " << human_bytes(e.bytes) << "\n"
                << "  fingerprint: " << e.fingerprint << "\n";
      if (!e.problem.empty()) {
        std::cout << "  problem:     " << e.problem << "\n";
        continue;
      }
      try {
        hdf5::StreamFileReader r(e.file);
        for (const auto& port : r.ports()) {
          const auto& t = r.port(port);
          std::cout << "  port " << port << ": " << t.records() << " records, " << t.rows() << " rows ("
                    << hdf5::layout_name(t.layout()) << ")\n";
          for (const auto& f : t.fields())
            std::cout << "    " << f.name << ": " << dtype_name(f.dtype) << shape_str(f.inner) << "\n";
        }
        if (auto manifest = r.attribute("manifest")) std::cout << "  manifest (JSON):\n" << *manifest;
      } catch (const std::exception& ex) {
        std::cout << "  problem:     " << ex.what() << "\n";
      }
    }
  }
  return rc;
}

bool remove_entry(const CacheEntry& e, bool dry_run, const std::string& why) {
  std::error_code ec;
  if (!dry_run) remove_cache_entry(e.file, ec);
  if (ec) {
    std::cerr << "embedflow cache: cannot remove " << e.file.string() << ": " << ec.message() << "\n";
    return false;
  }
  std::cout << (dry_run ? "would remove " : "removed ") << e.file.filename().string() << " (" << human_bytes(e.bytes)
            << ", " << why << ")\n";
  return true;
}

int cache_rm(const fs::path& dir, const std::vector<std::string>& keys, bool all) {
  if (keys.empty() && !all) {
    std::cerr << "embedflow cache rm: name entries (file name, node id or fingerprint prefix) or give --all\n";
    return kExitInvalid;
  }
  int rc = kExitOk;
  if (all) {
    for (const auto& e : list_cache(dir, false))
      if (!e.temporary || !e.owner_alive)
        if (!remove_entry(e, false, "--all")) rc = kExitFailure;
    return rc;
  }
  for (const auto& key : keys) {
    auto entries = find_cache_entries(dir, key);
    if (entries.empty()) {
      std::cerr << "embedflow cache rm: no entry matches '" << key << "' in " << dir.string() << "\n";
      rc = kExitInvalid;
    }
    for (const auto& e : entries)
      if (!remove_entry(e, false, "matches '" + key + "'")) rc = kExitFailure;
  }
  return rc;
}

// Reads every checksum of the entries named (every entry without names), whatever their stamps
// say: what a run skips for an entry unchanged on disk since it was verified. A corrupt entry is
// deleted, as a run would delete it before rebuilding.
int cache_verify(const fs::path& dir, const std::vector<std::string>& keys) {
  std::vector<CacheEntry> entries;
  int rc = kExitOk;
  if (keys.empty()) entries = list_cache(dir, false);
  for (const auto& key : keys) {
    auto found = find_cache_entries(dir, key);
    if (found.empty()) {
      std::cerr << "embedflow cache verify: no entry matches '" << key << "' in " << dir.string() << "\n";
      rc = kExitInvalid;
    }
    entries.insert(entries.end(), found.begin(), found.end());
  }
  std::size_t good = 0, bad = 0;
  for (const auto& e : entries) {
    if (e.temporary) continue;
    try {
      verify_cache_entry(e.file);
      ++good;
    } catch (const std::exception& ex) {
      ++bad;
      std::cout << "corrupt: " << e.file.string() << ": " << ex.what() << "\n";
      if (remove_entry(e, false, "corrupt")) continue;
    }
  }
  std::cout << good << (good == 1 ? " entry" : " entries") << " verified, " << bad << " corrupt in " << dir.string()
            << "\n";
  return bad ? kExitFailure : rc;
}

int cache_gc(const fs::path& dir, const std::string& older_than, const std::string& max_size, bool dry_run) {
  std::optional<double> max_age;
  std::optional<std::uintmax_t> max_bytes;
  if (!older_than.empty() && !(max_age = parse_duration(older_than))) {
    std::cerr << "embedflow cache gc: --older-than takes a duration like 90s, 30m, 12h or 7d, got '" << older_than << "'\n";
    return kExitInvalid;
  }
  if (!max_size.empty() && !(max_bytes = parse_size(max_size))) {
    std::cerr << "embedflow cache gc: --max-size takes a size like 500M or 10G, got '" << max_size << "'\n";
    return kExitInvalid;
  }
  auto entries = list_cache(dir);  // newest first
  std::uintmax_t kept = 0, freed = 0;
  int rc = kExitOk;
  for (const auto& e : entries) {
    std::string why;
    if (e.temporary && !e.owner_alive) why = "left by a run that is gone";
    else if (e.temporary) continue;  // a run is writing it right now
    else if (!e.problem.empty()) why = "corrupt: " + e.problem;
    else if (max_age && age_seconds(e) > *max_age) why = "unused for " + human_age(age_seconds(e));
    else if (max_bytes && kept + e.bytes > *max_bytes) why = "over --max-size " + max_size;
    if (why.empty()) {
      kept += e.bytes;
      continue;
    }
    if (remove_entry(e, dry_run, why)) freed += e.bytes;
    else rc = kExitFailure;
  }
  // Stamps of entries removed by hand: they match no file, ever.
  for (const auto& stamp : orphaned_cache_stamps(dir)) {
    std::error_code ec;
    if (!dry_run) fs::remove(stamp, ec);
    if (ec) {
      std::cerr << "embedflow cache: cannot remove " << stamp.string() << ": " << ec.message() << "\n";
      rc = kExitFailure;
      continue;
    }
    std::cout << (dry_run ? "would remove " : "removed ") << stamp.filename().string() << " (its entry is gone)\n";
  }
  std::cout << (dry_run ? "would free " : "freed ") << human_bytes(freed) << "; " << human_bytes(kept) << " kept in "
            << dir.string() << "\n";
  return rc;
}

}  // namespace

int cmd_cache(const std::vector<std::string>& args) {
  const char* usage =
      "usage: embedflow cache <ls|info|rm|verify|gc> [options]\n"
      "  ls                      entries with node, type, size, age since last use, fingerprint, graph\n"
      "  info ENTRY...           attributes, ports, fields and manifest of entries\n"
      "  rm ENTRY... | --all     remove entries (ENTRY: file name, node id or fingerprint prefix)\n"
      "  verify [ENTRY...]       read every checksum of the entries (all without ENTRY), also those a\n"
      "                          run trusts as unchanged since verified; delete corrupt ones\n"
      "  gc [--older-than 7d] [--max-size 10G] [--dry-run]\n"
      "                          remove temporaries of runs that are gone, corrupt entries, entries\n"
      "                          unused for longer than --older-than, then the least recently used\n"
      "                          until the cache fits --max-size\n";
  if (args.empty()) {
    std::cerr << usage;
    return kExitInvalid;
  }
  if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::cout << usage;
    return kExitOk;
  }
  std::string sub = args[0];
  std::vector<std::string> rest(args.begin() + 1, args.end());
  Common c;
  std::string cache_dir, older_than, max_size;
  std::vector<std::string> keys;
  bool json = false, all = false, dry_run = false;
  po::options_description desc(cat("embedflow cache ", sub, " [options]"));
  desc.add_options()("help,h", "this help")
      ("cache-dir", po::value(&cache_dir), "cache directory (default: $EMBEDFLOW_CACHE_DIR, else ~/.cache/embedflow)")
      ("entry", po::value(&keys)->composing(), "entries");
  if (sub == "ls") desc.add_options()("json", po::bool_switch(&json), "machine-readable list");
  else if (sub == "rm") desc.add_options()("all", po::bool_switch(&all), "remove every entry");
  else if (sub == "gc")
    desc.add_options()("older-than", po::value(&older_than), "remove entries unused for longer (90s, 30m, 12h, 7d)")
        ("max-size", po::value(&max_size), "then remove least recently used entries beyond this total (500M, 10G)")
        ("dry-run", po::bool_switch(&dry_run), "only say what would be removed");
  else if (sub != "info" && sub != "verify") {
    std::cerr << "embedflow cache: unknown subcommand '" << sub << "'\n" << usage;
    return kExitInvalid;
  }
  po::positional_options_description pos;
  pos.add("entry", -1);
  po::variables_map vm;
  if (int r = parse_or_usage(desc, pos, rest, vm, "cache"); r >= 0) return r;
  fs::path dir = cache_dir.empty() ? default_cache_dir() : fs::path(cache_dir);
  if (sub == "ls") return cache_ls(dir, json);
  if (sub == "info") return cache_info(dir, keys);
  if (sub == "rm") return cache_rm(dir, keys, all);
  if (sub == "verify") return cache_verify(dir, keys);
  if (!keys.empty()) {
    std::cerr << "embedflow cache gc: takes no entries (use cache rm)\n";
    return kExitInvalid;
  }
  return cache_gc(dir, older_than, max_size, dry_run);
}

}  // namespace embedflow::cli
