#include "core/classes.hpp"

#include <algorithm>
#include <cctype>

namespace embedflow::image {
namespace {

const char* kForms = "a label (3), a list of labels ([0, 1, 2]) or a range string (\"0-4\", \"0-4,7,9\")";

bool parse_int(const std::string& s, std::int64_t& out) {
  if (s.empty()) return false;
  std::size_t i = 0;
  bool neg = false;
  if (s[0] == '-') {
    neg = true;
    i = 1;
  }
  if (i == s.size()) return false;
  std::int64_t v = 0;
  for (; i < s.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
    v = v * 10 + (s[i] - '0');
    if (v > (std::int64_t{1} << 40)) return false;
  }
  out = neg ? -v : v;
  return true;
}

std::string trim(const std::string& s) {
  std::size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

}  // namespace

ClassSet ClassSet::parse(const Value& v) {
  ClassSet s;
  if (v.is_null()) return s;
  s.all_ = false;
  auto bad = [&](const std::string& why) {
    return ConfigError(cat("classes: ", why, "; use ", kForms));
  };
  if (v.is_integer()) {
    s.labels_.push_back(v.as_integer());
  } else if (v.is_list()) {
    for (const Value& item : v.as_list()) {
      if (!item.is_integer()) throw bad(cat("list item ", item.str(), " is not an integer label"));
      s.labels_.push_back(item.as_integer());
    }
  } else if (v.is_string()) {
    const std::string& text = v.as_string();
    std::size_t start = 0;
    while (start <= text.size()) {
      std::size_t comma = text.find(',', start);
      if (comma == std::string::npos) comma = text.size();
      const std::string part = trim(text.substr(start, comma - start));
      start = comma + 1;
      if (part.empty()) throw bad(cat("empty item in '", text, "'"));
      // A dash after the first character is a range ("0-4"); a leading one is a sign.
      std::size_t dash = part.find('-', 1);
      std::int64_t lo, hi;
      if (dash == std::string::npos) {
        if (!parse_int(part, lo)) throw bad(cat("'", part, "' is not a label"));
        hi = lo;
      } else if (!parse_int(trim(part.substr(0, dash)), lo) || !parse_int(trim(part.substr(dash + 1)), hi)) {
        throw bad(cat("'", part, "' is not a range of labels"));
      }
      if (hi < lo) throw bad(cat("range '", part, "' runs backwards"));
      if (hi - lo > 1000000) throw bad(cat("range '", part, "' is too long"));
      for (std::int64_t k = lo; k <= hi; ++k) s.labels_.push_back(k);
      if (comma == text.size()) break;
    }
  } else {
    throw bad(cat("got ", v.kind_name(), " ", v.str()));
  }
  std::sort(s.labels_.begin(), s.labels_.end());
  s.labels_.erase(std::unique(s.labels_.begin(), s.labels_.end()), s.labels_.end());
  if (s.labels_.empty()) throw bad("no labels given");
  return s;
}

ClassSet ClassSet::from_params(const Params& p, const std::string& name) {
  if (!p.has(name)) return ClassSet();
  return parse(p.value(name));
}

bool ClassSet::contains(std::int64_t label) const {
  return all_ || std::binary_search(labels_.begin(), labels_.end(), label);
}

std::string ClassSet::str() const {
  if (all_) return "all";
  std::string s;
  for (std::size_t i = 0; i < labels_.size();) {
    std::size_t j = i;
    while (j + 1 < labels_.size() && labels_[j + 1] == labels_[j] + 1) ++j;
    if (!s.empty()) s += ",";
    s += j > i ? cat(labels_[i], "-", labels_[j]) : cat(labels_[i]);
    i = j + 1;
  }
  return s;
}

ParamSpec classes_param(const std::string& doc_suffix) {
  return Param::any("classes").optional().doc(cat("labels to keep: ", kForms, "; unset: all", doc_suffix));
}

void check_classes(SchemaContext& c, const std::string& name) {
  try {
    ClassSet::from_params(c.params(), name);
  } catch (const ConfigError& e) {
    c.error(e.what(), name);
  }
}

}  // namespace embedflow::image
