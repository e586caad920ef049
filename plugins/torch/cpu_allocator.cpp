// The caching CPU allocator of cpu_allocator.hpp.
#include "cpu_allocator.hpp"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <map>
#include <mutex>
#include <vector>

namespace embedflow::torchfam {
namespace {

// Each block starts with a header holding its usable size, so the deleter (which LibTorch calls
// with the data pointer alone) knows which list the block goes back to. 64 bytes keep the data
// at the alignment c10's alloc_cpu gives.
constexpr std::size_t kHeader = 64;
constexpr std::size_t kSmallest = 64 << 10;  // below: glibc's bins serve well; not cached
constexpr std::size_t kPage = 4096;

class CachingCpuAllocator final : public c10::Allocator {
 public:
  explicit CachingCpuAllocator(std::size_t cache_bytes) : limit_(cache_bytes) {}

  c10::DataPtr allocate(std::size_t n) const override {
    void* data = acquire(n);
    return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  static CachingCpuAllocator* instance;

 private:
  static std::size_t rounded(std::size_t n) { return n < kSmallest ? n : (n + kPage - 1) / kPage * kPage; }

  void* acquire(std::size_t n) const {
    const std::size_t size = rounded(n);
    if (size >= kSmallest) {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.find(size);
      if (it != free_.end() && !it->second.empty()) {
        void* block = it->second.back();
        it->second.pop_back();
        cached_ -= size;
        return static_cast<char*>(block) + kHeader;
      }
    }
    void* block = nullptr;
    try {
      block = c10::alloc_cpu(size + kHeader);
    } catch (const c10::Error&) {
      drop_cache();  // the blocks kept for other sizes may be what the system lacks
      block = c10::alloc_cpu(size + kHeader);
    }
    *static_cast<std::size_t*>(block) = size;
    return static_cast<char*>(block) + kHeader;
  }

  void drop_cache() const {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [size, blocks] : free_)
      for (void* block : blocks) c10::free_cpu(block);
    free_.clear();
    cached_ = 0;
  }

  static void release(void* data) {
    if (!data) return;
    void* block = static_cast<char*>(data) - kHeader;
    const std::size_t size = *static_cast<std::size_t*>(block);
    CachingCpuAllocator& self = *instance;
    if (size >= kSmallest) {
      std::lock_guard<std::mutex> lock(self.mutex_);
      if (self.cached_ + size <= self.limit_) {
        self.free_[size].push_back(block);
        self.cached_ += size;
        return;
      }
    }
    c10::free_cpu(block);
  }

  const std::size_t limit_;
  mutable std::mutex mutex_;
  mutable std::map<std::size_t, std::vector<void*>> free_;  // freed blocks by usable size
  mutable std::size_t cached_ = 0;
};

CachingCpuAllocator* CachingCpuAllocator::instance = nullptr;

}  // namespace

void use_caching_cpu_allocator(std::size_t cache_bytes) {
  static std::once_flag once;
  std::call_once(once, [cache_bytes] {
    // Never freed: tensors anywhere in the process may still hold its deleter at exit.
    CachingCpuAllocator::instance = new CachingCpuAllocator(cache_bytes);
    c10::SetCPUAllocator(CachingCpuAllocator::instance, /*priority*/ 1);
  });
}

}  // namespace embedflow::torchfam
