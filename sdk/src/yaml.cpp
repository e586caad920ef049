#include "embedflow/yaml.hpp"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <optional>
#include <sstream>

namespace embedflow {

SourceLocation yaml_location(const std::string& file, int line, int column) {
  if (line < 0) return SourceLocation{file, 0, 0};
  return SourceLocation{file, line + 1, column + 1};
}

namespace {

SourceLocation loc(const std::string& file, const YAML::Mark& m) { return yaml_location(file, m.line, m.column); }

// Stops the walk: limits are not recoverable problems (the rest of the document would repeat them).
struct LimitReached {
  Diagnostic diagnostic;
};

struct Converter {
  const std::string& file;
  std::vector<Diagnostic>* problems;
  YamlBudget& budget;

  // Counts text the expanded document holds; an alias counts again each time it is followed.
  void spend_bytes(const YAML::Node& at, std::size_t bytes) {
    budget.bytes += bytes;
    if (budget.bytes > kMaxYamlBytes)
      throw LimitReached{Diagnostic{loc(file, at.Mark()), "",
                                    cat("YAML expands to more than ", kMaxYamlBytes, " bytes of text (the expansion "
                                        "budget kMaxYamlBytes; a long string repeated through aliases?)")}};
  }

  void problem(const YAML::Node& at, const std::string& msg) {
    Diagnostic d{loc(file, at.Mark()), "", msg};
    if (!problems) throw ConfigError(d.str());
    problems->push_back(std::move(d));
  }

  // YAML 1.1 merge keys ("<<: *defaults", "<<: [*a, *b]"): the merged maps' entries join the map
  // where the "<<" stands, except keys the map sets itself; of several merged maps the earlier
  // wins. yaml-cpp parses "<<" as an ordinary key, so it is resolved here. That lets a graph
  // declare a training once and vary only what differs, e.g. restarts of one model.
  void merge_into(Value::Map& entries, const YAML::Node& map, const YAML::Node& merged, int depth) {
    auto explicit_key = [&](const std::string& k) {
      for (const auto& kv : map)
        if (kv.first.Scalar() == k) return true;
      for (const auto& e : entries)
        if (e.first == k) return true;
      return false;
    };
    std::vector<YAML::Node> sources;
    if (merged.IsMap()) sources.push_back(merged);
    else if (merged.IsSequence())
      for (const auto& m : merged) sources.push_back(m);
    for (const auto& m : sources) {
      if (!m.IsMap()) {
        problem(m, "'<<' (a YAML merge key) takes a map or a list of maps, e.g. <<: *defaults");
        continue;
      }
      Value merged_map = convert(m, depth + 1);  // resolves merge keys inside the merged map too
      for (const auto& [key, value] : merged_map.as_map())
        if (!explicit_key(key)) entries.emplace_back(key, value);
    }
    if (sources.empty()) problem(merged, "'<<' (a YAML merge key) takes a map or a list of maps, e.g. <<: *defaults");
  }

  Value convert(const YAML::Node& n, int depth) {
    if (depth > kMaxYamlDepth)
      throw LimitReached{Diagnostic{loc(file, n.Mark()), "",
                                    cat("YAML nested deeper than ", kMaxYamlDepth,
                                        " levels (an alias that refers to itself, e.g. &a [*a]?)")}};
    if (++budget.values > kMaxYamlValues)
      throw LimitReached{Diagnostic{loc(file, n.Mark()), "",
                                    cat("YAML expands to more than ", kMaxYamlValues,
                                        " values (aliases repeating aliases: an alias bomb?)")}};
    Value v;
    switch (n.Type()) {
      case YAML::NodeType::Null:
      case YAML::NodeType::Undefined: v = Value(); break;
      case YAML::NodeType::Scalar:
        spend_bytes(n, n.Scalar().size());
        v = Value::from_scalar_text(n.Scalar(), n.Tag() == "!");
        break;
      case YAML::NodeType::Sequence: {
        Value::List items;
        for (const auto& item : n) items.push_back(convert(item, depth + 1));
        v = Value::list(std::move(items));
        break;
      }
      case YAML::NodeType::Map: {
        Value::Map entries;
        std::map<std::string, YAML::Mark> seen;
        for (const auto& kv : n) {
          if (kv.first.IsScalar() && kv.first.Scalar() == "<<" && kv.first.Tag() != "!") {
            merge_into(entries, n, kv.second, depth);
            continue;
          }
          // yaml-cpp keeps both entries of a repeated key and lookups see the first: say so
          // rather than let one of `{count: 3, count: 5}` win silently.
          auto [first, fresh] = seen.emplace(kv.first.Scalar(), kv.first.Mark());
          if (!fresh) {
            problem(kv.first, cat("key '", kv.first.Scalar(), "' is given twice (first at line ", first->second.line + 1, ")"));
            continue;
          }
          spend_bytes(kv.first, kv.first.Scalar().size());
          entries.emplace_back(kv.first.Scalar(), convert(kv.second, depth + 1));
        }
        v = Value::map(std::move(entries));
        break;
      }
    }
    v.at(loc(file, n.Mark()));
    return v;
  }
};

}  // namespace

Value yaml_to_value(const YAML::Node& node, const std::string& file, std::vector<Diagnostic>* problems,
                    YamlBudget* budget) {
  YamlBudget local;
  // A document past a limit was reported once, where it was reached; the rest of it is not read.
  if (budget && (budget->values > kMaxYamlValues || budget->bytes > kMaxYamlBytes)) return Value();
  Converter c{file, problems, budget ? *budget : local};
  try {
    return c.convert(node, 0);
  } catch (const LimitReached& limit) {
    if (!problems) throw ConfigError(limit.diagnostic.str());
    problems->push_back(limit.diagnostic);
    return Value();
  }
}

namespace {

// Counts documents from the parser's events and keeps where the second one's first node is.
class DocumentCounter final : public YAML::EventHandler {
 public:
  int documents = 0;
  std::optional<YAML::Mark> second;

  void OnDocumentStart(const YAML::Mark&) override { ++documents; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& m, YAML::anchor_t) override { node(m); }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t) override { node(m); }
  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t, const std::string&) override { node(m); }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    node(m);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override { node(m); }
  void OnMapEnd() override {}

 private:
  void node(const YAML::Mark& m) {
    if (documents == 2 && !second) second = m;
  }
};

}  // namespace

YAML::Node first_yaml_document(const std::string& text, const std::string& file, SourceLocation& second) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentCounter counter;
  for (int handled = 0; handled < 2 && parser.HandleNextDocument(counter); ++handled) {
  }
  second = counter.documents > 1 ? loc(file, counter.second.value_or(YAML::Mark())) : SourceLocation{};
  if (counter.documents > 1 && second.line == 0) second = SourceLocation{file, 1, 1};
  return counter.documents == 0 ? YAML::Node(YAML::NodeType::Undefined) : YAML::Load(text);
}

Value parse_yaml(const std::string& text, const std::string& file) {
  SourceLocation second;
  std::optional<YAML::Node> root;  // built in place: assigning to a YAML::Node assigns into the node it refers to
  try {
    root.emplace(first_yaml_document(text, file, second));
  } catch (const YAML::Exception& e) {
    throw ConfigError(Diagnostic{loc(file, e.mark), "", "malformed YAML: " + e.msg}.str());
  }
  if (second.line > 0)
    throw ConfigError(Diagnostic{second, "", "a second YAML document ('---') where one is expected"}.str());
  if (!root->IsDefined())  // no document at all (empty text, comments)
    return Value().at(SourceLocation{file, 0, 0});
  return yaml_to_value(*root, file, nullptr);
}

}  // namespace embedflow
