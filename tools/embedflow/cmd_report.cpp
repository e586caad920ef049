// `embedflow report`: one offline HTML page about one or more runs (embedflow_runs/report.hpp).
#include <filesystem>
#include <iostream>

#include "cli.hpp"
#include "embedflow_runs/report.hpp"

namespace embedflow::cli {
using namespace engine;
using namespace runs;
namespace fs = std::filesystem;

int cmd_report(const std::vector<std::string>& args) {
  std::vector<std::string> runs;
  std::string output;
  bool share = false;
  po::options_description desc("embedflow report OUT [OUT2 ...] [options]");
  desc.add_options()("help,h", "this help")
      ("output,o", po::value(&output), "the HTML file (default: OUT/report.html for one run, report.html for several)")
      ("share", po::bool_switch(&share), "for sharing: leave the host name and absolute paths out (folders become "
                                         "<run folder>, <working directory>, ~; other absolute paths their file name)")
      ("run", po::value(&runs)->composing(), "run output folders (each holds a run.json)");
  po::positional_options_description pos;
  pos.add("run", -1);
  po::variables_map vm;
  if (int r = parse_or_usage(desc, pos, args, vm, "report"); r >= 0) return r;
  if (runs.empty()) {
    std::cerr << "embedflow report: name a run's output folder (it holds run.json)\n";
    return kExitInvalid;
  }
  ReportOptions o;
  for (const auto& r : runs) o.runs.push_back(r);
  o.output = !output.empty() ? fs::path(output) : runs.size() == 1 ? fs::path(runs[0]) / "report.html" : fs::path("report.html");
  o.assets = find_report_assets();
  o.share = share;
  try {
    write_report(o);
  } catch (const ConfigError& e) {
    std::cerr << "embedflow report: " << e.what() << "\n";
    return kExitInvalid;
  } catch (const std::exception& e) {
    std::cerr << "embedflow report: " << e.what() << "\n";
    return kExitFailure;
  }
  std::cout << o.output.string() << "\n";
  return kExitOk;
}

}  // namespace embedflow::cli
