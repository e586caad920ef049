#include "cli.hpp"

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <fstream>
#include <iostream>
#include <sstream>

#include "embedflow/log.hpp"
#include "embedflow_engine/graph_file.hpp"
#include "embedflow_runs/session.hpp"

namespace embedflow::cli {
using namespace engine;
using namespace runs;
namespace fs = std::filesystem;

std::atomic<bool> g_stop{false};
std::vector<std::string> g_command;
std::atomic<int> g_signal{0};
const LoadedPlugins* g_plugins = nullptr;

void on_stop_signal(int sig) {
  g_signal.store(sig);
  g_stop.store(true);
  std::signal(sig, SIG_DFL);
}

void add_common(po::options_description& d, Common& c) {
  d.add_options()
      ("plugin-path", po::value(&c.plugin_path)->composing(), "directory to load plugins from (repeatable; before EMBEDFLOW_PLUGIN_PATH)")
      ("quiet,q", po::bool_switch(&c.quiet), "only errors")
      ("verbose,v", po::bool_switch(&c.verbose), "debug logging");
}

void add_graph_options(po::options_description& d, Common& c) {
  d.add_options()("set", po::value(&c.sets)->composing(), "override a parameter: node.param=value (repeatable)");
}

void configure_logging(const Common& c) {
  if (c.quiet) set_log_level(LogLevel::warning);
  if (c.verbose) set_log_level(LogLevel::debug);
}

bool spec_plugin_dirs(const GraphSpec& spec, const std::string& graph, std::vector<std::string>& dirs) {
  try {
    auto found = runs::spec_plugin_dirs(spec, graph);
    dirs.insert(dirs.end(), found.begin(), found.end());
  } catch (const ConfigError& e) {
    std::cerr << "embedflow: " << e.what() << "\n";
    return false;
  }
  return true;
}

bool graph_plugin_dirs(const std::string& graph, std::vector<std::string>& dirs) {
  std::vector<Diagnostic> ignored;  // the real parse reports them
  return spec_plugin_dirs(load_graph_file(graph, ignored), graph, dirs);
}

std::string types_text(const std::string& graph_text, const Common& c) {
  std::string text = graph_text;
  for (const auto& s : c.sets) text += "\n" + s;
  return text;
}
std::string graph_file_text(const std::string& graph) {
  std::ifstream in(graph, std::ios::binary);
  if (!in) return "";
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const LoadedPlugins* load_cli_plugins(const Common& c, const std::vector<std::string>& extra_dirs,
                                      const std::string& graph_text) {
  try {
    g_plugins = &loaded_plugins(c.plugin_path, extra_dirs, graph_text);
  } catch (const ConfigError& e) {
    std::cerr << "embedflow: " << e.what() << "\n";
    return nullptr;
  }
  return g_plugins;
}

namespace {

void print_problems(const std::vector<Diagnostic>& problems) {
  for (const auto& d : problems) std::cerr << d.str() << "\n";
  std::cerr << problems.size() << (problems.size() == 1 ? " problem" : " problems") << " found\n";
}

bool prepare(const std::string& file, const Common& c, std::optional<std::uint64_t> seed, const Registry& registry,
             ResolvedGraph& out) {
  std::vector<Diagnostic> problems;
  GraphSpec spec = load_graph_file(file, problems);
  return prepare_spec(std::move(spec), std::move(problems), c, seed, registry, out);
}

}  // namespace

bool prepare_spec(GraphSpec spec, std::vector<Diagnostic> problems, const Common& c, std::optional<std::uint64_t> seed,
                  const Registry& registry, ResolvedGraph& out) {
  out = prepare_graph(std::move(spec), problems, c.sets, seed, registry);
  if (!problems.empty()) {
    print_problems(problems);
    return false;
  }
  return true;
}

bool args_has(const std::vector<std::string>& args, const std::string& flag) {
  return std::any_of(args.begin(), args.end(), [&](const std::string& a) { return a == flag || a.rfind(flag + "=", 0) == 0; });
}

int parse_or_usage(po::options_description& desc, po::positional_options_description& pos,
                   const std::vector<std::string>& args, po::variables_map& vm, const char* command) {
  try {
    po::store(po::command_line_parser(args).options(desc).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "embedflow " << command << ": " << e.what() << "\n\n" << desc << "\n";
    return kExitInvalid;
  }
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return kExitOk;
  }
  return -1;
}

int parse_graph_command(const char* command, po::options_description& desc, const std::vector<std::string>& args,
                        Common& c, std::string& graph, const std::string* instead_of_graph) {
  desc.add_options()("graph", po::value(&graph), "graph file");
  add_graph_options(desc, c);
  add_common(desc, c);
  po::positional_options_description pos;
  pos.add("graph", 1);
  po::variables_map vm;
  if (int r = parse_or_usage(desc, pos, args, vm, command); r >= 0) return r;
  if (graph.empty() && !(instead_of_graph && !instead_of_graph->empty())) {
    std::cerr << "embedflow " << command << ": no graph file given\n";
    return kExitInvalid;
  }
  configure_logging(c);
  return -1;
}

bool load_graph(const std::string& graph, const Common& c, std::optional<std::uint64_t> seed, ResolvedGraph& out) {
  std::vector<std::string> extra;
  if (!graph_plugin_dirs(graph, extra)) return false;
  const LoadedPlugins* plugins = load_cli_plugins(c, extra);
  return plugins && prepare(graph, c, seed, plugins->registry, out);
}

}  // namespace embedflow::cli
