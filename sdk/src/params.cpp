#include "embedflow/params.hpp"

#include <algorithm>
#include <cmath>

#include "embedflow/registry.hpp"
#include "embedflow/suggest.hpp"

namespace embedflow {

const char* param_type_name(ParamType t) {
  switch (t) {
    case ParamType::boolean: return "bool";
    case ParamType::integer: return "int";
    case ParamType::number: return "float";
    case ParamType::string: return "string";
    case ParamType::path: return "path";
    case ParamType::choice: return "choice";
    case ParamType::integer_list: return "list<int>";
    case ParamType::number_list: return "list<float>";
    case ParamType::string_list: return "list<string>";
    case ParamType::component: return "component";
    case ParamType::any: return "any";
  }
  return "?";
}

Param& Param::default_value(std::vector<std::int64_t> v) {
  Value::List l;
  for (auto x : v) l.push_back(Value::integer(x));
  return default_value(Value::list(std::move(l)));
}
Param& Param::default_value(std::vector<double> v) {
  Value::List l;
  for (auto x : v) l.push_back(Value::number(x));
  return default_value(Value::list(std::move(l)));
}
Param& Param::default_value(std::vector<std::string> v) {
  Value::List l;
  for (auto& x : v) l.push_back(Value::string(x));
  return default_value(Value::list(std::move(l)));
}

const Value& Params::value(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) throw ConfigError(cat("parameter '", name, "' is not set"));
  return it->second;
}

std::vector<std::int64_t> Params::integers(const std::string& name) const {
  std::vector<std::int64_t> out;
  for (const auto& v : value(name).as_list()) out.push_back(v.as_integer());
  return out;
}
std::vector<double> Params::numbers(const std::string& name) const {
  std::vector<double> out;
  for (const auto& v : value(name).as_list()) out.push_back(v.as_number());
  return out;
}
std::vector<std::string> Params::strings(const std::string& name) const {
  std::vector<std::string> out;
  for (const auto& v : value(name).as_list()) out.push_back(v.as_string());
  return out;
}

std::map<std::string, std::int64_t> Params::integer_values() const {
  std::map<std::string, std::int64_t> out;
  for (const auto& [k, v] : values_)
    if (v.is_integer()) out[k] = v.as_integer();
  return out;
}

// Optimal string alignment distance: insertions, deletions, substitutions and adjacent
// transpositions ("rnage" -> "range") each cost one.
static std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

static std::size_t name_distance(const std::string& word, const std::string& candidate) {
  std::size_t d = edit_distance(word, candidate);
  // A dropped family ("batch" for "core.batch") or a longer spelling of a short name
  // ("output" for "out") is a near miss too.
  auto dot = candidate.rfind('.');
  if (dot != std::string::npos) d = std::min(d, edit_distance(word, candidate.substr(dot + 1)) + 1);
  const std::string& shorter = word.size() < candidate.size() ? word : candidate;
  const std::string& longer = word.size() < candidate.size() ? candidate : word;
  if (shorter.size() >= 2 && longer.compare(0, shorter.size(), shorter) == 0) d = std::min<std::size_t>(d, 1);
  return d;
}

std::string closest_match(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_d = std::string::npos;
  for (const auto& c : candidates) {
    std::size_t d = name_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  std::size_t limit = std::max<std::size_t>(1, word.size() / 4);
  return best_d <= limit ? best : "";
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates,
                         const std::vector<std::string>& shown) {
  const std::string hint = closest_match(word, candidates);
  if (hint.empty()) return "";
  std::string spelt = hint;
  if (!shown.empty()) {
    const auto at = static_cast<std::size_t>(std::find(candidates.begin(), candidates.end(), hint) - candidates.begin());
    if (at < shown.size()) spelt = shown[at];
  }
  return "; did you mean '" + spelt + "'?";
}

namespace {

struct Checker {
  const Registry* registry;
  std::vector<Diagnostic>& problems;
  std::string owner;   // node id
  std::string prefix;  // "param 'loss' (torch.contrastive): " for nested components

  void fail(const Value& at, const SourceLocation& fallback, const std::string& msg) {
    Diagnostic d;
    d.where = at.where().known() ? at.where() : fallback;
    d.node = owner;
    d.message = prefix + msg;
    problems.push_back(std::move(d));
  }

  bool check_range(const ParamSpec& s, const Value& v, const SourceLocation& fb) {
    double x = v.as_number();
    if (std::isnan(x) || (s.min && x < *s.min) || (s.max && x > *s.max)) {
      std::string range = cat("[", s.min ? cat(*s.min) : std::string("-inf"), ", ",
                               s.max ? cat(*s.max) : std::string("inf"), "]");
      fail(v, fb, cat("parameter '", s.name, "' = ", v.str(), " is out of range ", range));
      return false;
    }
    return true;
  }

  // Returns the normalised value, or nullopt after reporting a problem.
  std::optional<Value> scalar(const ParamSpec& s, ParamType t, const Value& v, const SourceLocation& fb) {
    auto wrong = [&](const char* wanted) {
      fail(v, fb, cat("parameter '", s.name, "' expects ", wanted, ", got ", v.kind_name(), " ", v.str()));
      return std::nullopt;
    };
    switch (t) {
      case ParamType::boolean:
        if (!v.is_boolean()) return wrong("a boolean (true/false)");
        return v;
      case ParamType::integer:
        if (!v.is_integer()) return wrong("an integer");
        if (!check_range(s, v, fb)) return std::nullopt;
        return v;
      case ParamType::number: {
        if (!v.is_number()) return wrong("a number");
        if (!check_range(s, v, fb)) return std::nullopt;
        Value n = Value::number(v.as_number());
        n.at(v.where());
        return n;
      }
      case ParamType::string:
      case ParamType::path: {
        if (v.is_list() || v.is_map() || v.is_null()) return wrong(t == ParamType::path ? "a path" : "a string");
        if (v.is_string()) return v;
        Value s2 = Value::string(v.str());  // a bare 2013 for a string parameter is "2013"
        s2.at(v.where());
        return s2;
      }
      case ParamType::choice: {
        if (!v.is_string()) return wrong("a string");
        if (std::find(s.choices.begin(), s.choices.end(), v.as_string()) == s.choices.end()) {
          std::string all;
          for (const auto& c : s.choices) all += (all.empty() ? "" : ", ") + c;
          fail(v, fb, cat("parameter '", s.name, "' = ", v.str(), " is not one of {", all, "}",
                          did_you_mean(v.as_string(), s.choices)));
          return std::nullopt;
        }
        return v;
      }
      default: return v;
    }
  }

  std::optional<Value> one(const ParamSpec& s, const Value& v, const SourceLocation& fb) {
    switch (s.type) {
      case ParamType::integer_list:
      case ParamType::number_list:
      case ParamType::string_list: {
        ParamType elem = s.type == ParamType::integer_list ? ParamType::integer
                         : s.type == ParamType::number_list ? ParamType::number
                                                            : ParamType::string;
        Value::List items;
        if (v.is_list()) items = v.as_list();
        else if (!v.is_map() && !v.is_null()) items.push_back(v);  // a lone scalar is a one-element list
        else {
          fail(v, fb, cat("parameter '", s.name, "' expects a list, got ", v.kind_name()));
          return std::nullopt;
        }
        Value::List out;
        bool ok = true;
        for (const Value& item : items) {
          auto n = scalar(s, elem, item, v.where().known() ? v.where() : fb);
          if (!n) ok = false;
          else out.push_back(*n);
        }
        if (!ok) return std::nullopt;
        Value l = Value::list(std::move(out));
        l.at(v.where());
        return l;
      }
      case ParamType::component: return component(s, v, fb);
      case ParamType::any: return v;
      default: return scalar(s, s.type, v, fb);
    }
  }

  std::optional<Value> component(const ParamSpec& s, const Value& v, const SourceLocation& fb) {
    Value spec;
    if (v.is_string()) {
      spec = Value::map({{"type", v}});
      spec.at(v.where());
    } else if (v.is_map() && v.get("type") && v.get("type")->is_string()) {
      spec = v;
    } else {
      fail(v, fb, cat("parameter '", s.name, "' expects a component spec {type: ..., ...} of kind '",
                      s.component_kind, "'"));
      return std::nullopt;
    }
    if (!registry) return spec;
    const std::string& type = spec.get("type")->as_string();
    const ComponentType* ct = registry->component_type(type);
    if (!ct || (!s.component_kind.empty() && ct->kind != s.component_kind)) {
      std::vector<std::string> names = registry->component_type_names(s.component_kind);
      std::string all;
      for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
      fail(*spec.get("type"), fb,
           cat("parameter '", s.name, "': ", ct ? "component '" + type + "' is a " + ct->kind + ", not a " + s.component_kind
                                                : "unknown component type '" + type + "'",
               did_you_mean(type, names), all.empty() ? "" : cat(" (", s.component_kind, ": ", all, ")")));
      return std::nullopt;
    }
    Value rest = Value::map({});
    rest.at(spec.where());
    for (const auto& [k, val] : spec.as_map())
      if (k != "type") rest.set(k, val);
    Params nested;
    Checker inner{registry, problems, owner, prefix + cat("parameter '", s.name, "' (", type, "): ")};
    std::size_t before = problems.size();
    inner.all(ct->params, rest, nested, spec.where().known() ? spec.where() : fb);
    if (problems.size() != before) return std::nullopt;
    Value out = Value::map({{"type", Value::string(type)}});
    for (const auto& [k, val] : nested.all()) out.set(k, val);
    out.at(spec.where());
    return out;
  }

  void all(const std::vector<ParamSpec>& specs, const Value& given, Params& out, const SourceLocation& fb) {
    if (!given.is_null() && !given.is_map()) {
      fail(given, fb, cat("params must be a map of name: value, got ", given.kind_name()));
      return;
    }
    std::vector<std::string> names;
    for (const auto& s : specs) names.push_back(s.name);
    if (given.is_map())
      for (const auto& [k, v] : given.as_map()) {
        if (std::find(names.begin(), names.end(), k) != names.end()) continue;
        fail(v, fb, cat("unknown parameter '", k, "'", did_you_mean(k, names)));
      }
    for (const auto& s : specs) {
      const Value* v = given.is_map() ? given.get(s.name) : nullptr;
      if (v && !v->is_null()) {
        if (auto n = one(s, *v, fb)) out.set(s.name, std::move(*n));
      } else if (s.default_value) {
        auto n = one(s, *s.default_value, fb);
        if (n) out.set(s.name, std::move(*n));
      } else if (!s.optional) {
        Diagnostic d;
        d.where = given.where().known() ? given.where() : fb;
        d.node = owner;
        d.message = prefix + cat("missing required parameter '", s.name, "' (", param_type_name(s.type),
                                 s.doc.empty() ? "" : ": " + s.doc, ")");
        problems.push_back(std::move(d));
      }
    }
  }
};

}  // namespace

void validate_params(const std::vector<ParamSpec>& specs, const Value& given, const Registry* registry, Params& out,
                     std::vector<Diagnostic>& problems, const std::string& owner) {
  Checker c{registry, problems, owner, ""};
  c.all(specs, given, out, given.where());
}

}  // namespace embedflow
