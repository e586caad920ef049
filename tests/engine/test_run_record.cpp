// The run record and the live view through the CLI: run.json's fields against independent
// oracles (Python's hashlib for the graph's SHA-256, the graph's known record counts), the
// resolved graph as a runnable graph file, `run --from` (the same output; a warning naming what
// changed in the graph file; its error paths), metrics.jsonl written from node progress reports,
// the run id in every JSON a node writes, and the progress line with log lines above it.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <set>

#include "cli.hpp"
#include "embedflow/progress.hpp"
#include "embedflow/report_files.hpp"
#include "embedflow_runs/session.hpp"

using namespace embedflow::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json read_json(const fs::path& p) {
  std::ifstream in(p);
  REQUIRE(in);
  return json::parse(in);
}

const char* kGraph = R"(# Counts to ten, scales, batches by four and prints.
seed: 7
vars: {scale: 2.0, out: out/counting}
nodes:
  numbers: {type: core.range, params: {count: 10, start: 1.0, step: 0.5}}
  scaled:  {type: core.map_affine, params: {field: value, scale: "${scale}", offset: 1.0, jitter: 0.01}}
  batches: {type: core.batch, params: {size: 4}}
  show:    {type: core.sink, params: {mode: print}}
edges:
  - numbers.out -> scaled.in
  - scaled.out -> batches.in
  - batches.out -> show.in
)";

const char* kSha256 = R"PY(
import hashlib, sys
print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())
)PY";

}  // namespace

TEST_CASE("run writes run.json and a resolved graph that reruns to the same output", "[run_record]") {
  const fs::path dir = scratch_dir("run_record");
  write_file(dir / "g.yaml", kGraph);
  const Result r = run_with_testing_plugin(dir, {"run", "g.yaml", "--set", "scale=3.0", "--set", "batches.size=5", "--no-report"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const fs::path out = dir / "out/counting";  // the graph's variable `out`
  REQUIRE(fs::exists(out / "run.json"));
  CHECK_FALSE(fs::exists(out / "report.html"));  // --no-report
  const json rec = read_json(out / "run.json");
  CHECK(rec["format"] == "embedflow-run/1");
  CHECK(rec["status"] == "done");
  CHECK(rec["exit_code"] == 0);
  CHECK(rec["run_id"].get<std::string>().size() > 16);
  CHECK(rec["graph"]["path"] == "g.yaml");
  const Result sha = run_python(kSha256, {(dir / "g.yaml").string()});
  REQUIRE(sha.exit_code == 0);
  CHECK(rec["graph"]["sha256"].get<std::string>() + "\n" == sha.out);
  CHECK(rec["overrides"] == json::array({"scale=3.0", "batches.size=5"}));
  CHECK(rec["seed"] == 7);
  CHECK(rec["command"].back() == "--no-report");
  CHECK(rec["cwd"] == fs::canonical(dir).string());
  CHECK(rec["host"]["cores"].get<int>() >= 1);
  CHECK(rec["host"]["memory_bytes"].get<std::uint64_t>() > 0);
  CHECK(rec["versions"]["embedflow"].is_string());
  CHECK(rec["versions"]["plugins"].size() >= 1);
  CHECK(rec["versions"]["loaded_libraries"].contains("onetbb"));
  CHECK(rec["start"].get<std::string>() <= rec["end"].get<std::string>());
  // 10 numbers -> 10 scaled -> batches of 5: 2 -> printed.
  std::map<std::string, std::pair<int, int>> expected{{"numbers", {0, 10}}, {"scaled", {10, 10}}, {"batches", {10, 2}},
                                                      {"show", {2, 0}}};
  REQUIRE(rec["nodes"].size() == 4);
  for (const auto& n : rec["nodes"]) {
    INFO(n.dump());
    const auto& e = expected.at(n["id"].get<std::string>());
    CHECK(n["records_in"] == e.first);
    CHECK(n["records_out"] == e.second);
    CHECK(n["mode"] == "run");
    CHECK(n["cache"].is_null());
    CHECK(n["wall_s"].get<double>() >= 0);
    CHECK(n["cpu_s"].get<double>() >= 0);
  }
  // The resolved graph is a graph file: variables and overrides applied, it prints the same.
  const std::string resolved = read_file(out / "graph.resolved.yaml");
  CHECK(resolved.find("scale: 3.0") != std::string::npos);
  CHECK(resolved.find("size: 5") != std::string::npos);
  CHECK(resolved.find("${") == std::string::npos);
  CHECK(rec["graph"]["resolved_yaml"] == resolved);
  const Result again = run_with_testing_plugin(dir, {"run", "out/counting/graph.resolved.yaml", "--out", "out/again", "--no-report"});
  INFO(again.err);
  REQUIRE(again.exit_code == 0);
  CHECK(again.out == r.out);
  CHECK(read_json(dir / "out/again/run.json")["graph"]["path"] == "out/counting/graph.resolved.yaml");
}

TEST_CASE("a run loads the plugin families its graph names, and every plugin when it names a type they lack",
          "[run_record]") {
  const fs::path dir = scratch_dir("run_plugins");
  write_file(dir / "g.yaml", kGraph);
  auto replaced = [](std::string from, const std::string& what) {
    const std::string sink = "{type: core.sink, params: {mode: print}}";
    return from.replace(from.find(sink), sink.size(), what);
  };
  write_file(dir / "progress.yaml", replaced(kGraph, "{type: testing.progress}"));
  write_file(dir / "typo.yaml", replaced(kGraph, "{type: core.snk, params: {mode: print}}"));
  auto plugins_of = [&](const std::string& graph) {
    const Result r = run_with_testing_plugin(dir, {"run", graph, "--no-report", "--quiet"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    std::set<std::string> names;
    const json rec = read_json(dir / "out/counting/run.json");  // kept: the loop walks into it
    for (const auto& p : rec["versions"]["plugins"]) names.insert(p["name"].get<std::string>());
    return names;
  };
  // Only core types: only the core plugin (no LibTorch to load).
  CHECK(plugins_of("g.yaml") == std::set<std::string>{"core"});
  CHECK(plugins_of("progress.yaml") == std::set<std::string>{"core", "testing"});
  // A type no named family has (here a misspelt one) loads every plugin, so validation can name
  // the closest type wherever it lives.
  const Result typo = run_with_testing_plugin(dir, {"run", "typo.yaml", "--no-report"});
  CHECK(typo.exit_code == 2);
  CHECK_THAT(typo.err, Catch::Contains("core.snk") && Catch::Contains("core.sink"));
  CHECK(embedflow::runs::named_types("a: {type: geo.photo_folder}\nb: {type: 'torch.resnet18'}\nx.type=eval.report\n"
                                       "c: {\"type\": \"io.hdf5_reader\"}") ==
        std::set<std::string>{"eval.report", "geo.photo_folder", "io.hdf5_reader", "torch.resnet18"});
  // A component chosen by a variable: the text cannot tell its family, so every plugin loads.
  std::string by_variable = replaced(kGraph, "{type: core.aggregate, params: {op: {type: \"${reduce}\"}}}");
  by_variable.replace(by_variable.find("vars: {"), 7, "vars: {reduce: core.mean, ");
  write_file(dir / "variable.yaml", by_variable);
  CHECK(plugins_of("variable.yaml").size() > 2);
}

TEST_CASE("--out moves the record and the graph's outputs; run --from reruns the recorded graph", "[run_record]") {
  const fs::path dir = scratch_dir("run_from");
  write_file(dir / "g.yaml", kGraph);
  const Result first = run_with_testing_plugin(dir, {"run", "g.yaml", "--out", "out/first", "--seed", "11", "--threads", "1", "--no-report"});
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  const json rec = read_json(dir / "out/first/run.json");
  CHECK(rec["graph"]["vars"]["out"] == "out/first");  // --out sets the variable out
  CHECK(rec["seed"] == 11);
  CHECK(rec["seed_from_command_line"] == true);
  CHECK(rec["threads"] == 1);

  SECTION("unchanged graph: same output, no warning, the record names the run it repeats") {
    const Result r = run_with_testing_plugin(dir, {"run", "--from", "out/first/run.json", "--no-report"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out == first.out);
    CHECK(r.err.find("warning") == std::string::npos);
    const json again = read_json(dir / "out/first/run.json");
    CHECK(again["rerun_of"] == "out/first/run.json");
    CHECK(again["run_id"] != rec["run_id"]);
    CHECK(again["seed"] == 11);
    CHECK(again["threads"] == 1);
  }
  SECTION("from another working directory: the recorded one is used") {
    fs::create_directories(dir / "elsewhere");
    const Result r = run_with_testing_plugin(dir / "elsewhere", {"run", "--from", "../out/first/run.json", "--no-report"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.out == first.out);
  }
  SECTION("changed graph file: a warning naming each difference, and the recorded graph runs") {
    std::string edited = kGraph;
    edited.replace(edited.find("offset: 1.0"), 11, "offset: 4.0");
    edited.replace(edited.find("size: 4"), 7, "size: 3");
    write_file(dir / "g.yaml", edited);
    const Result r = run_with_testing_plugin(dir, {"run", "--from", "out/first/run.json", "--no-report"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.err.find("[warning] run: g.yaml has changed since run " + rec["run_id"].get<std::string>()) != std::string::npos);
    CHECK(r.err.find("node 'scaled' param 'offset': 1.0 -> 4.0") != std::string::npos);
    CHECK(r.err.find("node 'batches' param 'size': 4 -> 3") != std::string::npos);
    CHECK(r.out == first.out);  // the recorded graph ran, not the edited file
    // The rerun's record keeps the recorded file's hash: the graph it ran is the recorded one.
    CHECK(read_json(dir / "out/first/run.json")["graph"]["sha256"] == rec["graph"]["sha256"]);
  }
  SECTION("error paths exit 2 and name the file") {
    Result r = run_with_testing_plugin(dir, {"run", "--from", "out/missing/run.json"});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("out/missing/run.json: cannot read the run record") != std::string::npos);
    write_file(dir / "not_a_record.json", "{\"hello\": 1}\n");
    r = run_with_testing_plugin(dir, {"run", "--from", "not_a_record.json"});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("not_a_record.json: not a run record") != std::string::npos);
    write_file(dir / "broken.json", "{\"format\": ");
    r = run_with_testing_plugin(dir, {"run", "--from", "broken.json"});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("broken.json: not a run record") != std::string::npos);
    r = run_with_testing_plugin(dir, {"run", "g.yaml", "--from", "out/first/run.json"});
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--from runs the recorded graph as it was") != std::string::npos);
    r = run_with_testing_plugin(dir, {"run", "--from", "out/first/run.json", "--set", "scale=9"});
    CHECK(r.exit_code == 2);
  }
}

TEST_CASE("a failing run leaves a record saying so, and keeps its start record's fields", "[run_record]") {
  const fs::path dir = scratch_dir("run_fail");
  write_file(dir / "fail.yaml",
             numbers_through("seed: 1\nout: out/fail\n", 10, "boom", "{type: testing.explode, params: {at: 3}}"));
  const Result r = run_with_testing_plugin(dir, {"run", "fail.yaml", "--no-report"});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("run record: out/fail/run.json") != std::string::npos);
  const json rec = read_json(dir / "out/fail/run.json");
  CHECK(rec["status"] == "failed");
  CHECK(rec["exit_code"] == 1);
  CHECK(rec["error"].get<std::string>().find("node 'boom'") != std::string::npos);
  CHECK(rec["graph"]["path"] == "fail.yaml");
  // The output folder is the graph's out:, and an unwritable one is a clear error.
  write_file(dir / "blocked", "a file, not a folder");
  const Result blocked = run_with_testing_plugin(dir, {"run", "fail.yaml", "--out", "blocked/sub"});
  CHECK(blocked.exit_code == 1);
  CHECK(blocked.err.find("cannot create the output folder 'blocked/sub'") != std::string::npos);
}

TEST_CASE("progress reports stream to metrics.jsonl and run.json; node JSON carries the run id", "[run_record]") {
  const fs::path dir = scratch_dir("run_progress");
  write_file(dir / "p.yaml",
             numbers_through("seed: 1\nout: out/progress\n", 40, "train",
                             "{type: testing.progress, params: {total: 40, delay_us: 30000, log_every: 10, "
                             "json: out/progress/train/summary.json}}"));
  const Result r = run_with_testing_plugin(dir, {"run", "p.yaml", "--progress", "--no-report", "--threads", "2"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json rec = read_json(dir / "out/progress/run.json");
  const std::string run_id = rec["run_id"];
  // metrics.jsonl: one line per report, in order, each with the run id, step and metrics.
  std::ifstream lines(dir / "out/progress/metrics.jsonl");
  std::vector<json> metrics;
  for (std::string line; std::getline(lines, line);) metrics.push_back(json::parse(line));
  REQUIRE(metrics.size() == 40);
  for (std::size_t i = 0; i < metrics.size(); ++i) {
    CHECK(metrics[i]["run_id"] == run_id);
    CHECK(metrics[i]["node"] == "train");
    CHECK(metrics[i]["done"] == i + 1);
    CHECK(metrics[i]["total"] == 40);
    CHECK(metrics[i]["unit"] == "steps");
    CHECK(metrics[i]["loss"].get<double>() == 1.0 / static_cast<double>(i + 1));
    CHECK(metrics[i]["lr"].get<double>() == std::pow(0.5, static_cast<double>(i + 1)));
  }
  // run.json keeps each node's last report; the trainer was busy for at least its sleeps.
  for (const auto& n : rec["nodes"]) {
    if (n["id"] != "train") continue;
    CHECK(n["progress"]["done"] == 40);
    CHECK(n["progress"]["total"] == 40);
    CHECK(n["progress"]["metrics"]["loss"].get<double>() == 1.0 / 40);
    CHECK(n["wall_s"].get<double>() >= 40 * 0.03);
    CHECK(n["cpu_s"].get<double>() < n["wall_s"].get<double>() / 2);  // sleeping is not CPU
  }
  // A JSON file the node wrote through JsonWriter names the run.
  const json summary = read_json(dir / "out/progress/train/summary.json");
  CHECK(summary["run_id"] == run_id);
  CHECK(summary["records"] == 40);
  // The progress line names the bounding stage and its progress; log lines print whole, each
  // on its own line after the progress line is cleared.
  CHECK(r.err.find("bound by train") != std::string::npos);
  CHECK(r.err.find("/40 steps") != std::string::npos);
  CHECK(r.err.find("loss ") != std::string::npos);
  CHECK(r.err.find(" ETA ") != std::string::npos);  // from the trainer's steps, the one known total
  CHECK(r.err.find(" (train) | bound by") != std::string::npos);
  for (int step : {10, 20, 30, 40}) {
    const std::string line = "[info] train: step " + std::to_string(step) + "\n";
    const auto at = r.err.find(line);
    REQUIRE(at != std::string::npos);
    // Either the start of the output, a newline, or the clear sequence precedes it.
    CHECK((at == 0 || r.err[at - 1] == '\n' || r.err.compare(at - 4, 4, "\r\033[K") == 0));
  }
  // Without --progress (not a terminal) no progress line is drawn.
  const Result quiet = run_with_testing_plugin(dir, {"run", "p.yaml", "--no-report", "--set", "train.delay_us=0"});
  REQUIRE(quiet.exit_code == 0);
  CHECK(quiet.err.find("bound by") == std::string::npos);
  CHECK(quiet.err.find("\033[K") == std::string::npos);
}

TEST_CASE("JsonWriter: the run id opens every top-level object; numbers are shortest round-trip", "[run_record]") {
  embedflow::set_run_id("");
  embedflow::JsonWriter plain;
  plain.begin_object().field("x", 0.1).key("curve").numbers({0.1, 1.0 / 3, 2.0}).end_object();
  CHECK(plain.str().find("run_id") == std::string::npos);
  CHECK(json::parse(plain.str())["x"].get<double>() == 0.1);
  CHECK(plain.str().find("0.1,") != std::string::npos);       // not 0.10000000000000001
  CHECK(plain.str().find("0.3333333333333333") != std::string::npos);  // full precision
  CHECK(json::parse(plain.str())["curve"][1].get<double>() == 1.0 / 3);

  embedflow::set_run_id("20260101T000000Z-abcdef");
  embedflow::JsonWriter j;
  j.begin_object().field("a", 1).key("inner").begin_object().field("b", 2).end_object().end_object();
  embedflow::set_run_id("");
  const nlohmann::ordered_json doc = nlohmann::ordered_json::parse(j.str());
  CHECK(doc.begin().key() == "run_id");
  CHECK(doc["run_id"] == "20260101T000000Z-abcdef");
  CHECK_FALSE(doc["inner"].contains("run_id"));
  CHECK(embedflow::make_run_id().size() == std::string("20260101T000000Z-abcdef").size());
}

TEST_CASE("a run that cannot write its record fails naming the file, keeps the earlier record, leaves no temporary",
          "[run_record]") {
  const fs::path dir = scratch_dir("run_record_full");
  // 200 sources and sinks make graph.resolved.yaml and run.json far larger than the size limit below.
  std::string nodes, edges;
  for (int i = 0; i < 200; ++i) {
    const std::string n = std::to_string(i);
    nodes += "  numbers_" + n + ": {type: core.range, params: {count: 2}}\n  show_" + n + ": {type: core.sink}\n";
    edges += "  - numbers_" + n + ".out -> show_" + n + ".in\n";
  }
  write_file(dir / "g.yaml", "seed: 1\nout: out/full\nnodes:\n" + nodes + "edges:\n" + edges);
  const Result first = run_with_testing_plugin(dir, {"run", "g.yaml", "--quiet", "--no-report"});
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  const std::string graph_before = read_file(dir / "out/full/graph.resolved.yaml");
  const std::string record_before = read_file(dir / "out/full/run.json");
  REQUIRE(graph_before.size() > 20000);
  // The disk fills up: no file may grow beyond 2 KiB (RLIMIT_FSIZE; SIGXFSZ ignored, so a write
  // past the limit fails with EFBIG as a full disk's does with ENOSPC). stderr is a file too, so
  // the message must stay short.
  const std::string cmd = "cd '" + dir.string() + "' && ulimit -f 4 && trap '' XFSZ && exec '" EMBEDFLOW_CLI
                          "' run g.yaml --quiet --no-report";
  const Result full = run_process({"/bin/bash", "-c", cmd}, {"EMBEDFLOW_PLUGIN_PATH=" + plugin_dir()});
  INFO(full.err);
  CHECK(full.exit_code == 1);
  CHECK_THAT(full.err, Catch::Contains("out/full/graph.resolved.yaml") && Catch::Contains("failed"));
  // Nothing already written is lost, and no temporary is left behind.
  CHECK(read_file(dir / "out/full/graph.resolved.yaml") == graph_before);
  CHECK(read_file(dir / "out/full/run.json") == record_before);
  for (const auto& e : fs::directory_iterator(dir / "out/full"))
    CHECK(e.path().filename().string().find(".tmp") == std::string::npos);
}

TEST_CASE("a failed run's record says failed with its message when the message holds bytes that are not UTF-8",
          "[run_record]") {
  const fs::path dir = scratch_dir("run_fail_bytes");
  // A file name holding the byte 0xff, which the node's error message quotes. A graph file is
  // UTF-8 text, so the name comes from the command line.
  write_file(dir / "g.yaml", "seed: 1\nout: out/bytes\nvars: {name: placeholder.txt}\nnodes:\n"
                             "  lines: {type: testing.lines, params: {path: \"${name}\"}}\n"
                             "  show: {type: core.sink, params: {mode: count}}\n"
                             "edges: [lines -> show]\n");
  const Result r = run_with_testing_plugin(dir, {"run", "g.yaml", "--no-report", "--set", "name=missing-\xff.txt"});
  INFO(r.err);
  CHECK(r.exit_code == 1);
  const json rec = read_json(dir / "out/bytes/run.json");
  CHECK(rec["status"] == "failed");
  CHECK(rec["exit_code"] == 1);
  const std::string error = rec.value("error", "");
  INFO(error);
  // The message is kept, its invalid byte replaced by U+FFFD.
  CHECK(error.find("missing-\xEF\xBF\xBD.txt: cannot open") != std::string::npos);
  CHECK(error.find("node 'lines'") != std::string::npos);
  CHECK(error.find("type_error") == std::string::npos);
}
