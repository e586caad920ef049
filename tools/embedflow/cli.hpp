// What the commands of the `embedflow` executable share: the exit codes, the stop signals, the
// options every command takes, loading the plugins and preparing a graph, and parsing a
// command's options. Each command is in a cmd_*.cpp of its own; main.cpp dispatches.
#pragma once

#include <boost/program_options.hpp>

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "embedflow/error.hpp"
#include "embedflow/registry.hpp"
#include "embedflow_engine/graph.hpp"
#include "embedflow_runs/plugins.hpp"

namespace embedflow::cli {

namespace po = boost::program_options;

constexpr int kExitOk = 0, kExitFailure = 1, kExitInvalid = 2;

extern std::atomic<bool> g_stop;
extern std::vector<std::string> g_command;  // argv, for the run record
extern std::atomic<int> g_signal;

// The first Ctrl-C (SIGINT) or SIGTERM (kill, a job scheduler's stop) drains the graph, closes
// outputs and removes temporaries; a second one gets the default behaviour (terminate).
void on_stop_signal(int sig);

struct Common {
  std::vector<std::string> plugin_path;
  std::vector<std::string> sets;
  bool quiet = false;
  bool verbose = false;
};

void add_common(po::options_description& d, Common& c);
void add_graph_options(po::options_description& d, Common& c);
void configure_logging(const Common& c);

// `plugin_dirs:` of a graph, relative to the graph file's folder, checked to exist; appended to
// `dirs`. False after printing the problem.
bool spec_plugin_dirs(const engine::GraphSpec& spec, const std::string& graph, std::vector<std::string>& dirs);
bool graph_plugin_dirs(const std::string& graph, std::vector<std::string>& dirs);

// The plugins this process loaded last (for --from's version check and the run record), or null.
extern const runs::LoadedPlugins* g_plugins;

// What names the types a run needs: the graph's text and the --set values.
std::string types_text(const std::string& graph_text, const Common& c);
// A file's bytes; "" when it cannot be read (then every plugin loads, and the parse reports the file).
std::string graph_file_text(const std::string& graph);

// The process's plugins (runs::loaded_plugins: the libraries stay resident until exit), or null
// after printing why they could not be loaded. `graph_text`: load only the plugins the graph's
// text names (runs::load_plugins_for); empty: every plugin.
const runs::LoadedPlugins* load_cli_plugins(const Common& c, const std::vector<std::string>& extra_dirs = {},
                                            const std::string& graph_text = "");

// Overrides and resolves a parsed graph; prints every problem. Returns false when invalid.
bool prepare_spec(engine::GraphSpec spec, std::vector<Diagnostic> problems, const Common& c,
                  std::optional<std::uint64_t> seed, const Registry& registry, engine::ResolvedGraph& out);
// Loads the plugins a graph file needs and prepares it, printing what stops it.
bool load_graph(const std::string& graph, const Common& c, std::optional<std::uint64_t> seed,
                engine::ResolvedGraph& out);

// Whether `args` give `flag` (as "--flag" or "--flag=value").
bool args_has(const std::vector<std::string>& args, const std::string& flag);

// Parses a command's options. Returns an exit code to stop with (usage errors, --help), or -1.
int parse_or_usage(po::options_description& desc, po::positional_options_description& pos,
                   const std::vector<std::string>& args, po::variables_map& vm, const char* command);

// The shared preamble of commands that take a graph file: parse the options (GRAPH is the
// positional argument), then load plugins and resolve the graph. Returns an exit code to stop
// with, or -1 to go on.
int parse_graph_command(const char* command, po::options_description& desc, const std::vector<std::string>& args,
                        Common& c, std::string& graph, const std::string* instead_of_graph = nullptr);

int cmd_run(const std::vector<std::string>& args);
int cmd_validate(const std::vector<std::string>& args);
int cmd_inspect(const std::vector<std::string>& args);
int cmd_dot(const std::vector<std::string>& args);
int cmd_cache(const std::vector<std::string>& args);
int cmd_report(const std::vector<std::string>& args);
int cmd_sweep(const std::vector<std::string>& args);
int cmd_export(const std::vector<std::string>& args);

}  // namespace embedflow::cli
