// The small simulated crowd the CEN and CSN tests train on: gen_crowd's shapes with 600 images,
// 40 workers and 240 grids (seed 4), generated once per test process; and the losses torch.train
// logs.
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli.hpp"

// The loss column of torch.train's metrics.csv (header: step,epoch,loss,lr,samples_per_s).
inline std::vector<double> losses(const std::filesystem::path& csv) {
  std::ifstream in(csv);
  std::string line;
  std::getline(in, line);
  std::vector<double> out;
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    std::string f;
    for (int i = 0; i < 3; ++i) std::getline(ss, f, ',');
    out.push_back(std::stod(f));
  }
  return out;
}

#ifdef GEN_CROWD
inline const std::filesystem::path& tiny_crowd() {
  static std::filesystem::path dir;
  if (dir.empty()) {
    dir = embedflow::test::scratch_dir("cen_crowd_data");
    const embedflow::test::Result r = embedflow::test::run_process(
        {GEN_CROWD, "--out", dir.string(), "--images", "600", "--workers", "40", "--grids", "240", "--seed", "4", "--no-png"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
  }
  return dir;
}
#endif
