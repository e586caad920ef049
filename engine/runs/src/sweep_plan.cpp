// `embedflow sweep`'s plan: the --grid, --seeds, --point and --against options parsed, the
// variants (the grid's cross product or the listed points), and every point resolved and
// validated before any runs.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
#include <set>

#include "embedflow/error.hpp"
#include "embedflow/log.hpp"
#include "embedflow/suggest.hpp"
#include "embedflow_engine/cache.hpp"
#include "embedflow_engine/graph_file.hpp"
#include "embedflow_runs/session.hpp"
#include "sweep_internal.hpp"

namespace embedflow::runs {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using namespace engine;
using namespace sweep_detail;

std::string sweep_detail::trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\n") - b + 1);
}

namespace {


// Splits at `sep` outside (), [], {} and quotes: YAML flow values keep their commas. Inside
// double quotes a backslash escapes the next character ("a \"b, c\"" is one value).
std::vector<std::string> split_top_level(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  char quote = 0;
  bool escaped = false;
  for (char c : text) {
    if (quote) {
      if (escaped) escaped = false;
      else if (quote == '"' && c == '\\') escaped = true;
      else if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '(' || c == '[' || c == '{') {
      ++depth;
    } else if ((c == ')' || c == ']' || c == '}') && depth > 0) {
      --depth;
    } else if (c == sep && depth == 0) {
      out.push_back(trim(cur));
      cur.clear();
      continue;
    }
    cur += c;
  }
  out.push_back(trim(cur));
  return out;
}

bool parse_u64(const std::string& s, std::uint64_t& v) {
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, v);
  return ec == std::errc() && p == end && !s.empty();
}

void check_variable_name(const std::string& var, const std::string& option) {
  if (var.empty()) throw ConfigError(cat(option, ": expected VAR=value"));
  if (var == "seed") throw ConfigError(cat(option, ": the seed is its own axis: use --seeds N or --seeds 1,2,3"));
  if (var == "out") throw ConfigError(cat(option, ": `out` is set per point by the sweep (SWEEP/points/NAME); sweep other variables"));
}

}  // namespace

SweepAxis parse_grid_axis(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos) throw ConfigError(cat("--grid '", text, "': expected VAR=v1,v2,..."));
  SweepAxis axis;
  axis.variable = trim(text.substr(0, eq));
  check_variable_name(axis.variable, cat("--grid '", text, "'"));
  axis.values = split_top_level(text.substr(eq + 1), ',');
  for (const auto& v : axis.values)
    if (v.empty()) throw ConfigError(cat("--grid ", axis.variable, ": empty value in '", text, "' (values are comma-separated)"));
  std::set<std::string> seen;
  for (const auto& v : axis.values)
    if (!seen.insert(v).second) throw ConfigError(cat("--grid ", axis.variable, ": value '", v, "' is listed twice"));
  return axis;
}

std::vector<std::uint64_t> parse_seeds(const std::string& text, std::uint64_t base) {
  std::vector<std::uint64_t> seeds;
  if (text.find(',') == std::string::npos) {
    std::uint64_t n = 0;
    if (!parse_u64(trim(text), n) || n == 0 || n > 10000)
      throw ConfigError(cat("--seeds '", text, "': expected a count from 1 to 10000, or a list like 1,2,3"));
    for (std::uint64_t i = 0; i < n; ++i) seeds.push_back(base + i);
    return seeds;
  }
  for (const auto& part : split_top_level(text, ',')) {
    std::uint64_t s = 0;
    if (!parse_u64(part, s)) throw ConfigError(cat("--seeds '", text, "': '", part, "' is not a non-negative integer"));
    if (std::find(seeds.begin(), seeds.end(), s) != seeds.end())
      throw ConfigError(cat("--seeds '", text, "': seed ", s, " is listed twice"));
    seeds.push_back(s);
  }
  return seeds;
}

std::vector<std::pair<std::string, std::string>> parse_point(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& part : split_top_level(text, ';')) {
    const auto eq = part.find('=');
    if (eq == std::string::npos || trim(part.substr(eq + 1)).empty())
      throw ConfigError(cat("--point '", text, "': expected VAR=value;VAR2=value"));
    std::string var = trim(part.substr(0, eq));
    check_variable_name(var, cat("--point '", text, "'"));
    for (const auto& [k, v] : out)
      if (k == var) throw ConfigError(cat("--point '", text, "': ", var, " is set twice"));
    out.emplace_back(var, trim(part.substr(eq + 1)));
  }
  return out;
}

std::string sweep_detail::variant_name(const Assignments& values) {
  if (values.empty()) return "(graph as written)";
  std::string s;
  for (const auto& [k, v] : values) s += (s.empty() ? "" : ", ") + k + "=" + v;
  return s;
}

namespace {

// A file-name-safe rendering of a value: letters, digits and ._+- kept, the rest '_', 24 at most.
std::string safe(const std::string& v) {
  std::string s;
  for (char c : v) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '+' || c == '-') ? c : '_';
  return s.size() > 24 ? s.substr(0, 24) : s;
}

}  // namespace

AgainstSpec parse_against(const std::string& text) {
  const std::size_t colon = text.find(':');
  AgainstSpec a;
  if (colon != std::string::npos) a = {trim(text.substr(0, colon)), trim(text.substr(colon + 1))};
  if (a.metric.empty() || a.row.empty())
    throw ConfigError(cat("--against '", text, "': expected METRIC:ROW, e.g. label_precision:pair set (the metric of the row "
                          "whose label starts with ROW)"));
  return a;
}

std::vector<Variant> sweep_detail::build_variants(const SweepOptions& o) {
  if (!o.grid.empty() && !o.points.empty()) throw ConfigError("give either --grid axes or --point lists, not both");
  std::vector<Variant> variants;
  if (!o.points.empty()) {
    for (const auto& p : o.points) variants.push_back({variant_name(p), p});
  } else {
    std::vector<Assignments> combos{{}};
    for (const auto& axis : o.grid) {
      if (axis.values.empty()) throw ConfigError(cat("--grid ", axis.variable, ": no values"));
      for (const auto& other : o.grid)
        if (&other != &axis && other.variable == axis.variable)
          throw ConfigError(cat("--grid ", axis.variable, " is given twice; list its values in one --grid"));
      std::vector<Assignments> next;
      for (const auto& c : combos)
        for (const auto& v : axis.values) {
          Assignments a = c;
          a.emplace_back(axis.variable, v);
          next.push_back(std::move(a));
        }
      combos = std::move(next);
    }
    for (auto& c : combos) variants.push_back({variant_name(c), std::move(c)});
  }
  std::set<std::string> names;
  for (const auto& v : variants)
    if (!names.insert(v.name).second) throw ConfigError(cat("--point ", v.name, " is listed twice"));
  return variants;
}

std::vector<std::string> sweep_detail::assignment_sets(const Assignments& a) {
  std::vector<std::string> out;
  for (const auto& [k, v] : a) out.push_back(k + "=" + v);
  return out;
}

namespace {

// A variable named on the command line must exist in the graph (node.param is checked by the
// override itself). Said once, not once per point.
void check_variables_exist(const GraphSpec& spec, const std::vector<Variant>& variants, const std::vector<std::string>& then) {
  std::vector<std::string> names;
  for (const auto& [k, v] : spec.vars) names.push_back(k);
  auto check = [&](const std::string& var, const char* option) {
    if (var.find('.') != std::string::npos) return;
    if (std::find(names.begin(), names.end(), var) != names.end()) return;
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    throw ConfigError(cat(option, " ", var, ": ", spec.file, " has no variable '", var, "'",
                          did_you_mean(var, names), "; its variables: ",
                          list.empty() ? "none" : list, " (node parameters are named node.param)"));
  };
  for (const auto& v : variants)
    for (const auto& [k, value] : v.values) check(k, "--grid");
  for (const auto& s : then) check(trim(s.substr(0, s.find('='))), "--then");
}

}  // namespace

Plan sweep_detail::plan_points(const SweepOptions& o, const fs::path& dir, const Registry& registry) {
  std::vector<Diagnostic> parse_problems;
  const GraphSpec base = load_graph_file(o.graph, parse_problems);
  if (!parse_problems.empty()) {
    std::string text;
    for (const auto& d : parse_problems) text += "\n  " + d.str();
    throw ConfigError(cat(o.graph, " does not parse:", text));
  }
  if (std::none_of(base.vars.begin(), base.vars.end(), [](const auto& v) { return v.first == "out"; }))
    throw ConfigError(cat(o.graph, " has no variable `out`: every point would write its outputs into the same files. "
                                   "Add `vars: {out: out/NAME}` and write outputs under \"${out}/...\""));
  Plan plan;
  plan.variants = build_variants(o);
  check_variables_exist(base, plan.variants, o.then);
  plan.seeds = o.seeds.empty() ? std::vector<std::uint64_t>{base.seed} : parse_seeds(o.seeds, base.seed);

  std::map<std::string, std::vector<std::string>> problems;  // message -> points
  // `name` empty: the problems are the points' own, reported with them.
  auto resolve_point = [&](const std::vector<std::string>& sets, std::uint64_t seed, const std::string& name) {
    std::vector<Diagnostic> found;
    ResolvedGraph g = prepare_graph(base, found, sets, seed, registry);
    if (!name.empty())
      for (const auto& d : found) problems[d.str()].push_back(name);
    return std::make_pair(std::move(g), found.empty());
  };
  const LogLevel level = log_level();
  set_log_level(LogLevel::warning);  // "node x is disabled" once per point is noise
  for (std::size_t v = 0; v < plan.variants.size(); ++v) {
    std::vector<std::string> sets = o.sets;
    for (const auto& s : assignment_sets(plan.variants[v].values)) sets.push_back(s);
    std::vector<std::string> placeholder{"out=" + (dir / "points" / "POINT").string()};
    placeholder.insert(placeholder.end(), sets.begin(), sets.end());
    plan.variant_specs.push_back(resolve_point(placeholder, plan.seeds[0], "").first.spec);
    for (std::uint64_t seed : plan.seeds) {
      Point p;
      p.index = plan.points.size();
      p.variant = v;
      p.seed = seed;
      p.name = cat(p.index < 100 ? (p.index < 10 ? "00" : "0") : "", p.index);
      for (const auto& [k, value] : plan.variants[v].values) p.name += "-" + safe(k) + "=" + safe(value);
      p.name += cat("-seed=", seed);
      p.dir = dir / "points" / p.name;
      p.sets = sets;
      std::vector<std::string> with_out{"out=" + p.dir.string()};
      with_out.insert(with_out.end(), sets.begin(), sets.end());
      auto [g, ok] = resolve_point(with_out, seed, p.name);
      if (ok) {
        Fingerprinter fp(g);
        for (std::size_t i = 0; i < g.nodes.size(); ++i) {
          const std::string id = g.nodes[i].id();
          if (plan.points.empty()) {
            plan.node_order.push_back(id);
            plan.node_types[id] = g.nodes[i].type->name;
          }
          if (!g.nodes[i].cache.enabled) continue;
          plan.cached_nodes.insert(id);
          p.entries.push_back(id + "-" + fp.manifest(i).fingerprint + ".h5");
        }
      }
      plan.points.push_back(std::move(p));
    }
  }
  if (!o.select.empty() || !o.then.empty()) {
    std::vector<std::string> sets = o.sets;
    for (const auto& s : assignment_sets(plan.variants[0].values)) sets.push_back(s);
    sets.insert(sets.end(), o.then.begin(), o.then.end());
    sets.insert(sets.begin(), "out=" + (dir / "selected").string());
    resolve_point(sets, plan.seeds[0], "selected (--then)");
  }
  set_log_level(level);
  if (!problems.empty()) {
    std::string text;
    for (const auto& [message, names] : problems) {
      text += "\n  " + message + "\n    at point" + (names.size() == 1 ? " " : "s ");
      for (std::size_t i = 0; i < names.size() && i < 4; ++i) text += (i ? ", " : "") + names[i];
      if (names.size() > 4) text += cat(" and ", names.size() - 4, " more");
    }
    throw ConfigError(cat("the sweep has invalid points; nothing was run:", text));
  }
  return plan;
}

}  // namespace embedflow::runs
