// The trainer's metrics files: metrics.csv and metrics.jsonl (one JSON object per line, so a
// crashed run leaves every finished line readable) and loss.png, the loss curve. Torch-free.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <vector>

namespace embedflow::torchfam {

struct MetricRow {
  std::int64_t step = 0;        // updates done, 1-based: the row after the first update is step 1
  std::int64_t epoch = 0;
  double loss = 0;              // mean loss over the steps since the previous row
  double lr = 0;                // lr of the last update in the window
  double samples_per_s = 0;     // training samples per wall-clock second over the window
};

class MetricsLog {
 public:
  // Creates `dir` and starts the files from `history` (the rows a resumed checkpoint carries),
  // so a resumed run's files read as if it had never stopped.
  MetricsLog(std::filesystem::path dir, const std::vector<MetricRow>& history);
  void append(const MetricRow& row);
  // Draws loss against step into dir/loss.png.
  void plot(const std::vector<MetricRow>& rows) const;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  std::ofstream csv_, jsonl_;
};

// Draws loss against step (embedflow::plot's line chart): each row's loss and, past 50 rows, a
// moving average over a fiftieth of the rows.
void plot_loss_curve(const std::vector<MetricRow>& rows, const std::filesystem::path& png);

}  // namespace embedflow::torchfam
