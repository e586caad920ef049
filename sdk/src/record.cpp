#include "embedflow/record.hpp"

#include <algorithm>
#include <sstream>

namespace embedflow {

Record& Record::set(std::string name, Array value) {
  for (auto& [n, v] : fields_)
    if (n == name) {
      v = std::move(value);
      return *this;
    }
  fields_.emplace_back(std::move(name), std::move(value));
  return *this;
}

bool Record::has(std::string_view name) const { return find(name) != nullptr; }

const Array* Record::find(std::string_view name) const {
  for (const auto& [n, v] : fields_)
    if (n == name) return &v;
  return nullptr;
}

const Array& Record::get(std::string_view name) const {
  if (const Array* a = find(name)) return *a;
  throw DataError(cat("record has no field '", name, "'; it has ", describe()));
}

bool Record::erase(std::string_view name) {
  for (auto it = fields_.begin(); it != fields_.end(); ++it)
    if (it->first == name) {
      fields_.erase(it);
      return true;
    }
  return false;
}

std::int64_t Record::batch_size() const {
  std::int64_t n = -1;
  for (const auto& [name, a] : fields_) {
    if (a.rank() == 0) throw DataError(cat("field '", name, "' is a scalar, so ", describe(), " is not a batch"));
    if (n < 0) n = a.dim(0);
    else if (a.dim(0) != n)
      throw DataError(cat("fields disagree on the batch size: ", describe()));
  }
  return n < 0 ? 0 : n;
}

std::string Record::describe() const {
  std::string s = "{";
  for (std::size_t i = 0; i < fields_.size(); ++i) {
    if (i) s += ", ";
    s += fields_[i].first + ": " + fields_[i].second.describe();
  }
  return s + "}";
}

namespace {

std::string format_array(const Array& a) {
  constexpr std::int64_t kShown = 8;
  std::ostringstream s;
  if (a.is_string()) {
    if (a.rank() == 0) return "\"" + a.string_at(0) + "\"";
    s << "[";
    for (std::int64_t i = 0; i < std::min(a.numel(), kShown); ++i) s << (i ? ", " : "") << "\"" << a.string_at(i) << "\"";
    s << (a.numel() > kShown ? ", ...]" : "]");
    return s.str();
  }
  if (a.numel() > kShown) return a.describe();
  auto one = [&](std::int64_t i) {
    if (a.dtype() == DType::f32 || a.dtype() == DType::f64) s << a.as_double(i);
    else s << a.as_int(i);
  };
  if (a.rank() == 0) {
    one(0);
    return s.str();
  }
  s << "[";
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    if (i) s << ", ";
    one(i);
  }
  s << "]";
  return s.str();
}

}  // namespace

std::string format_record(const Record& record) {
  std::string line = "{";
  bool first = true;
  for (const auto& [name, value] : record.fields()) {
    line += (first ? "" : ", ") + name + ": " + format_array(value);
    first = false;
  }
  return line + "}";
}

}  // namespace embedflow
