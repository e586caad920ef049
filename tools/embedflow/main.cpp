// embedflow: run, validate, inspect and draw dataflow graphs.
//
//   embedflow run G.yaml [--set node.param=value]... [--threads N] [--seed N] [--trace t.json]
//   embedflow validate G.yaml          every problem at once, as FILE:LINE:COL: node 'x': ...
//   embedflow inspect [TYPE] [--json]  node and component types, like gst-inspect
//   embedflow dot G.yaml [-o g.dot]    Graphviz drawing with port schemas
//
// Exit codes: 0 done, 1 runtime failure, 2 invalid usage or graph, 130 interrupted.
#include <boost/program_options.hpp>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <iostream>

#include "embedflow/log.hpp"
#include "embedflow/version.hpp"
#include "embedflow_engine/describe.hpp"
#include "embedflow_engine/graph.hpp"
#include "embedflow_engine/plugin_loader.hpp"
#include "embedflow_engine/runtime.hpp"

namespace po = boost::program_options;
using namespace embedflow;
using namespace embedflow::engine;

namespace {

std::atomic<bool> g_stop{false};

void on_sigint(int) {
  // First Ctrl-C drains the graph; a second one gets the default behaviour (terminate).
  g_stop.store(true);
  std::signal(SIGINT, SIG_DFL);
}

constexpr int kExitOk = 0, kExitFailure = 1, kExitInvalid = 2;

const char* kUsage =
    "usage: embedflow <command> [options]\n\n"
    "commands:\n"
    "  run GRAPH        run a graph file\n"
    "  validate GRAPH   check a graph file and list every problem\n"
    "  inspect [TYPE]   list node and component types, or describe one\n"
    "  dot GRAPH        print the resolved graph as Graphviz\n"
    "  version          print versions\n\n"
    "Run 'embedflow <command> --help' for its options.\n";

struct Common {
  std::vector<std::string> plugin_path;
  std::vector<std::string> sets;
  bool quiet = false;
  bool verbose = false;
};

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

bool load_plugins(const Common& c, Registry& registry, PluginLoader*& out) {
  static std::unique_ptr<PluginLoader> loader;  // libraries stay resident until exit
  loader = std::make_unique<PluginLoader>(PluginLoader::default_search_path(c.plugin_path));
  out = loader.get();
  try {
    loader->load_all(registry);
  } catch (const ConfigError& e) {
    std::cerr << "embedflow: " << e.what() << "\n";
    return false;
  }
  return true;
}

void print_problems(const std::vector<Diagnostic>& problems) {
  for (const auto& d : problems) std::cerr << d.str() << "\n";
  std::cerr << problems.size() << (problems.size() == 1 ? " problem" : " problems") << " found\n";
}

// Loads, overrides and resolves a graph; prints every problem. Returns false when invalid.
bool prepare(const std::string& file, const Common& c, std::optional<std::uint64_t> seed, Registry& registry,
             ResolvedGraph& out) {
  std::vector<Diagnostic> problems;
  GraphSpec spec = load_graph_file(file, problems);
  if (seed) spec.seed = *seed;
  for (const auto& s : c.sets) apply_override(spec, s, problems);
  // Shape problems do not stop resolution, so one pass reports everything it can.
  out = resolve(std::move(spec), registry, problems);
  if (!problems.empty()) {
    print_problems(problems);
    return false;
  }
  return true;
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

// The shared preamble of commands that take a graph file: parse the options (GRAPH is the
// positional argument), then load plugins and resolve the graph. Returns an exit code to stop
// with, or -1 to go on.
int parse_graph_command(const char* command, po::options_description& desc, const std::vector<std::string>& args,
                        Common& c, std::string& graph) {
  desc.add_options()("graph", po::value(&graph), "graph file");
  add_graph_options(desc, c);
  add_common(desc, c);
  po::positional_options_description pos;
  pos.add("graph", 1);
  po::variables_map vm;
  if (int r = parse_or_usage(desc, pos, args, vm, command); r >= 0) return r;
  if (graph.empty()) {
    std::cerr << "embedflow " << command << ": no graph file given\n";
    return kExitInvalid;
  }
  configure_logging(c);
  return -1;
}

bool load_graph(const std::string& graph, const Common& c, std::optional<std::uint64_t> seed, Registry& registry,
                ResolvedGraph& out) {
  PluginLoader* loader = nullptr;
  return load_plugins(c, registry, loader) && prepare(graph, c, seed, registry, out);
}

int cmd_run(const std::vector<std::string>& args) {
  Common c;
  std::string graph, trace;
  int threads = 0;
  std::int64_t seed = -1;
  po::options_description desc("embedflow run GRAPH [options]");
  desc.add_options()("help,h", "this help")
      ("threads,j", po::value(&threads), "worker threads (default: every core)")
      ("seed", po::value(&seed), "graph seed (overrides the file's)")
      ("trace", po::value(&trace), "write Chrome trace events (Perfetto) to this file");
  if (int r = parse_graph_command("run", desc, args, c, graph); r >= 0) return r;
  if (threads < 0) {
    std::cerr << "embedflow run: --threads must be positive\n";
    return kExitInvalid;
  }
  Registry registry;
  ResolvedGraph g;
  std::optional<std::uint64_t> seed_override;
  if (seed >= 0) seed_override = static_cast<std::uint64_t>(seed);
  if (!load_graph(graph, c, seed_override, registry, g)) return kExitInvalid;

  // Stage caches are not wired into the engine yet: say so rather than ignore the request.
  for (const auto& n : g.spec.nodes)
    if ((n.cache.is_boolean() && n.cache.as_boolean()) || n.cache.is_map())
      log_warning(n.id, "cache: requested but stage caches are not implemented yet; the node runs uncached");
  std::signal(SIGINT, on_sigint);
  RunOptions options;
  options.threads = threads;
  options.trace_path = trace;
  options.stop = &g_stop;
  options.progress = !c.quiet && isatty(STDERR_FILENO);
  RunResult r = run_graph(g, options);
  std::signal(SIGINT, SIG_DFL);
  if (r.exit_code != 0 && r.exit_code != 130) {
    std::cerr << "embedflow: " << r.error << "\n";
    return r.exit_code;
  }
  if (!c.quiet)
    std::cerr << (r.exit_code == 130 ? "interrupted" : "done") << ": " << r.source_records << " source records in "
              << r.seconds << " s\n";
  if (!trace.empty() && !c.quiet) std::cerr << "trace written to " << trace << "\n";
  return r.exit_code;
}

int cmd_validate(const std::vector<std::string>& args) {
  Common c;
  std::string graph;
  po::options_description desc("embedflow validate GRAPH [options]");
  desc.add_options()("help,h", "this help");
  if (int r = parse_graph_command("validate", desc, args, c, graph); r >= 0) return r;
  Registry registry;
  ResolvedGraph g;
  if (!load_graph(graph, c, std::nullopt, registry, g)) return kExitInvalid;
  std::cout << graph << ": valid (" << g.nodes.size() << " nodes, " << g.edges.size() << " edges)\n";
  return kExitOk;
}

int cmd_inspect(const std::vector<std::string>& args) {
  Common c;
  std::string type;
  bool json = false;
  po::options_description desc("embedflow inspect [TYPE] [options]");
  desc.add_options()("help,h", "this help")("type", po::value(&type), "node or component type")
      ("json", po::bool_switch(&json), "dump every schema as JSON");
  add_common(desc, c);
  po::positional_options_description pos;
  pos.add("type", 1);
  po::variables_map vm;
  if (int r = parse_or_usage(desc, pos, args, vm, "inspect"); r >= 0) return r;
  configure_logging(c);
  Registry registry;
  PluginLoader* loader = nullptr;
  if (!load_plugins(c, registry, loader)) return kExitInvalid;
  if (json) {
    write_schema_json(std::cout, registry);
    return kExitOk;
  }
  if (type.empty()) {
    print_type_list(std::cout, registry, loader->plugins());
    return kExitOk;
  }
  if (const NodeType* t = registry.node_type(type)) {
    print_node_type(std::cout, *t);
    return kExitOk;
  }
  if (const ComponentType* t = registry.component_type(type)) {
    print_component_type(std::cout, *t);
    return kExitOk;
  }
  std::vector<std::string> names = registry.node_type_names();
  for (const auto& n : registry.component_type_names()) names.push_back(n);
  std::string hint = closest_match(type, names);
  std::cerr << "embedflow inspect: no node or component type '" << type << "'"
            << (hint.empty() ? "" : "; did you mean '" + hint + "'?") << "\n";
  return kExitInvalid;
}

int cmd_dot(const std::vector<std::string>& args) {
  Common c;
  std::string graph, output;
  po::options_description desc("embedflow dot GRAPH [options]");
  desc.add_options()("help,h", "this help")("output,o", po::value(&output), "write to this file instead of stdout");
  if (int r = parse_graph_command("dot", desc, args, c, graph); r >= 0) return r;
  Registry registry;
  ResolvedGraph g;
  if (!load_graph(graph, c, std::nullopt, registry, g)) return kExitInvalid;
  if (output.empty()) {
    write_dot(std::cout, g);
  } else {
    std::ofstream f(output);
    write_dot(f, g);
    if (!f) {
      std::cerr << "embedflow dot: cannot write " << output << "\n";
      return kExitFailure;
    }
  }
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" || std::string(argv[1]) == "help") {
    std::cout << kUsage;
    return argc < 2 ? kExitInvalid : kExitOk;
  }
  std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  try {
    if (command == "run") return cmd_run(args);
    if (command == "validate") return cmd_validate(args);
    if (command == "inspect") return cmd_inspect(args);
    if (command == "dot") return cmd_dot(args);
    if (command == "version" || command == "--version") {
      std::cout << "embedflow " << kVersion << " (ABI " << kAbiVersion << ", " << kToolchain << ")\n";
      return kExitOk;
    }
  } catch (const ConfigError& e) {
    std::cerr << "embedflow: " << e.what() << "\n";
    return kExitInvalid;
  } catch (const std::exception& e) {
    std::cerr << "embedflow: " << e.what() << "\n";
    return kExitFailure;
  }
  std::cerr << "embedflow: unknown command '" << command << "'\n\n" << kUsage;
  return kExitInvalid;
}
