// The run's ETA on the progress line, from the stages' own progress reports (progress.hpp).
//
// A source's record count says nothing about when a run ends: a source may not know it (a
// folder still being listed, core.epochs passing over a set again and again) and a trainer
// stops at its step count or earlier, however many records wait upstream. So the ETA is taken
// only from nodes that report a known total (a trainer's steps, an evaluator's queries):
//
//   a stage's own ETA = (total - done) / its rate, the rate being the units done from its first
//   report to its latest over the time between them;
//   the bounding stage = the unfinished stage with a known total whose own ETA is largest: every
//   other such stage ends before it, so the run cannot end sooner.
//
// A node that has ended counts no more (a trainer that stopped early stays short of its total):
// the progress line passes it as not reporting. A stage with a known total but no rate yet (one
// report, or no progress since its first) gives no ETA; when no stage has both, the line shows
// no ETA rather than a guess. Stages that have not reported at all (an evaluator waiting for its
// trainer) are not counted, so the ETA is the time to the end of the work under way: a run whose
// later stages start after it may take longer, and a trainer that stops early ends sooner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace embedflow::engine {

struct StageProgress {
  bool reported = false;
  std::uint64_t first_done = 0, done = 0, total = 0;  // total 0: unknown
  double first_s = 0, latest_s = 0;                    // when the first and latest reports came
};

struct RunEta {
  static constexpr std::size_t none = std::numeric_limits<std::size_t>::max();
  std::size_t stage = none;  // index of the bounding stage; none: no ETA
  double seconds = 0;
  bool known() const { return stage != none; }
};

// A stage's own ETA in seconds; negative when it has none (no known total, finished, no rate).
inline double stage_eta(const StageProgress& p) {
  if (!p.reported || p.total == 0 || p.done >= p.total || p.done <= p.first_done) return -1;
  const double span = p.latest_s - p.first_s;
  if (!(span > 0)) return -1;
  return static_cast<double>(p.total - p.done) * span / static_cast<double>(p.done - p.first_done);
}

inline RunEta run_eta(const std::vector<StageProgress>& stages) {
  RunEta eta;
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const double s = stage_eta(stages[i]);
    if (s >= 0 && (!eta.known() || s > eta.seconds)) {
      eta.stage = i;
      eta.seconds = s;
    }
  }
  return eta;
}

}  // namespace embedflow::engine
