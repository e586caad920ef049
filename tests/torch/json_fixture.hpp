// Fixtures recorded from a reference implementation (fixtures/*.json, written by the scripts
// beside them), read by the tests that compare against them.
#pragma once

#include <catch2/catch.hpp>

#include <embedflow/embedflow.hpp>
#include <embedflow/yaml.hpp>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace embedflow::test {

// tests/torch/fixtures/<file>, parsed (JSON is YAML).
inline Value read_json_fixture(const std::string& file) {
  const std::string path = std::string(EMBEDFLOW_SOURCE_DIR) + "/tests/torch/fixtures/" + file;
  std::ifstream in(path);
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  return parse_yaml(text.str(), path);
}

// A fixture's list of numbers as floats.
inline std::vector<float> fixture_floats(const Value& list) {
  std::vector<float> v;
  for (const auto& x : list.as_list()) v.push_back(static_cast<float>(x.as_number()));
  return v;
}

}  // namespace embedflow::test
