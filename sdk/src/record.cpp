#include "embedflow/record.hpp"

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

}  // namespace embedflow
