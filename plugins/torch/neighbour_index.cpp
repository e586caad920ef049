// NeighbourIndex over faiss (neighbour_index.hpp).
#include "neighbour_index.hpp"

#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>

#include <vector>

namespace embedflow::torchfam {

NeighbourIndex::NeighbourIndex(int dim, int hnsw_m, int ef_search) {
  if (hnsw_m > 0) {
    auto hnsw = std::make_unique<faiss::IndexHNSWFlat>(dim, hnsw_m);
    hnsw->hnsw.efSearch = ef_search;
    index_ = std::move(hnsw);
  } else {
    index_ = std::make_unique<faiss::IndexFlatL2>(dim);
  }
}

NeighbourIndex::~NeighbourIndex() = default;

void NeighbourIndex::add(std::int64_t n, const float* rows) { index_->add(n, rows); }

std::int64_t NeighbourIndex::size() const { return index_->ntotal; }

int NeighbourIndex::dim() const { return index_->d; }

void NeighbourIndex::search(std::int64_t n, const float* queries, std::int64_t k, std::int64_t* rows) const {
  std::vector<float> distances(static_cast<std::size_t>(n * k));
  std::vector<faiss::Index::idx_t> found(static_cast<std::size_t>(n * k));
  index_->search(n, queries, k, distances.data(), found.data());
  for (std::size_t i = 0; i < found.size(); ++i) rows[i] = static_cast<std::int64_t>(found[i]);
}

}  // namespace embedflow::torchfam
