#include "cli.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace embedflow::test {
namespace fs = std::filesystem;

static std::string slurp_fd(int fd) {
  std::string s;
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) s.append(buf, static_cast<size_t>(n));
  return s;
}

Result run_process(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  // stdout and stderr go to temp files, so a chatty child cannot deadlock on a full pipe.
  char out_name[] = "/tmp/embedflow_test_outXXXXXX";
  char err_name[] = "/tmp/embedflow_test_errXXXXXX";
  int out_fd = mkstemp(out_name);
  int err_fd = mkstemp(err_name);
  if (out_fd < 0 || err_fd < 0) throw std::runtime_error("mkstemp failed");
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, 0);
    for (const auto& kv : env) putenv(strdup(kv.c_str()));
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  struct rusage usage {};
  wait4(pid, &status, 0, &usage);
  Result r;
  r.max_rss_kb = usage.ru_maxrss;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  lseek(out_fd, 0, SEEK_SET);
  lseek(err_fd, 0, SEEK_SET);
  r.out = slurp_fd(out_fd);
  r.err = slurp_fd(err_fd);
  close(out_fd);
  close(err_fd);
  unlink(out_name);
  unlink(err_name);
  return r;
}

Result run_cli_in(const std::filesystem::path& dir, const std::vector<std::string>& args, const std::string& plugin_path) {
  std::string cmd = "cd '" + dir.string() + "' && exec '" EMBEDFLOW_CLI "'";
  for (const auto& a : args) cmd += " '" + a + "'";
  return run_process({"/bin/sh", "-c", cmd}, {"EMBEDFLOW_PLUGIN_PATH=" + plugin_path});
}

Result run_cli(const std::vector<std::string>& args, const std::vector<std::string>& env) {
  std::vector<std::string> argv{EMBEDFLOW_CLI};
  argv.insert(argv.end(), args.begin(), args.end());
  // Graphs with cache: never touch the user's ~/.cache from a test; tests that check caching pass
  // --cache-dir (or this variable) themselves.
  std::vector<std::string> full_env{"EMBEDFLOW_PLUGIN_PATH=" + plugin_dir(),
                                    "EMBEDFLOW_CACHE_DIR=" + std::string(EMBEDFLOW_BINARY_DIR) + "/test-cache"};
  full_env.insert(full_env.end(), env.begin(), env.end());
  return run_process(argv, full_env);
}

Child spawn_cli(const std::vector<std::string>& args, const std::vector<std::string>& env) {
  Child c;
  fs::path dir = scratch_dir("child");
  c.out_path = (dir / "out").string();
  c.err_path = (dir / "err").string();
  pid_t pid = fork();
  if (pid == 0) {
    int out_fd = open(c.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err_fd = open(c.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    putenv(strdup(("EMBEDFLOW_PLUGIN_PATH=" + plugin_dir()).c_str()));
    putenv(strdup(("EMBEDFLOW_CACHE_DIR=" + std::string(EMBEDFLOW_BINARY_DIR) + "/test-cache").c_str()));
    for (const auto& kv : env) putenv(strdup(kv.c_str()));
    std::vector<std::string> argv{EMBEDFLOW_CLI};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> raw;
    for (const auto& a : argv) raw.push_back(const_cast<char*>(a.c_str()));
    raw.push_back(nullptr);
    execv(raw[0], raw.data());
    _exit(127);
  }
  c.pid = pid;
  return c;
}

Result wait_child(const Child& c) {
  int status = 0;
  struct rusage usage {};
  wait4(c.pid, &status, 0, &usage);
  Result r;
  r.max_rss_kb = usage.ru_maxrss;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_file(c.out_path);
  r.err = read_file(c.err_path);
  return r;
}

Result run_graph_file(const fs::path& dir, const std::string& name, const std::string& yaml,
                      const std::vector<std::string>& extra) {
  const fs::path path = dir / name;
  write_file(path, yaml);
  std::vector<std::string> args{"run", path.string(), "--quiet"};
  args.insert(args.end(), extra.begin(), extra.end());
  return run_cli(args);
}

Result run_python(const std::string& script, const std::vector<std::string>& args) {
  fs::path dir = scratch_dir("python");
  fs::path file = dir / "script.py";
  write_file(file, script);
  std::vector<std::string> argv{EMBEDFLOW_PYTHON, file.string()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv, {"OPENBLAS_NUM_THREADS=1", "OMP_NUM_THREADS=1"});
}

std::map<std::string, std::vector<double>> parse_tagged(const std::string& text) {
  std::map<std::string, std::vector<double>> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string tag;
    ls >> tag;
    double v;
    auto& dst = out[tag];
    while (ls >> v) dst.push_back(v);
  }
  return out;
}

fs::path scratch_dir(const std::string& name) {
  static int counter = 0;
  fs::path dir = fs::path(binary_dir()) / "test-scratch" /
                 (name + "-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write_file(const fs::path& path, const std::string& text) {
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  std::ofstream f(path, std::ios::binary);
  f << text;
  if (!f) throw std::runtime_error("cannot write " + path.string());
}

std::string numbers_through(const std::string& top, int count, const std::string& name, const std::string& spec) {
  std::string label = name + ":";
  label.resize(std::max<std::size_t>(label.size() + 1, 9), ' ');
  return top + "nodes:\n" +
         "  numbers: {type: core.range, params: {count: " + std::to_string(count) + "}}\n" +
         "  " + label + spec + "\n" +
         "  show:    {type: core.sink, params: {mode: count}}\n" +
         "edges: [numbers -> " + name + ", " + name + " -> show]\n";
}

std::string read_file(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace embedflow::test
