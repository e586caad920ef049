#include <csignal>
#include <filesystem>
#include <iostream>

#include "cli.hpp"
#include "embedflow_engine/graph_file.hpp"
#include "embedflow_engine/runtime.hpp"

namespace embedflow::cli {
using namespace engine;
using namespace runs;
namespace fs = std::filesystem;

namespace {

// A YAML double-quoted scalar.
std::string yaml_quoted(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += std::string("\\") + ch;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

}  // namespace

// `embedflow export`: the torch plugin's torch.export node as a one-node graph, resolved and run
// as `run` does (without a run record), so the CLI needs no LibTorch of its own.
int cmd_export(const std::vector<std::string>& args) {
  Common c;
  std::string checkpoint, output, input_size, mean, std_dev;
  int threads = 0;
  po::options_description desc(
      "embedflow export CHECKPOINT -o OUT.pt [options]\n"
      "Writes a torch.train checkpoint's model (a step-*.pt file, or a checkpoint folder: its newest)\n"
      "as a TorchScript module: forward(images f32[N,C,H,W] in [0,1]) gives the embeddings torch.embed\n"
      "computes; input size, channel order, mean/std and embedding_dim are in the file (docs/torch.md)");
  desc.add_options()("help,h", "this help")
      ("checkpoint", po::value(&checkpoint), "the checkpoint")
      ("output,o", po::value(&output), "the TorchScript file to write")
      ("input-size", po::value(&input_size), "C,H,W of the images, for checkpoints that do not record it")
      ("mean", po::value(&mean), "per-channel mean the module subtracts first, e.g. 0.485,0.456,0.406 (with --std)")
      ("std", po::value(&std_dev), "per-channel std the module divides by (with --mean)")
      ("threads", po::value(&threads)->default_value(0), "LibTorch threads (0: every core)");
  add_common(desc, c);
  po::positional_options_description pos;
  pos.add("checkpoint", 1);
  po::variables_map vm;
  if (int r = parse_or_usage(desc, pos, args, vm, "export"); r >= 0) return r;
  if (checkpoint.empty() || output.empty()) {
    std::cerr << "embedflow export: give a checkpoint and -o OUT.pt\n\n" << desc << "\n";
    return kExitInvalid;
  }
  if (threads < 0) {
    std::cerr << "embedflow export: --threads must be non-negative\n";
    return kExitInvalid;
  }
  configure_logging(c);
  for (const std::string* path : {&checkpoint, &output})
    if (path->find("${") != std::string::npos) {
      std::cerr << "embedflow export: '" << *path << "': a path with ${ would be read as a graph variable\n";
      return kExitInvalid;
    }
  // Lists given as "a,b,c" become YAML flow lists; the node's schema checks the numbers.
  auto flow_list = [](const std::string& s) { return "[" + s + "]"; };
  std::string params = "checkpoint: " + yaml_quoted(fs::absolute(checkpoint).string()) +
                       ", out: " + yaml_quoted(fs::absolute(output).string());
  for (const auto& [name, value] : {std::pair<const char*, const std::string*>{"input_size", &input_size},
                                    {"mean", &mean}, {"std", &std_dev}}) {
    if (value->empty()) continue;
    if (value->find_first_not_of("0123456789.eE+-, ") != std::string::npos) {
      std::cerr << "embedflow export: --" << (std::string(name) == "input_size" ? "input-size" : name)
                << " takes numbers separated by commas, got '" << *value << "'\n";
      return kExitInvalid;
    }
    params += cat(", ", name, ": ", flow_list(*value));
  }
  const std::string text = "seed: 1\nnodes:\n  export: {type: torch.export, params: {" + params + "}}\nedges: []\n";
  const LoadedPlugins* plugins = load_cli_plugins(c);
  if (!plugins) return kExitInvalid;
  const Registry& registry = plugins->registry;
  if (!registry.node_type("torch.export")) {
    std::cerr << "embedflow export: the torch plugin (torch.export) is not loaded; built with EMBEDFLOW_WITH_TORCH=OFF, "
                 "or give --plugin-path\n";
    return kExitInvalid;
  }
  std::vector<Diagnostic> problems;
  GraphSpec spec = parse_graph_text(text, "<embedflow export>", problems);
  ResolvedGraph g;
  Common no_sets = c;
  no_sets.sets.clear();
  if (!prepare_spec(std::move(spec), std::move(problems), no_sets, std::nullopt, registry, g)) return kExitInvalid;
  RunOptions options;
  options.threads = threads;
  options.stop = &g_stop;
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  RunResult r = run_graph(g, options);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  if (r.exit_code != 0) {
    if (!r.error.empty()) std::cerr << "embedflow export: " << r.error << "\n";
    return r.exit_code;
  }
  if (!c.quiet) std::cerr << "wrote " << output << "\n";
  return kExitOk;
}

}  // namespace embedflow::cli
