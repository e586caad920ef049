// Helpers for integration tests: run the embedflow CLI or a Python oracle as a child process
// and capture exit code, stdout and stderr; make scratch directories; write small files.
#pragma once

#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace embedflow::test {

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
  long max_rss_kb = 0;  // peak resident set of the child
};

// A child started without waiting (for signal tests).
struct Child {
  int pid = -1;
  std::string out_path, err_path;
};
Child spawn_cli(const std::vector<std::string>& args, const std::vector<std::string>& env = {});
Result wait_child(const Child& child);

// Runs `argv` (argv[0] is a path) with extra environment assignments ("K=V"); waits.
Result run_process(const std::vector<std::string>& argv, const std::vector<std::string>& env = {});
// Runs build/bin/embedflow with the given arguments (plugin path from the build).
Result run_cli(const std::vector<std::string>& args, const std::vector<std::string>& env = {});
// Writes `yaml` to dir/name and runs it with the CLI: run <file> --quiet, then `extra`.
Result run_graph_file(const std::filesystem::path& dir, const std::string& name, const std::string& yaml,
                      const std::vector<std::string>& extra = {});
// run_graph_file for a graph that must succeed: a failed run fails the test with its stderr.
inline Result run_graph_file_ok(const std::filesystem::path& dir, const std::string& name, const std::string& yaml,
                                const std::vector<std::string>& extra = {}) {
  Result r = run_graph_file(dir, name, yaml, extra);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return r;
}
// Runs the CLI with `args` and checks that it exits with `code` saying `message` on stderr.
inline void check_cli_fails(const std::vector<std::string>& args, int code, const std::string& message) {
  std::string command = "embedflow";
  for (const auto& a : args) command += " " + a;
  INFO(command);
  const Result r = run_cli(args);
  CHECK(r.exit_code == code);
  CHECK_THAT(r.err, Catch::Contains(message));
}
// Runs Debian's python3 with a script text; the script gets argv[1..] = args.
Result run_python(const std::string& script, const std::vector<std::string>& args = {});
// run_python for a Python check: a script exiting non-zero fails the test with its output, and
// the test goes on. Returns the result, for tests that read what the script printed.
inline Result check_python(const std::string& script, const std::vector<std::string>& args = {}) {
  Result py = run_python(script, args);
  INFO(py.out << py.err);
  CHECK(py.exit_code == 0);
  return py;
}
// An oracle's output read as lines "tag v1 v2 ...": tag -> values.
std::map<std::string, std::vector<double>> parse_tagged(const std::string& text);

// A fresh empty directory under the build tree's test scratch area, named after `name`.
std::filesystem::path scratch_dir(const std::string& name);
void write_file(const std::filesystem::path& path, const std::string& text);
// A graph file's text: `top` (top-level lines such as "seed: 1\nout: out/g\n"), then core.range
// counting `count` numbers through one node `name` (`spec`, e.g. "{type: testing.progress,
// params: {total: 5}}") into a counting core.sink.
std::string numbers_through(const std::string& top, int count, const std::string& name, const std::string& spec);
std::string read_file(const std::filesystem::path& path);

inline std::string source_dir() { return EMBEDFLOW_SOURCE_DIR; }
inline std::string binary_dir() { return EMBEDFLOW_BINARY_DIR; }
inline std::string plugin_dir() { return EMBEDFLOW_TEST_PLUGIN_DIR; }

// Runs build/bin/embedflow from `dir`, so a graph's relative paths (data/..., out/...) resolve
// there exactly as they do for a user running it from that folder; plugins from `plugin_path`.
Result run_cli_in(const std::filesystem::path& dir, const std::vector<std::string>& args,
                  const std::string& plugin_path = plugin_dir());

// Writes `yaml` to dir/name and validates it with the CLI run from `dir` (exit 2, the errors
// on stderr, when it is not valid).
inline Result validate_in(const std::filesystem::path& dir, const std::string& name, const std::string& yaml) {
  write_file(dir / name, yaml);
  return run_cli_in(dir, {"validate", name});
}

#ifdef EMBEDFLOW_TESTING_PLUGIN_DIR
// run_cli_in with the tests' own plugin (testing.progress, testing.explode, ...) beside the
// built ones.
inline Result run_with_testing_plugin(const std::filesystem::path& dir, const std::vector<std::string>& args) {
  return run_cli_in(dir, args, plugin_dir() + ":" + EMBEDFLOW_TESTING_PLUGIN_DIR);
}
#endif

}  // namespace embedflow::test
