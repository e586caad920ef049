// A nearest-neighbour index over float rows (faiss: Debian's libfaiss-dev), behind an interface
// free of faiss and LibTorch: only neighbour_index.cpp sees faiss's headers and the OpenMP flags
// it needs, so the family's precompiled header (built without OpenMP) serves every other source.
#pragma once

#include <cstdint>
#include <memory>

namespace faiss {
struct Index;
}

namespace embedflow::torchfam {

class NeighbourIndex {
 public:
  // hnsw_m 0: exact L2 search (faiss's IndexFlatL2); else IndexHNSWFlat with M hnsw_m and
  // efSearch ef_search.
  NeighbourIndex(int dim, int hnsw_m, int ef_search);
  ~NeighbourIndex();
  NeighbourIndex(const NeighbourIndex&) = delete;
  NeighbourIndex& operator=(const NeighbourIndex&) = delete;

  // Appends n rows [n, dim], row-major.
  void add(std::int64_t n, const float* rows);
  std::int64_t size() const;
  int dim() const;
  // For each of n queries [n, dim], the indices of its k nearest rows by L2 distance, nearest
  // first, into rows [n, k]; -1 where fewer are found.
  void search(std::int64_t n, const float* queries, std::int64_t k, std::int64_t* rows) const;

 private:
  std::unique_ptr<faiss::Index> index_;
};

}  // namespace embedflow::torchfam
