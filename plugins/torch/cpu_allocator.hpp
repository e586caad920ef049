// LibTorch's CPU tensors from a cache of freed blocks (the idea of PyTorch's CUDA caching
// allocator, on the CPU). A training step allocates and frees the same large activation and
// gradient buffers every step. glibc serves a thread other than the process's first from an arena
// of 64 MiB heaps that it unmaps when they fall empty, so a trainer on such a thread (the
// prefetch thread, a oneTBB worker) had every buffer page-faulted in afresh each step: 1.8
// million page faults and 3.5 times the CPU time of the same 60 steps on the main thread. Blocks
// of 64 KiB and more are kept by size and handed out again; smaller ones go to glibc at once.
#pragma once

#include <cstddef>

namespace embedflow::torchfam {

// Makes the caching allocator LibTorch's CPU allocator for the rest of the process (idempotent;
// tensors allocated before keep their own deleters). Freed blocks are kept up to `cache_bytes` in
// all; beyond that they are returned to glibc.
void use_caching_cpu_allocator(std::size_t cache_bytes);

}  // namespace embedflow::torchfam
