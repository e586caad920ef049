#include "core/arrays.hpp"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>

namespace embedflow::image {
namespace {

// Freed large buffers by size, at most kKeep of each: enough for the batches in flight
// between two stages to be recycled, bounded whatever the graph does.
class BufferPool {
 public:
  static constexpr std::size_t kKeep = 4;
  void* take(std::size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.find(bytes);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        return p;
      }
    }
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) throw std::bad_alloc();
    return p;
  }
  void give_back(void* p, std::size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto& list = free_[bytes];
      if (list.size() < kKeep) {
        list.push_back(p);
        return;
      }
    }
    std::free(p);
  }

 private:
  std::mutex mutex_;
  std::unordered_map<std::size_t, std::vector<void*>> free_;
};

// Never destroyed: arrays may be released during static destruction.
BufferPool& pool() {
  static BufferPool* p = new BufferPool;
  return *p;
}

}  // namespace

Array uninitialized_array(DType dtype, Shape shape) {
  const std::size_t bytes = static_cast<std::size_t>(shape_numel(shape)) * dtype_size(dtype);
  if (bytes < (std::size_t{1} << 20)) return Array::zeros(dtype, std::move(shape));
  void* data = pool().take(bytes);
  std::shared_ptr<const void> owner(data, [bytes](const void* p) { pool().give_back(const_cast<void*>(p), bytes); });
  return Array::wrap(dtype, std::move(shape), data, std::move(owner));
}

Array take_rows(const Array& a, const std::vector<std::int64_t>& index) {
  if (a.rank() == 0) throw DataError(cat("cannot take rows of a scalar ", a.describe()));
  const std::int64_t rows = a.dim(0);
  for (std::int64_t i : index)
    if (i < 0 || i >= rows) throw DataError(cat("row ", i, " out of range for ", a.describe()));
  Shape shape = a.shape();
  shape[0] = static_cast<std::int64_t>(index.size());
  if (a.is_string()) {
    std::vector<std::string> values;
    values.reserve(index.size());
    for (std::int64_t i : index) values.push_back(a.string_at(i));
    return Array::strings(std::move(values)).reshape(shape);
  }
  Array out = uninitialized_array(a.dtype(), shape);
  const std::size_t row_bytes = rows ? a.nbytes() / static_cast<std::size_t>(rows) : 0;
  const auto* src = static_cast<const std::uint8_t*>(a.raw());
  auto* dst = static_cast<std::uint8_t*>(out.mutable_raw());
  for (std::size_t k = 0; k < index.size(); ++k)
    std::memcpy(dst + k * row_bytes, src + static_cast<std::size_t>(index[k]) * row_bytes, row_bytes);
  return out;
}

Record take_record_rows(const Record& r, const std::vector<std::int64_t>& index, std::int64_t rows) {
  Record out;
  for (const auto& [name, value] : r.fields()) {
    if (value.rank() == 0 || value.dim(0) != rows)
      throw DataError(cat("field '", name, "' is ", value.describe(), " but the table has ", rows, " rows"));
    out.set(name, take_rows(value, index));
  }
  return out;
}

std::vector<std::int64_t> int_values(const Array& a, const std::string& field) {
  if (a.is_string() || a.dtype() == DType::f32 || a.dtype() == DType::f64 || a.rank() > 1)
    throw DataError(cat("field '", field, "' must be an integer scalar or vector, got ", a.describe()));
  std::vector<std::int64_t> v(static_cast<std::size_t>(a.numel()));
  if (a.dtype() == DType::i64) {
    if (!v.empty()) std::memcpy(v.data(), a.data<std::int64_t>(), v.size() * sizeof(std::int64_t));
  } else {
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = a.as_int(static_cast<std::int64_t>(i));
  }
  return v;
}

bool is_hwc_image(const Array& a) {
  return (a.dtype() == DType::u8 || a.dtype() == DType::f32) && (a.rank() == 3 || a.rank() == 4);
}

cv::Mat image_view(const Array& a, std::int64_t i) {
  if (!is_hwc_image(a)) throw DataError(cat("expected a u8 or f32 HWC image or BHWC batch, got ", a.describe()));
  const std::size_t off = a.rank() == 4 ? 1 : 0;
  const int h = static_cast<int>(a.dim(off)), w = static_cast<int>(a.dim(off + 1)), c = static_cast<int>(a.dim(off + 2));
  if (c < 1 || c > CV_CN_MAX) throw DataError(cat("image has ", c, " channels: ", a.describe()));
  const int type = a.dtype() == DType::u8 ? CV_8UC(c) : CV_32FC(c);
  auto* base = static_cast<std::uint8_t*>(const_cast<void*>(a.raw()));
  if (a.rank() == 4) {
    if (i < 0 || i >= a.dim(0)) throw DataError(cat("image ", i, " out of range for ", a.describe()));
    base += static_cast<std::size_t>(i) * (a.nbytes() / static_cast<std::size_t>(a.dim(0)));
  }
  return cv::Mat(h, w, type, base);
}

Array array_from_mat(cv::Mat m) {
  if (!m.isContinuous()) m = m.clone();
  DType dt;
  switch (m.depth()) {
    case CV_8U: dt = DType::u8; break;
    case CV_32F: dt = DType::f32; break;
    default: throw Error(cat("array_from_mat: unsupported OpenCV depth ", m.depth()));
  }
  auto holder = std::make_shared<cv::Mat>(std::move(m));
  const void* data = holder->data;
  Shape shape{holder->rows, holder->cols, holder->channels()};
  return Array::wrap(dt, std::move(shape), data, std::shared_ptr<const void>(holder, data));
}

void mat_to_chw(const cv::Mat& m, void* dst) {
  const int c = m.channels();
  const std::size_t plane = static_cast<std::size_t>(m.rows) * static_cast<std::size_t>(m.cols) * m.elemSize1();
  auto* d = static_cast<std::uint8_t*>(dst);
  if (c == 1) {
    cv::Mat out(m.rows, m.cols, m.depth(), d);
    m.copyTo(out);
    return;
  }
  std::vector<cv::Mat> planes;
  planes.reserve(static_cast<std::size_t>(c));
  for (int k = 0; k < c; ++k) planes.emplace_back(m.rows, m.cols, m.depth(), d + static_cast<std::size_t>(k) * plane);
  // split() keeps the preallocated headers because size and type already match.
  cv::split(m, planes);
}

double uniform(Rng& rng, double lo, double hi) {
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
  return lo + (hi - lo) * u;
}

std::int64_t uniform_int(Rng& rng, std::int64_t lo, std::int64_t hi) {
  if (hi <= lo) return lo;
  const auto range = static_cast<unsigned __int128>(static_cast<std::uint64_t>(hi - lo) + 1);
  return lo + static_cast<std::int64_t>((static_cast<unsigned __int128>(rng()) * range) >> 64);
}

}  // namespace embedflow::image
