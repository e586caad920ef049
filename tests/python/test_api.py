"""embedflow.run, validate, inspect and their errors."""
import json
import os
import subprocess

import numpy as np
import pytest


def test_run_returns_the_run_record(ef, graphs, tmp_path):
    record = ef.run(graphs / "numbers.yaml", set={"count": 9, "batch": 4}, seed=11, threads=2, out=tmp_path / "r")
    assert record["status"] == "done" and record["exit_code"] == 0
    assert record["seed"] == 11
    assert record["threads"] == 2
    assert record["overrides"] == [f"out={tmp_path / 'r'}", "count=9", "batch=4"]
    assert os.path.samefile(record["record_dir"], tmp_path / "r")
    on_disk = json.loads((tmp_path / "r" / "run.json").read_text())
    assert on_disk["run_id"] == record["run_id"]
    nodes = {n["id"]: n for n in record["nodes"]}
    assert nodes["numbers"]["records_out"] == 9
    assert nodes["batches"]["records_out"] == 3  # 4 + 4 + 1


def test_run_matches_the_cli(ef, graphs, build, tmp_path):
    """The CLI and the module run one code path: the same graph gives the same per-node counts."""
    ef.run(graphs / "numbers.yaml", set={"count": 13}, out=tmp_path / "py")
    subprocess.run([str(build / "bin" / "embedflow"), "run", str(graphs / "numbers.yaml"), "--set", "count=13",
                    "--out", str(tmp_path / "cli"), "--quiet", "--no-report"], check=True)
    py = json.loads((tmp_path / "py" / "run.json").read_text())
    cli = json.loads((tmp_path / "cli" / "run.json").read_text())
    counts = lambda r: {n["id"]: (n["records_in"], n["records_out"]) for n in r["nodes"]}
    assert counts(py) == counts(cli)
    assert py["graph"]["sha256"] == cli["graph"]["sha256"]


def test_validate_lists_every_problem_with_its_location(ef, graphs):
    assert ef.validate(graphs / "numbers.yaml") == []
    problems = ef.validate(graphs / "broken.yaml")
    assert len(problems) >= 2
    text = "\n".join(p["text"] for p in problems)
    assert "cuont" in text and "shw" in text
    for p in problems:
        assert p["file"].endswith("broken.yaml") and p["line"] >= 3 and p["column"] >= 1
    cuont = next(p for p in problems if "cuont" in p["message"])
    assert cuont["node"] == "numbers" and cuont["line"] == 3


def test_validate_applies_overrides(ef, graphs):
    problems = ef.validate(graphs / "numbers.yaml", set={"numbers.count": -1})
    assert len(problems) == 1 and problems[0]["node"] == "numbers"


def test_run_of_an_invalid_graph_raises_graph_error_with_location(ef, graphs, tmp_path):
    with pytest.raises(ef.GraphError) as info:
        ef.run(graphs / "broken.yaml", out=tmp_path)
    e = info.value
    assert e.file.endswith("broken.yaml") and e.line >= 3 and e.column >= 1
    assert len(e.problems) >= 2
    assert "problems found" in str(e)
    with pytest.raises(ef.GraphError) as info:
        ef.run(graphs / "numbers.yaml", set={"batches.size": 0}, out=tmp_path)
    # an override's problem is located at the override, as it was given in Python
    assert info.value.node == "batches" and info.value.file == "set={'batches.size': 0}"


def test_missing_graph_file(ef, tmp_path):
    problems = ef.validate(tmp_path / "nope.yaml")
    assert len(problems) == 1 and "nope.yaml" in problems[0]["text"]
    with pytest.raises(ef.GraphError, match="nope.yaml"):
        ef.run(tmp_path / "nope.yaml")


def test_a_node_failing_at_run_time_raises_node_error(ef, graphs, tmp_path):
    # core.sink's `expect` fails the node at the end of the stream, after the graph validated.
    g = tmp_path / "expect.yaml"
    g.write_text("nodes:\n  numbers: {type: core.range, params: {count: 3}}\n"
                 "  done:    {type: core.sink, params: {expect: 4}}\nedges: [numbers.out -> done.in]\n")
    with pytest.raises(ef.NodeError) as info:
        ef.run(g, out=tmp_path / "o")
    e = info.value
    assert (e.file, e.line, e.column, e.node) == (str(g), 3, 3, "done")
    assert e.exit_code == 1
    assert json.loads((tmp_path / "o" / "run.json").read_text())["exit_code"] == 1


def test_inspect_returns_the_schema(ef, build):
    batch = ef.inspect("core.batch")
    assert batch["name"] == "core.batch" and batch["kind"] == "node"
    params = {p["name"]: p for p in batch["params"]}
    assert params["size"]["type"] == "int" and params["size"]["required"]
    # the same document as `embedflow inspect core.batch --json`
    cli = json.loads(subprocess.run([str(build / "bin" / "embedflow"), "inspect", "core.batch", "--json"],
                                    check=True, capture_output=True, text=True).stdout)
    assert {k: v for k, v in batch.items() if k not in ("name", "kind")} == cli["nodes"]["core.batch"]
    everything = ef.inspect()
    assert "core.range" in everything["nodes"] and "py.map" in everything["nodes"]
    with pytest.raises(KeyError, match="core.bath"):
        ef.inspect("core.bath")


def test_bad_arguments(ef, graphs):
    with pytest.raises(ValueError):
        ef.run(graphs / "numbers.yaml", seed=-3)
    with pytest.raises(ValueError):
        ef.Graph(graphs / "numbers.yaml", threads=-1)
    problems = ef.validate(graphs / "numbers.yaml", plugin_path=["/nonexistent/plugins"])
    assert [p["text"] for p in problems] == ["--plugin-path /nonexistent/plugins: no such directory"]
    with pytest.raises(ef.GraphError, match="no such directory"):
        ef.run(graphs / "numbers.yaml", plugin_path=["/nonexistent/plugins"])


def test_log_level(ef, graphs, tmp_path):
    import subprocess, sys
    code = ("import embedflow\n"
            "embedflow.set_log_level('warning')\n"
            f"embedflow.run({str(graphs / 'numbers.yaml')!r}, set={{'numbers.enabled': False}}, out={str(tmp_path)!r})\n")
    quiet = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    loud = subprocess.run([sys.executable, "-c", code.replace("'warning'", "'info'")], capture_output=True, text=True)
    assert quiet.returncode == loud.returncode == 0, quiet.stderr + loud.stderr
    assert "left out" not in quiet.stderr and "left out" in loud.stderr
    with pytest.raises(ValueError):
        ef.set_log_level("loud")


def test_sweep_runs_every_point_and_shares_the_cached_stage(ef, graphs, tmp_path):
    """embedflow.sweep is the CLI's sweep: 2 values x 2 seeds, the deterministic cached source
    computed once per value and replayed across seeds."""
    s = ef.sweep(graphs / "numbers.yaml", grid={"count": [3, 5]}, seeds=[1, 2], set={"numbers.cache": True},
                 out=tmp_path / "sw", cache_dir=tmp_path / "cache", report=False, quiet=True,
                 against={"mean": "numbers"})
    assert s["status"] == "done"
    assert s["against"] == [{"metric": "mean", "row": "numbers"}]
    assert [p["status"] for p in s["points"]] == ["ok"] * 4
    assert [(p["values"]["count"], p["seed"]) for p in s["points"]] == [("3", 1), ("3", 2), ("5", 1), ("5", 2)]
    stages = {st["node"]: st for st in s["stages"]}
    assert (stages["numbers"]["computed"], stages["numbers"]["replayed"]) == (2, 2)
    assert stages["batches"]["computed"] == 4
    on_disk = json.loads((tmp_path / "sw" / "sweep.json").read_text())
    assert on_disk["points"] == s["points"]
    for p in s["points"]:
        record = json.loads((tmp_path / "sw" / p["dir"] / "run.json").read_text())
        assert record["seed"] == p["seed"]
        assert {n["id"]: n["records_out"] for n in record["nodes"]}["numbers"] == int(p["values"]["count"])


def test_sweep_bad_input_raises_graph_error(ef, graphs, tmp_path):
    with pytest.raises(ef.GraphError, match="has no variable 'cuont'"):
        ef.sweep(graphs / "numbers.yaml", grid={"cuont": [1, 2]}, out=tmp_path / "sw", report=False, quiet=True)
    with pytest.raises(ef.GraphError, match="expected METRIC:ROW"):
        ef.sweep(graphs / "numbers.yaml", grid={"count": [1, 2]}, against={"": "numbers"}, out=tmp_path / "sw",
                 report=False, quiet=True)
    with pytest.raises(ef.GraphError, match="nothing to sweep"):
        ef.sweep(graphs / "numbers.yaml", out=tmp_path / "sw", report=False, quiet=True)
    assert not (tmp_path / "sw" / "sweep.json").exists()


@pytest.mark.parametrize("name", ["007", "1e3", "null", "yes", "true", "~", "a b: c", "[x]", "-1", "it's \"quoted\"\n"])
def test_a_str_override_stays_a_string(ef, graphs, tmp_path, name):
    # The variable is part of a longer string: YAML's reading of "007" as 7 would name the file "7".
    ef.run(graphs / "typed.yaml", set={"dir": str(tmp_path), "name": name}, out=tmp_path / "r")
    assert (tmp_path / name).is_file()


def test_number_overrides_keep_their_types(ef, graphs, tmp_path):
    record = ef.run(graphs / "typed.yaml", set={"dir": str(tmp_path), "start": 100.0, "count": 2}, out=tmp_path / "r")
    assert "start=100.0" in record["overrides"] and "count=2" in record["overrides"]
    assert (tmp_path / "numbers.txt").read_text().count("\n") == 2
    assert "100" in (tmp_path / "numbers.txt").read_text()
    # an int where a number is accepted widens, as in a graph file
    ef.run(graphs / "typed.yaml", set={"dir": str(tmp_path), "start": 100}, out=tmp_path / "r")


def test_overrides_are_written_as_yaml_that_reads_back_the_same(ef):
    assert ef._embedflow is not None
    y = ef._yaml_value
    assert y("007") == '"007"' and y("same") == "same" and y("data/photos") == "data/photos"
    assert y(100.0) == "100.0" and y(1e20) == "1e+20" and y(float("inf")) == ".inf" and y(float("nan")) == ".nan"
    assert y(True) == "true" and y(0) == "0" and y(None) == "null"
    assert y(["007", 1, 2.5, False, None, {"k": "x y"}]) == '["007", 1, 2.5, false, null, {k: "x y"}]'
    with pytest.raises(TypeError):
        y(object())


def test_an_override_of_the_wrong_type_is_an_error_naming_the_set(ef, graphs, tmp_path):
    with pytest.raises(ef.GraphError) as info:
        ef.run(graphs / "typed.yaml", set={"dir": str(tmp_path), "count": 2.5}, out=tmp_path / "r")
    e = info.value
    assert e.file == "set={'count': 2.5}" and e.node == "numbers"
    assert "parameter 'count' expects an integer, got number 2.5" in str(e)
    assert "typed.yaml:7:" in str(e)  # the graph line of the ${count} it went to
    # a str stays a string, so "3" is not an integer either
    problems = ef.validate(graphs / "typed.yaml", set={"count": "3"})
    assert len(problems) == 1 and problems[0]["file"] == "set={'count': '3'}"
    assert problems[0]["text"].startswith("set={'count': '3'}: node 'numbers': parameter 'count' expects an integer")


def test_a_problem_from_two_overrides_names_both(ef):
    labels = {"--set dir=": "set={'dir': ''}", "--set dir=a": "set={'dir': 'a'}", "--set name=b": "set={'name': 'b'}"}
    problem = {"file": "--set dir=a, --set name=b", "text": "--set dir=a, --set name=b: node 'show': bad path"}
    named = ef._name_sets([problem], labels)[0]
    assert named["file"] == "set={'dir': 'a'}, set={'name': 'b'}"
    assert named["text"] == "set={'dir': 'a'}, set={'name': 'b'}: node 'show': bad path"
