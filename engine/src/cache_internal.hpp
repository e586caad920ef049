// Shared by fingerprint.cpp and cache.cpp; not part of the engine's interface.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "embedflow_engine/cache.hpp"

namespace embedflow::engine {

// A fast non-cryptographic 128-bit hash (two multiply-rotate lanes over 8-byte words): cache
// keys need stability across runs and platforms and few collisions, not resistance to attack.
class Hash128 {
 public:
  void update(const void* data, std::size_t n);
  void update(std::string_view s);  // with a separator after it
  std::string hex() const;          // 32 hex digits

 private:
  static std::uint64_t rotl(std::uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
  std::uint64_t a_ = 0x243f6a8885a308d3ULL, b_ = 0x13198a2e03707344ULL, length_ = 0;
};

std::string manifests_to_json(const std::vector<const Manifest*>& manifests);
// Inverse of manifests_to_json, keyed by node id; empty when the text does not parse.
std::map<std::string, Manifest> manifests_from_json(const std::string& text);

// Verification stamps (cache_stamp.cpp): records that `entry`, as it is on disk now, was written
// by this process or had every checksum read; whether it still is that file.
void write_stamp(const fs::path& entry);
bool stamp_holds(const fs::path& entry);

}  // namespace embedflow::engine
