// embedflow: run, validate, inspect and draw dataflow graphs.
//
//   embedflow run G.yaml [--set node.param=value]... [--threads N] [--seed N] [--trace t.json] [--out DIR]
//   embedflow run --from OUT/run.json  the recorded run again (its resolved graph, seed, threads)
//   embedflow validate G.yaml          every problem at once, as FILE:LINE:COL: node 'x': ...
//   embedflow inspect [TYPE] [--json]  node and component types, like gst-inspect
//   embedflow dot G.yaml [-o g.dot]    Graphviz drawing with port schemas
//   embedflow cache ls|info|rm|gc      stage cache entries
//   embedflow report OUT [OUT2 ...]    one self-contained HTML page about runs, comparing several
//   embedflow sweep G.yaml --grid VAR=a,b [--seeds N] [--jobs J]   runs over a grid and seeds
//   embedflow export CHECKPOINT -o OUT.pt   a torch.train checkpoint as a TorchScript module
//
// Exit codes: 0 done, 1 runtime failure, 2 invalid usage or graph, 130 interrupted (SIGINT), 143 terminated (SIGTERM).
#include <iostream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "embedflow/version.hpp"

using namespace embedflow;
using namespace embedflow::cli;

namespace {

const char* kUsage =
    "usage: embedflow <command> [options]\n\n"
    "commands:\n"
    "  run GRAPH        run a graph file\n"
    "  validate GRAPH   check a graph file and list every problem\n"
    "  inspect [TYPE]   list node and component types, or describe one\n"
    "  dot GRAPH        print the resolved graph as Graphviz\n"
    "  cache ls|info|rm|gc   list, describe and remove stage cache entries\n"
    "  report OUT [OUT2...]  one offline HTML page about runs (run record, graph, metrics, charts,\n"
    "                   images), comparing them when several are named\n"
    "  sweep GRAPH      run a graph over a grid of variables and seeds, sharing stage caches;\n"
    "                   compare the points with intervals and paired tests\n"
    "  export CHECKPOINT -o OUT.pt   write a torch.train checkpoint's model as a TorchScript\n"
    "                   module (the torch plugin's torch.export node, run as a one-node graph)\n"
    "  version          print versions\n\n"
    "Run 'embedflow <command> --help' for its options.\n";

}  // namespace

int main(int argc, char** argv) {
  g_command.assign(argv, argv + argc);
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
    if (command == "cache") return cmd_cache(args);
    if (command == "report") return cmd_report(args);
    if (command == "sweep") return cmd_sweep(args);
    if (command == "export") return cmd_export(args);
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
