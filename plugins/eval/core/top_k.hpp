// The k best of a stream of scored gallery items, as exact kNN and the retrieval scan keep them:
// lowest score first, ties broken by the lower gallery index, so results do not depend on the
// order the blocks arrive in.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace embedflow::evalcore {

using ScoredItem = std::pair<float, std::int64_t>;  // (score, gallery index): lexicographic = rank order

// Offers `item` to `heap`, a max-heap on (score, index) holding the best k so far: its front is
// the worst item kept, the one a better item replaces once k are held.
inline void push_top(std::vector<ScoredItem>& heap, std::size_t k, ScoredItem item) {
  if (heap.size() < k) {
    heap.push_back(item);
    std::push_heap(heap.begin(), heap.end());
  } else if (item < heap.front()) {
    std::pop_heap(heap.begin(), heap.end());
    heap.back() = item;
    std::push_heap(heap.begin(), heap.end());
  }
}

}  // namespace embedflow::evalcore
