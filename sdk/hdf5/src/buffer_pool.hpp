// The buffers reads fill: a process-wide pool of recycled slab-sized buffers. Private to
// embedflow_hdf5.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <iterator>
#include <memory>
#include <mutex>
#include <utility>

namespace embedflow::hdf5 {

// Recycles read buffers across all cursors of the process. A fresh multi-MiB allocation is
// mmap'd by glibc and page-faulted on first touch, which costs more than the HDF5 read into it
// (measured: ~2x the whole replay time); replays reuse a bounded set of slab-sized buffers
// instead. Buffers are uninitialised (HDF5 overwrites them) and come back when the last record
// viewing them is dropped.
class BufferPool {
 public:
  static BufferPool& instance() {
    static auto* pool = new BufferPool();  // never destroyed: deleters may run at exit
    return *pool;
  }
  std::shared_ptr<std::uint8_t> get(std::size_t bytes) {
    bytes = std::max<std::size_t>(bytes, 1);
    std::uint8_t* p = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto it = free_.rbegin(); it != free_.rend(); ++it)
        if (it->first == bytes) {
          p = it->second;
          kept_bytes_ -= bytes;
          free_.erase(std::next(it).base());
          break;
        }
    }
    if (!p) p = new std::uint8_t[bytes];
    return std::shared_ptr<std::uint8_t>(p, [this, bytes](std::uint8_t* q) { give_back(q, bytes); });
  }

 private:
  void give_back(std::uint8_t* p, std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (bytes > kMaxKeptBytes / 4) {
      delete[] p;
      return;
    }
    free_.emplace_back(bytes, p);
    kept_bytes_ += bytes;
    while (kept_bytes_ > kMaxKeptBytes || free_.size() > kMaxKept) {  // drop the least recently returned
      kept_bytes_ -= free_.front().first;
      delete[] free_.front().second;
      free_.pop_front();
    }
  }
  static constexpr std::size_t kMaxKept = 256;
  static constexpr std::size_t kMaxKeptBytes = 128u << 20;
  std::mutex mutex_;
  std::deque<std::pair<std::size_t, std::uint8_t*>> free_;
  std::size_t kept_bytes_ = 0;
};

namespace detail {
// A buffer of `bytes` from `pool`, or a fresh one without a pool.
inline std::shared_ptr<std::uint8_t> raw_buffer(BufferPool* pool, std::size_t bytes) {
  if (pool) return pool->get(bytes);
  return std::shared_ptr<std::uint8_t>(new std::uint8_t[std::max<std::size_t>(bytes, 1)], std::default_delete<std::uint8_t[]>());
}
}  // namespace detail

}  // namespace embedflow::hdf5
