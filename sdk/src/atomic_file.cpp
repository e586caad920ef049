#include "embedflow/atomic_file.hpp"
#include "embedflow/file_kind.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "embedflow/error.hpp"

namespace embedflow {

namespace fs = std::filesystem;

namespace {
std::atomic<const std::atomic<bool>*> interrupt_flag{nullptr};
std::atomic<std::uint64_t> temp_counter{0};

bool fsync_path(const fs::path& p, bool directory) {
  int fd = ::open(p.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::fsync(fd) == 0 || errno == EINVAL;  // some filesystems cannot sync directories
  ::close(fd);
  return ok;
}
}  // namespace

void set_output_interrupt_flag(const std::atomic<bool>* flag) { interrupt_flag.store(flag); }

bool outputs_interrupted() {
  const std::atomic<bool>* f = interrupt_flag.load();
  return f && f->load();
}

fs::path partial_path(const fs::path& path) { return fs::path(path.string() + ".partial"); }

fs::path temporary_path_beside(const fs::path& path) {
  // A leading dot keeps it out of globs such as out/*.csv while it is being written.
  std::string name = cat(".", path.filename().string(), ".tmp-", ::getpid(), "-", ++temp_counter);
  return path.has_parent_path() ? path.parent_path() / name : fs::path(name);
}

bool fsync_file_and_directory(const fs::path& file) {
  fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
  bool ok = fsync_path(file, false);
  return fsync_path(dir, true) && ok;
}

fs::path commit_temporary(const fs::path& temp, const fs::path& path, OnInterrupt on_interrupt) {
  const bool interrupted = on_interrupt == OnInterrupt::keep_partial && outputs_interrupted();
  const fs::path target = interrupted ? partial_path(path) : path;
  std::error_code ec;
  try {
    refuse_special_output(target);  // the rename would replace a device node or FIFO
  } catch (...) {
    fs::remove(temp, ec);
    throw;
  }
  fs::rename(temp, target, ec);
  if (ec) {
    fs::remove(temp, ec);
    throw Error(cat("cannot rename '", temp.string(), "' to '", target.string(), "': ", ec.message()));
  }
  if (!interrupted) fs::remove(partial_path(path), ec);
  fsync_path(target.has_parent_path() ? target.parent_path() : fs::path("."), true);
  return target;
}

AtomicOutputFile::AtomicOutputFile(fs::path path, OnInterrupt on_interrupt)
    : path_(std::move(path)), on_interrupt_(on_interrupt) {
  refuse_special_output(path_);
  std::error_code ec;
  if (path_.has_parent_path()) fs::create_directories(path_.parent_path(), ec);
  if (ec) throw Error(cat("cannot create directory '", path_.parent_path().string(), "': ", ec.message()));
  temp_ = temporary_path_beside(path_);
  out_.open(temp_, std::ios::binary | std::ios::trunc);
  if (!out_) throw Error(cat("cannot write '", path_.string(), "' (temporary '", temp_.string(), "'): ", std::strerror(errno)));
}

AtomicOutputFile::~AtomicOutputFile() {
  if (!done_) abandon();
}

fs::path AtomicOutputFile::commit() {
  if (done_) throw Error(cat("'", path_.string(), "' was already ", committed_ ? "committed" : "abandoned"));
  out_.flush();
  const bool written = static_cast<bool>(out_);
  out_.close();
  if (!written || out_.fail()) {
    abandon();
    throw Error(cat("write to '", path_.string(), "' failed (disk full?); the earlier file is untouched"));
  }
  if (!fsync_path(temp_, false)) {
    abandon();
    throw Error(cat("cannot fsync '", temp_.string(), "': ", std::strerror(errno)));
  }
  done_ = true;
  fs::path where = commit_temporary(temp_, path_, on_interrupt_);
  committed_ = where == path_;
  return where;
}

void AtomicOutputFile::abandon() noexcept {
  done_ = true;
  if (out_.is_open()) out_.close();
  std::error_code ec;
  fs::remove(temp_, ec);
}

fs::path write_file_atomic(const fs::path& path, std::string_view bytes, OnInterrupt on_interrupt) {
  AtomicOutputFile f(path, on_interrupt);
  f.write(bytes);
  return f.commit();
}

}  // namespace embedflow
