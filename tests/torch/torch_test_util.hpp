// Helpers the torch tests share: component specs written as in YAML, and torch.train's
// metrics.csv read back.
#pragma once

#include <catch2/catch.hpp>

#include <embedflow/embedflow.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace embedflow::test {

// {type: <type>, <params...>}, as a graph file writes a component.
inline Value spec(const std::string& type, Value::Map params = {}) {
  Value::Map m{{"type", Value::string(type)}};
  for (auto& p : params) m.push_back(std::move(p));
  return Value::map(std::move(m));
}
inline Value num(double d) { return Value::number(d); }
inline Value str(const char* s) { return Value::string(s); }

// One row of torch.train's metrics.csv, as written (text, so tests can compare digits).
struct MetricsRow {
  std::string step, epoch, loss, lr;
};

inline std::vector<MetricsRow> read_metrics(const std::filesystem::path& csv) {
  std::ifstream in(csv);
  INFO("reading " << csv);
  std::string line;
  std::getline(in, line);
  REQUIRE(line == "step,epoch,loss,lr,samples_per_s");
  std::vector<MetricsRow> rows;
  while (std::getline(in, line)) {
    std::istringstream s(line);
    MetricsRow r;
    std::getline(s, r.step, ',');
    std::getline(s, r.epoch, ',');
    std::getline(s, r.loss, ',');
    std::getline(s, r.lr, ',');
    rows.push_back(r);
  }
  return rows;
}

// The loss column of a metrics.csv, as numbers.
inline std::vector<double> metrics_losses(const std::filesystem::path& csv) {
  std::vector<double> losses;
  for (const auto& r : read_metrics(csv)) losses.push_back(std::stod(r.loss));
  return losses;
}

}  // namespace embedflow::test
