// Verification stamps of stage-cache entries (cache_internal.hpp). `<entry>.verified` holds what
// identifies the entry's bytes on disk without reading them: device, inode, size and the
// status-change time. An entry this process wrote, or whose every checksum it has read, gets one;
// a later run whose entry still matches its stamp replays it without reading it twice (once to
// verify, once to replay) and without Fletcher32 on the replay. Any write to the file, a touch, a
// rename over it or a copy moves the status-change time, which no tool can set back, so a stamp
// never vouches for an edited, truncated or replaced file. What it cannot see is damage below
// the file system (a bad sector): `embedflow cache verify` reads every checksum regardless.
#include <algorithm>
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "cache_internal.hpp"
#include "embedflow/atomic_file.hpp"
#include "embedflow/hdf5/stream_file.hpp"
#include "embedflow/log.hpp"

namespace h5 = embedflow::hdf5;

namespace embedflow::engine {

namespace {

fs::path stamp_path(const fs::path& entry) { return fs::path(entry.string() + ".verified"); }

// "" when the file cannot be examined.
std::string entry_stamp(const fs::path& entry) {
  struct stat st {};
  if (::stat(entry.c_str(), &st) != 0) return "";
  std::ostringstream s;
  s << "embedflow-cache-stamp 1 dev " << st.st_dev << " ino " << st.st_ino << " size " << st.st_size << " ctime "
    << st.st_ctim.tv_sec << "." << st.st_ctim.tv_nsec << "\n";
  return s.str();
}

}  // namespace

void write_stamp(const fs::path& entry) {
  const std::string stamp = entry_stamp(entry);
  if (stamp.empty()) return;
  try {
    write_file_atomic(stamp_path(entry), stamp);
  } catch (const std::exception& e) {
    // Without its stamp the entry is verified again next time: slower, never wrong.
    log_debug("cache", "cannot write the verification stamp of ", entry.string(), ": ", e.what());
  }
}

bool stamp_holds(const fs::path& entry) {
  std::ifstream in(stamp_path(entry), std::ios::binary);
  if (!in) return false;
  std::string recorded((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string now = entry_stamp(entry);
  return !now.empty() && recorded == now;
}

bool remove_cache_entry(const fs::path& entry, std::error_code& ec) {
  std::error_code ignored;
  fs::remove(stamp_path(entry), ignored);
  return fs::remove(entry, ec);
}

std::vector<fs::path> orphaned_cache_stamps(const fs::path& dir) {
  static const std::string suffix = ".verified";
  std::vector<fs::path> orphans;
  std::error_code ec;
  for (const auto& de : fs::directory_iterator(dir, ec)) {
    const std::string name = de.path().filename().string();
    if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    const fs::path entry = de.path().parent_path() / name.substr(0, name.size() - suffix.size());
    std::error_code missing;
    if (!fs::exists(entry, missing) && !missing) orphans.push_back(de.path());
  }
  std::sort(orphans.begin(), orphans.end());
  return orphans;
}

void verify_cache_entry(const fs::path& entry) {
  h5::StreamFileReader reader(entry);
  if (!reader.attribute("fingerprint")) throw h5::CorruptFileError(entry, "not a cache entry (no fingerprint attribute)");
  reader.verify_checksums();
  write_stamp(entry);
}

}  // namespace embedflow::engine
