// What kind of file a path names, checked before a node reads or replaces it. A FIFO given as a
// CSV blocks in open() for ever; a device node given as an output would be replaced by a regular
// file by the atomic rename (run as root with `path: /dev/null`, that loses /dev/null). Readers
// and writers call these first, so such a path is a clear error and is left untouched.
#pragma once

#include <filesystem>
#include <string>

namespace embedflow {

// "FIFO", "socket", "character device", "block device", "directory", or "" for a regular file,
// a symlink to one, or a path that does not exist. Never opens the path.
std::string special_file_kind(const std::filesystem::path& path);

// Throws embedflow::Error "cannot write '<path>': it is a FIFO (outputs replace regular files
// only); nothing was written to it" when `path` exists and is not a regular file.
void refuse_special_output(const std::filesystem::path& path);

// Throws embedflow::ConfigError "<what> '<path>' is a FIFO, not a regular file" when `path`
// exists and is not a regular file (a missing path is left to the reader's own message).
void refuse_special_input(const std::filesystem::path& path, const std::string& what);

}  // namespace embedflow
