// Seeding. Every node draws from its own generator seeded from (graph seed, node id), so adding a
// node or changing the thread count never shifts another node's random stream. Parallel nodes
// seed per record from (node seed, input sequence number) so results do not depend on which
// thread ran which record.
#pragma once

#include <cstdint>
#include <random>
#include <string_view>

namespace embedflow {

// SplitMix64 finaliser: a cheap bijective mixer with good avalanche behaviour.
inline std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// FNV-1a over the bytes of a string: stable across platforms and runs (unlike std::hash).
inline std::uint64_t stable_hash(std::string_view s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

inline std::uint64_t derive_seed(std::uint64_t seed, std::string_view key) {
  return mix64(seed ^ mix64(stable_hash(key)));
}
inline std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t key) {
  return mix64(seed ^ mix64(key + 0x632be59bd9b4e019ULL));
}

using Rng = std::mt19937_64;

}  // namespace embedflow
