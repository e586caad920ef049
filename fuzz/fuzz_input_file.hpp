// Readers that take a path get the fuzz input as a file: one per process, rewritten per input.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace embedflow::fuzz {

inline std::string input_file(const std::uint8_t* data, std::size_t size, const char* suffix) {
  static const std::string path = "/tmp/embedflow-fuzz-" + std::to_string(::getpid()) + suffix;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

}  // namespace embedflow::fuzz
