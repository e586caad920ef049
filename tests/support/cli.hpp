// Helpers for integration tests: run the embedflow CLI or a Python oracle as a child process
// and capture exit code, stdout and stderr; make scratch directories; write small files.
#pragma once

#include <filesystem>
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
// Runs Debian's python3 with a script text; the script gets argv[1..] = args.
Result run_python(const std::string& script, const std::vector<std::string>& args = {});

// A fresh empty directory under the build tree's test scratch area, named after `name`.
std::filesystem::path scratch_dir(const std::string& name);
void write_file(const std::filesystem::path& path, const std::string& text);
std::string read_file(const std::filesystem::path& path);

inline std::string source_dir() { return EMBEDFLOW_SOURCE_DIR; }
inline std::string binary_dir() { return EMBEDFLOW_BINARY_DIR; }
inline std::string plugin_dir() { return EMBEDFLOW_TEST_PLUGIN_DIR; }

// Runs build/bin/embedflow from `dir`, so a graph's relative paths (data/..., out/...) resolve
// there exactly as they do for a user running it from that folder; plugins from `plugin_path`.
Result run_cli_in(const std::filesystem::path& dir, const std::vector<std::string>& args,
                  const std::string& plugin_path = plugin_dir());

}  // namespace embedflow::test
