#include "embedflow/file_kind.hpp"

#include <sys/stat.h>

#include "embedflow/error.hpp"

namespace embedflow {

std::string special_file_kind(const std::filesystem::path& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return "";  // absent (or a dangling link): the caller's message
  if (S_ISREG(st.st_mode)) return "";
  if (S_ISFIFO(st.st_mode)) return "FIFO";
  if (S_ISSOCK(st.st_mode)) return "socket";
  if (S_ISCHR(st.st_mode)) return "character device";
  if (S_ISBLK(st.st_mode)) return "block device";
  if (S_ISDIR(st.st_mode)) return "directory";
  return "special file";
}

void refuse_special_output(const std::filesystem::path& path) {
  const std::string kind = special_file_kind(path);
  if (!kind.empty())
    throw Error(cat("cannot write '", path.string(), "': it is a ", kind,
                    " (outputs replace regular files only); nothing was written to it"));
}

void refuse_special_input(const std::filesystem::path& path, const std::string& what) {
  const std::string kind = special_file_kind(path);
  if (!kind.empty()) throw ConfigError(cat(what, " '", path.string(), "' is a ", kind, ", not a regular file"));
}

}  // namespace embedflow
