// The progress line on a terminal: the live view (embedflow_engine/live_view.hpp) that
// `embedflow run` shows below the log while a graph runs.
//
//   12s ETA 2m10s (train) | bound by train (97% busy): 45/600 steps 7% loss 0.213 lr 0.001 | 23040 records 1920/s
//
// The ETA is the bounding stage's, in progress_eta.hpp's sense: of the nodes reporting a known
// total (a trainer's steps, an evaluator's queries), the one whose own ETA is largest; with none,
// the line has no ETA. Source records are counted and rated but never give an ETA: a source's
// count is often unknown, and a trainer ends at its step count whatever waits upstream.
// "Bound by" names the node busiest over the last seconds, its busy time divided by the threads
// it can use (1 for a serial node, every worker for a parallel one): a stage that is busy all the
// time holds up everything before it (sources park at their in-flight cap) and starves
// everything after it. The two may differ (a decoder may be busiest while a trainer's steps are
// what the run waits for).
#pragma once

#include <memory>

#include "embedflow_engine/live_view.hpp"

namespace embedflow::runs {

// Draws the line every half second (progress.hpp: set_status_line) until destroyed, then clears
// it. For RunOptions::live_view.
std::unique_ptr<engine::LiveView> progress_line(const engine::RunningGraph& run);

}  // namespace embedflow::runs
