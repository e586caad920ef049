// All-or-nothing output files. Every file a node leaves for the user (HDF5 exports, reports,
// CSV tables, plots) is written under a temporary name in the same directory, fsynced and renamed
// over its final name only on a clean end of stream; a failed run removes the temporary, so an
// earlier complete file stays byte for byte as it was. A run interrupted by SIGINT or SIGTERM
// still drains and closes its nodes, but what they saw was cut short: a commit during an
// interrupted run renames the temporary to `<path>.partial` instead, which says what it is and
// leaves the earlier complete file untouched.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace embedflow {

// The engine points this at its run's stop flag (SIGINT/SIGTERM) for the run's duration, and at
// null afterwards; commits consult it. Null means "not interrupted".
void set_output_interrupt_flag(const std::atomic<bool>* flag);
bool outputs_interrupted();

// Where an interrupted run leaves what it wrote instead of `path`.
std::filesystem::path partial_path(const std::filesystem::path& path);

// What a commit during an interrupted run does. A node's output was cut short and goes to
// `<path>.partial`; a file that records how the run ended (run.json, the run's report) is
// complete whatever the ending and replaces the final name.
enum class OnInterrupt { keep_partial, replace };

class AtomicOutputFile {
 public:
  // Creates parent directories and opens `<dir>/.<name>.tmp-<pid>-<n>` for writing (binary).
  // Throws embedflow::Error naming the path when it cannot.
  explicit AtomicOutputFile(std::filesystem::path path, OnInterrupt on_interrupt = OnInterrupt::keep_partial);
  // Without commit(): abandon().
  ~AtomicOutputFile();
  AtomicOutputFile(const AtomicOutputFile&) = delete;
  AtomicOutputFile& operator=(const AtomicOutputFile&) = delete;

  std::ostream& stream() { return out_; }
  void write(std::string_view bytes) { out_.write(bytes.data(), static_cast<std::streamsize>(bytes.size())); }
  template <class T>
  AtomicOutputFile& operator<<(const T& v) {
    out_ << v;
    return *this;
  }

  // Flushes, fsyncs, renames over the final path (or to partial_path() when outputs_interrupted())
  // and fsyncs the directory. Returns the path the file now has. A stale `<path>.partial` from an
  // earlier interrupted run is removed by a clean commit. Throws embedflow::Error naming the path
  // when a write failed (disk full) or the rename fails; the temporary is then removed.
  std::filesystem::path commit();
  // Closes and removes the temporary; the final path is untouched.
  void abandon() noexcept;

  const std::filesystem::path& path() const { return path_; }
  const std::filesystem::path& temp_path() const { return temp_; }
  bool committed() const { return done_ && committed_; }

 private:
  std::filesystem::path path_, temp_;
  OnInterrupt on_interrupt_;
  std::ofstream out_;
  bool done_ = false, committed_ = false;
};

// A unique temporary name beside `path` (same directory, so rename is atomic), for writers that
// open files themselves (HDF5): `<dir>/.<name>.tmp-<pid>-<n>`.
std::filesystem::path temporary_path_beside(const std::filesystem::path& path);
// fsyncs a file and then its directory; false when either fails.
bool fsync_file_and_directory(const std::filesystem::path& file);
// Renames a finished temporary over `path` (or to partial_path(path) when interrupted), fsyncs
// the directory, removes a stale partial on a clean commit; returns the final name. Throws
// embedflow::Error naming both paths when the rename fails.
std::filesystem::path commit_temporary(const std::filesystem::path& temp, const std::filesystem::path& path,
                                       OnInterrupt on_interrupt = OnInterrupt::keep_partial);

// The whole of `bytes` as `path`, all or nothing (an AtomicOutputFile written and committed).
std::filesystem::path write_file_atomic(const std::filesystem::path& path, std::string_view bytes,
                                        OnInterrupt on_interrupt = OnInterrupt::keep_partial);

}  // namespace embedflow
