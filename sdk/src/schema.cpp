#include "embedflow/schema.hpp"

#include <cctype>

namespace embedflow {

std::string Dim::str() const {
  switch (kind) {
    case Kind::fixed: return std::to_string(value);
    case Kind::symbol: return name;
    case Kind::param: return "$" + name;
    case Kind::unknown: return "?";
    case Kind::rest: return "...";
  }
  return "?";
}

std::string FieldSchema::str() const {
  std::string s = name + ": " + (dtype ? std::string(dtype_name(*dtype)) : "any");
  if (shape) {
    s += "[";
    for (std::size_t i = 0; i < shape->size(); ++i) s += (i ? "," : "") + (*shape)[i].str();
    s += "]";
  }
  return s;
}

static std::string trim(const std::string& s) {
  std::size_t b = s.find_first_not_of(" \t\n");
  if (b == std::string::npos) return "";
  std::size_t e = s.find_last_not_of(" \t\n");
  return s.substr(b, e - b + 1);
}

static bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

// Splits on commas outside brackets.
static std::vector<std::string> split_top(const std::string& s) {
  std::vector<std::string> out;
  int depth = 0;
  std::string cur;
  for (char c : s) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(trim(cur));
  return out;
}

static Dim parse_dim(const std::string& tok, const std::string& text) {
  Dim d;
  if (tok == "?") return d;
  if (tok == "...") { d.kind = Dim::Kind::rest; return d; }
  if (!tok.empty() && tok[0] == '$' && is_identifier(tok.substr(1))) {
    d.kind = Dim::Kind::param;
    d.name = tok.substr(1);
    return d;
  }
  if (is_identifier(tok)) {
    d.kind = Dim::Kind::symbol;
    d.name = tok;
    return d;
  }
  bool digits = !tok.empty();
  for (char c : tok) digits = digits && std::isdigit(static_cast<unsigned char>(c));
  if (digits) {
    d.kind = Dim::Kind::fixed;
    d.value = std::stoll(tok);
    return d;
  }
  throw ConfigError(cat("schema '", text, "': bad dimension '", tok, "' (use a number, a SYMBOL, $param, ? or ...)"));
}

PortSchema PortSchema::parse(const std::string& text) {
  PortSchema s;
  std::string t = trim(text);
  if (t.empty() || t == "*") return s;
  s.any_ = false;
  for (const std::string& part : split_top(t)) {
    if (part.empty()) throw ConfigError(cat("schema '", text, "': empty field"));
    FieldSchema f;
    auto colon = part.find(':');
    f.name = trim(part.substr(0, colon));
    if (!is_identifier(f.name)) throw ConfigError(cat("schema '", text, "': bad field name '", f.name, "'"));
    if (colon != std::string::npos) {
      std::string type = trim(part.substr(colon + 1));
      std::string dtype = type;
      auto bracket = type.find('[');
      if (bracket != std::string::npos) {
        if (type.back() != ']') throw ConfigError(cat("schema '", text, "': unclosed '[' in '", part, "'"));
        dtype = trim(type.substr(0, bracket));
        std::string dims = trim(type.substr(bracket + 1, type.size() - bracket - 2));
        std::vector<Dim> shape;
        if (!dims.empty())
          for (const std::string& tok : split_top(dims)) shape.push_back(parse_dim(tok, text));
        for (std::size_t i = 0; i + 1 < shape.size(); ++i)
          if (shape[i].kind == Dim::Kind::rest) throw ConfigError(cat("schema '", text, "': '...' must be the last dim"));
        f.shape = std::move(shape);
      }
      if (dtype != "any") {
        DType dt;
        if (!parse_dtype(dtype, dt))
          throw ConfigError(cat("schema '", text, "': unknown dtype '", dtype, "' (u8, i32, i64, f32, f64, bool, str, any)"));
        f.dtype = dt;
      }
    }
    s.add(std::move(f));
  }
  return s;
}

const FieldSchema* PortSchema::find(const std::string& name) const {
  for (const auto& f : fields_)
    if (f.name == name) return &f;
  return nullptr;
}

void PortSchema::add(FieldSchema f) {
  any_ = false;
  for (auto& existing : fields_)
    if (existing.name == f.name) {
      existing = std::move(f);
      return;
    }
  fields_.push_back(std::move(f));
}

bool PortSchema::remove(const std::string& name) {
  for (auto it = fields_.begin(); it != fields_.end(); ++it)
    if (it->name == name) {
      fields_.erase(it);
      return true;
    }
  return false;
}

std::string PortSchema::str() const {
  std::string s = any_ ? "*" : "";
  for (std::size_t i = 0; i < fields_.size(); ++i) s += (i ? ", " : "") + fields_[i].str();
  for (const auto& [name, produces] : carried_) s += cat(s.empty() ? "" : "; ", "carries ", name, " -> {", produces->str(), "}");
  return s;
}

void PortSchema::set_carried(const std::string& name, PortSchema produces) {
  auto p = std::make_shared<const PortSchema>(std::move(produces));
  for (auto& [n, existing] : carried_)
    if (n == name) {
      existing = std::move(p);
      return;
    }
  carried_.emplace_back(name, std::move(p));
}

const PortSchema* PortSchema::carried(const std::string& name) const {
  for (const auto& [n, produces] : carried_)
    if (n == name) return produces.get();
  return nullptr;
}

namespace {
// Schema transforms build a new field list; what the records carry stays as it was.
PortSchema with_carried_of(PortSchema out, const PortSchema& from) {
  for (const auto& [name, produces] : from.carried_all()) out.set_carried(name, *produces);
  return out;
}
}  // namespace

PortSchema substitute(const PortSchema& schema, const std::map<std::string, std::int64_t>& params,
                      const DimBindings& bindings) {
  if (schema.is_any()) return schema;
  PortSchema out = schema;
  PortSchema result;
  for (FieldSchema f : out.fields()) {
    if (f.shape)
      for (Dim& d : *f.shape) {
        if (d.kind == Dim::Kind::param) {
          auto it = params.find(d.name);
          if (it != params.end()) d = Dim{Dim::Kind::fixed, it->second, ""};
        } else if (d.kind == Dim::Kind::symbol) {
          auto it = bindings.find(d.name);
          if (it != bindings.end()) d = Dim{Dim::Kind::fixed, it->second, ""};
        }
      }
    result.add(std::move(f));
  }
  return with_carried_of(std::move(result), schema);
}

bool unify(const PortSchema& produced, const PortSchema& required, DimBindings& bindings,
           std::vector<std::string>& problems) {
  if (required.is_any() || produced.is_any()) return true;
  std::size_t before = problems.size();
  for (const FieldSchema& rf : required.fields()) {
    const FieldSchema* pf = produced.find(rf.name);
    if (!pf) {
      std::string have;
      for (const auto& f : produced.fields()) have += (have.empty() ? "" : ", ") + f.name;
      problems.push_back(cat("needs field '", rf.name, "' but upstream provides only {", have, "}"));
      continue;
    }
    if (rf.dtype && pf->dtype && *rf.dtype != *pf->dtype) {
      problems.push_back(cat("field '", rf.name, "': expects dtype ", dtype_name(*rf.dtype), ", upstream gives ",
                             dtype_name(*pf->dtype)));
      continue;
    }
    if (!rf.shape || !pf->shape) continue;
    const auto& r = *rf.shape;
    const auto& p = *pf->shape;
    bool r_rest = !r.empty() && r.back().kind == Dim::Kind::rest;
    bool p_rest = !p.empty() && p.back().kind == Dim::Kind::rest;
    std::size_t r_fixed = r.size() - (r_rest ? 1 : 0);
    std::size_t p_fixed = p.size() - (p_rest ? 1 : 0);
    bool rank_ok = (r_rest || p_rest) ? (r_rest ? p_fixed >= r_fixed || p_rest : r_fixed >= p_fixed)
                                      : r_fixed == p_fixed;
    if (!rank_ok) {
      problems.push_back(cat("field '", rf.name, "': expects shape ", rf.str().substr(rf.name.size() + 2),
                             ", upstream gives ", pf->str().substr(pf->name.size() + 2), " (rank differs)"));
      continue;
    }
    std::size_t n = std::min(r_fixed, p_fixed);
    for (std::size_t i = 0; i < n; ++i) {
      const Dim& rd = r[i];
      const Dim& pd = p[i];
      if (pd.kind != Dim::Kind::fixed) continue;  // producer does not know it: nothing to check
      if (rd.kind == Dim::Kind::fixed && rd.value != pd.value) {
        problems.push_back(cat("field '", rf.name, "' dim ", i, ": expects ", rd.value, ", upstream gives ", pd.value,
                               " (", pf->str(), ")"));
      } else if (rd.kind == Dim::Kind::symbol) {
        auto it = bindings.find(rd.name);
        if (it == bindings.end()) {
          bindings[rd.name] = pd.value;
        } else if (it->second != pd.value) {
          problems.push_back(cat("field '", rf.name, "' dim ", rd.name, ": is ", pd.value, " here but ", it->second,
                                 " on another field or port of this node (", pf->str(), ")"));
        }
      }
    }
  }
  return problems.size() == before;
}

PortSchema batched(const PortSchema& s, const Dim& dim) {
  if (s.is_any()) return s;
  PortSchema out;
  for (FieldSchema f : s.fields()) {
    if (f.shape) f.shape->insert(f.shape->begin(), dim);
    out.add(std::move(f));
  }
  return with_carried_of(std::move(out), s);
}

PortSchema unbatched(const PortSchema& s) {
  if (s.is_any()) return s;
  PortSchema out;
  for (FieldSchema f : s.fields()) {
    if (f.shape && !f.shape->empty() && f.shape->front().kind != Dim::Kind::rest) f.shape->erase(f.shape->begin());
    out.add(std::move(f));
  }
  return with_carried_of(std::move(out), s);
}

}  // namespace embedflow
