// How a sweep's points run: each a child `embedflow run` process in its own process group, its
// output in the point's log.txt, its outcome read back from the run record it leaves; points
// completed by an earlier sweep into the same folder are found and kept.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "embedflow/error.hpp"
#include "embedflow_runs/run_record.hpp"
#include "sweep_internal.hpp"

extern char** environ;

namespace embedflow::runs {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using namespace engine;
using namespace sweep_detail;

sweep_detail::FolderLock::FolderLock(const fs::path& dir) {
  const fs::path file = dir / ".sweep.lock";
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(cat("cannot create '", file.string(), "': ", std::strerror(errno)));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    char buf[32] = {0};
    ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
    ::close(fd_);
    fd_ = -1;
    throw ConfigError(cat("another sweep", n > 0 ? cat(" (pid ", trim(buf), ")") : std::string(), " is running in ",
                          dir.string(), "; wait for it to finish or give another --out"));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) < 0) { /* the pid is a courtesy */ }
}

sweep_detail::FolderLock::~FolderLock() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {

std::vector<std::string> expected_overrides(const Point& p) {
  std::vector<std::string> out{"out=" + p.dir.string()};
  out.insert(out.end(), p.sets.begin(), p.sets.end());
  return out;
}

}  // namespace

void sweep_detail::read_point_outcome(Point& p, int exit_code) {
  p.exit_code = exit_code;
  const fs::path record = p.dir / kRunRecordFile;
  std::error_code ec;
  json rec;
  if (fs::exists(record, ec)) {
    try {
      rec = read_run_record(record.string());
    } catch (const std::exception& e) {
      p.error = e.what();
    }
  }
  if (rec.is_object()) {
    p.nodes = json::object();
    for (const auto& n : rec.value("nodes", json::array())) p.nodes[n.value("id", "")] = n.value("mode", "");
    if (rec.contains("error")) p.error = rec["error"].get<std::string>();
  }
  if (exit_code == 0) {
    p.status = "ok";
  } else {
    p.status = exit_code == 130 || exit_code == 143 ? "interrupted" : "failed";
    if (p.error.empty()) {
      // It stopped before writing a record: its own words, from the log's last lines.
      std::ifstream log(p.dir / "log.txt");
      std::string line, last;
      while (std::getline(log, line))
        if (!trim(line).empty()) last = line;
      p.error = last.empty() ? cat("exited with code ", exit_code) : last;
    }
  }
}

std::size_t sweep_detail::mark_resumed(std::vector<Point>& points, const std::string& graph) {
  const std::string sha = sha256_file(graph);
  std::size_t stale = 0;
  for (auto& p : points) {
    const fs::path record = p.dir / kRunRecordFile;
    std::error_code ec;
    if (!fs::exists(record, ec)) continue;
    json rec;
    try {
      rec = read_run_record(record.string());
    } catch (const std::exception&) {
      continue;  // a damaged record: the point runs again
    }
    std::vector<std::string> recorded;
    for (const auto& s : rec.value("overrides", json::array())) recorded.push_back(s.get<std::string>());
    if (recorded != expected_overrides(p) || rec.value("seed", std::uint64_t{0}) != p.seed) {
      std::string was;
      for (const auto& s : recorded) was += " --set " + s;
      throw ConfigError(cat(p.dir.string(), " holds a run of another sweep (it ran with", was, ", seed ",
                            rec.value("seed", std::uint64_t{0}), "); give this sweep another --out or remove the folder"));
    }
    if (rec.value("status", "") != "done") continue;
    if (rec["graph"].value("sha256", "") != sha) {
      ++stale;
      continue;
    }
    read_point_outcome(p, 0);
    p.seconds = rec.value("seconds", 0.0);
    p.resumed = true;
  }
  return stale;
}

std::vector<std::string> sweep_detail::point_argv(const SweepOptions& o, const Point& p, const fs::path& cache_dir, int threads) {
  std::vector<std::string> argv{o.executable, "run", o.graph, "--out", p.dir.string(), "--seed", std::to_string(p.seed),
                                "--threads", std::to_string(threads), "--cache-dir", cache_dir.string()};
  for (const auto& d : o.plugin_path) argv.insert(argv.end(), {"--plugin-path", d});
  for (const auto& s : p.sets) argv.insert(argv.end(), {"--set", s});
  if (!o.report) argv.push_back("--no-report");
  return argv;
}

pid_t sweep_detail::spawn(const std::vector<std::string>& argv, const fs::path& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0].c_str(), &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw Error(cat("cannot start ", argv[0], ": ", std::strerror(rc)));
  return pid;
}

int sweep_detail::exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace embedflow::runs
