// The live view: the progress line's ETA (progress_eta.hpp) and the summary of info lines that
// many nodes repeat while the graph opens (log_summary.hpp).
#include <catch2/catch.hpp>

#include <embedflow/embedflow.hpp>

#include "embedflow_engine/log_summary.hpp"
#include "embedflow_engine/progress_eta.hpp"

using namespace embedflow;
using namespace embedflow::engine;

TEST_CASE("the run's ETA follows the stage with a known total, never a source of unknown count") {
  // Node 0: a source emitting records, count unknown, racing ahead; node 1: a trainer at 600
  // steps; node 2: an evaluator that has not started.
  std::vector<StageProgress> stages(3);
  stages[0] = {true, 0, 5000, 0, 0.0, 10.0};
  stages[2] = {false, 0, 0, 1000, 0, 0};
  CHECK_FALSE(run_eta(stages).known());  // no stage with a known total has a rate yet

  stages[1] = {true, 0, 0, 600, 0.0, 0.0};
  CHECK_FALSE(run_eta(stages).known());  // the trainer's first report: no rate yet

  // The trainer at 60 steps after 30 s: 540 left at 2 steps/s.
  stages[1] = {true, 0, 60, 600, 0.0, 30.0};
  for (std::uint64_t records : {5000u, 50000u, 500000u}) {  // however fast the source goes
    stages[0].done = records;
    RunEta eta = run_eta(stages);
    REQUIRE(eta.known());
    CHECK(eta.stage == 1);
    CHECK(eta.seconds == Approx(270.0));
  }
  // Later, at the same rate, the ETA falls as the steps go by.
  stages[1] = {true, 0, 300, 600, 0.0, 150.0};
  CHECK(run_eta(stages).seconds == Approx(150.0));

  // A second trainer, slower: it bounds the run.
  stages.push_back({true, 10, 20, 100, 5.0, 25.0});  // 10 steps in 20 s since its first report
  RunEta eta = run_eta(stages);
  CHECK(eta.stage == 3);
  CHECK(eta.seconds == Approx(160.0));

  // Finished stages give no ETA; with none unfinished, there is none.
  stages[1].done = 600;
  stages[3].done = 100;
  CHECK_FALSE(run_eta(stages).known());

  // A stage that started over (done below its first report) has no rate until it moves on.
  CHECK(stage_eta({true, 50, 40, 100, 0.0, 10.0}) < 0);
  // Unknown total: no ETA whatever the rate.
  CHECK(stage_eta({true, 0, 1000, 0, 0.0, 10.0}) < 0);
}

TEST_CASE("an info line that many nodes log word for word is printed once, naming a few of them") {
  std::vector<LogLine> lines;
  const char* q[] = {"q_i", "q_v", "q_px", "q_h", "q_o"};
  for (const char* node : q) {
    lines.push_back(parse_log_line(LogLevel::info, std::string("[info] ") + node + ": 781 ids listed in split.csv with role query\n"));
    lines.push_back(parse_log_line(LogLevel::info, std::string("[info] g") + (node + 1) + ": 3074 ids listed in split.csv with role gallery\n"));
  }
  lines.push_back(parse_log_line(LogLevel::warning, "[warning] q_i: 781 ids listed in split.csv with role query\n"));
  lines.push_back(parse_log_line(LogLevel::info, "[info] trainable: 1008 ids listed in validation.csv\n"));
  lines.push_back(parse_log_line(LogLevel::info, "[info] valset: 1008 ids listed in validation.csv\n"));
  lines.push_back(parse_log_line(LogLevel::info, "[info] photos: 10000 rows\n"));
  lines.push_back(parse_log_line(LogLevel::info, "[info] a line without a source\n"));

  std::vector<std::string> out;
  for (const auto& l : summarise_log_lines(lines)) out.push_back(l.source + ": " + l.message);
  REQUIRE(out.size() == 6);
  CHECK(out[0] == "5 nodes (q_i, q_v, q_px, ...): 781 ids listed in split.csv with role query");
  CHECK(out[1] == "5 nodes (g_i, g_v, g_px, ...): 3074 ids listed in split.csv with role gallery");
  CHECK(out[2] == "q_i: 781 ids listed in split.csv with role query");  // a warning is never folded
  CHECK(out[3] == "trainable, valset: 1008 ids listed in validation.csv");
  CHECK(out[4] == "photos: 10000 rows");
  CHECK(out[5] == ": a line without a source");
}

TEST_CASE("lines logged inside a LogSummaryScope come out summarised, through the sink installed before") {
  std::vector<std::string> seen;
  LogSink previous = set_log_sink([&](LogLevel, std::string_view line) { seen.emplace_back(line); });
  {
    LogSummaryScope scope;
    for (int i = 0; i < 20; ++i) log_info(cat("f", i), "loaded 3 files");
    log_info("other", "cache hit");
    CHECK(seen.empty());  // held until the scope ends
  }
  log_info("after", "loaded 3 files");  // after the scope: as it comes
  set_log_sink(std::move(previous));
  REQUIRE(seen.size() == 3);
  CHECK(seen[0] == "[info] 20 nodes (f0, f1, f2, ...): loaded 3 files\n");
  CHECK(seen[1] == "[info] other: cache hit\n");
  CHECK(seen[2] == "[info] after: loaded 3 files\n");
}
