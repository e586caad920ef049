"""py.map: a Python function as a node, under the CLI (embedded interpreter) and under the module
(the running interpreter)."""
import subprocess

import numpy as np
import pytest


def cli(build, *args):
    return subprocess.run([str(build / "bin" / "embedflow"), *map(str, args)], capture_output=True, text=True)


def test_py_map_in_the_module_against_numpy(ef, graphs, tmp_path):
    g = ef.Graph(graphs / "stage.yaml", set={"count": 50}, out=tmp_path)
    records = list(g.stream("stage.out"))
    values = np.array([float(r["value"]) for r in records])
    twice = np.array([float(r["twice"]) for r in records])
    np.testing.assert_array_equal(values, np.square(np.arange(50.0)))
    np.testing.assert_array_equal(twice, 2.0 * np.arange(50.0))
    assert records[0]["value"].dtype == np.float64


@pytest.mark.parametrize("parallel", [False, True])
def test_py_map_keeps_order_serial_or_parallel(ef, graphs, tmp_path, parallel):
    g = ef.Graph(graphs / "stage.yaml", set={"count": 200, "parallel": parallel}, threads=2, out=tmp_path)
    index = [int(r["index"]) for r in g.stream("stage.out")]
    assert index == list(range(200))


def test_py_map_filters_and_fans_out(ef, graphs, tmp_path):
    g = ef.Graph(graphs / "stage.yaml", set={"count": 6, "function": "stages.py:keep_even"}, out=tmp_path)
    records = list(g.stream("stage.out"))
    assert [int(r["index"]) for r in records] == [0, 0, 2, 2, 4, 4]
    assert ["copy" in r for r in records] == [False, True] * 3
    assert records[1]["copy"].dtype == np.int32


def test_an_unchanged_input_field_is_forwarded_not_copied(ef, graphs, tmp_path):
    """forward() returns the record's own views; the emitted record shares the range node's
    buffers, so the stream sees memory equal to what went in."""
    g = ef.Graph(graphs / "stage.yaml", set={"count": 4, "function": "stages.py:forward"}, out=tmp_path)
    values = [float(r["value"]) for r in g.stream("stage.out")]
    assert values == [0.0, 1.0, 2.0, 3.0]


def test_py_map_under_the_cli(build, graphs, tmp_path):
    r = cli(build, "run", graphs / "stage.yaml", "--set", "count=30", "--set", "show.mode=print", "--out", tmp_path,
            "--no-report")
    assert r.returncode == 0, r.stderr
    lines = [l for l in r.stdout.splitlines() if l.startswith("{")]
    assert len(lines) == 30
    assert "value: 841" in lines[29] and "twice: 58" in lines[29]


def test_a_python_exception_is_a_located_node_error_with_traceback(build, graphs, tmp_path):
    r = cli(build, "run", graphs / "stage.yaml", "--set", "function=stages.py:fail_on_third", "--out", tmp_path,
            "--no-report")
    assert r.returncode == 1
    assert f"{graphs / 'stage.yaml'}:7:3: node 'stage' (py.map) failed in process" in r.stderr
    assert "Traceback (most recent call last)" in r.stderr
    assert "ValueError: record 2 is not welcome" in r.stderr
    assert "stages.py" in r.stderr and "in fail_on_third" in r.stderr


@pytest.mark.parametrize("function, message", [
    ("stages.py:wrong_type", "field 'bad' is a dict; expected a numpy array, a number, a str or a list of str"),
    ("stages.py:wrong_dtype", "field 'half' has numpy dtype float16"),
])
def test_a_wrong_field_type_is_a_clear_error(ef, build, graphs, tmp_path, function, message):
    r = cli(build, "run", graphs / "stage.yaml", "--set", f"function={function}", "--out", tmp_path, "--no-report")
    assert r.returncode == 1
    assert "node 'stage' (py.map)" in r.stderr and message in r.stderr, r.stderr
    g = ef.Graph(graphs / "stage.yaml", set={"function": function}, out=tmp_path)
    with pytest.raises(ef.NodeError, match=message.replace("(", r"\(").replace(")", r"\)")) as info:
        ef.run(graphs / "stage.yaml", set={"function": function}, out=tmp_path)
    assert info.value.node == "stage" and info.value.line == 7


def test_a_function_that_cannot_be_found(ef, build, graphs, tmp_path):
    r = cli(build, "run", graphs / "stage.yaml", "--set", "function=stages.py:nope", "--out", tmp_path, "--no-report")
    assert r.returncode == 2
    assert "node 'stage' (py.map)" in r.stderr and "has no attribute 'nope'" in r.stderr
    problems = ef.validate(graphs / "stage.yaml", set={"function": "no_colon_here"})
    assert len(problems) == 1 and problems[0]["node"] == "stage" and "module:function" in problems[0]["message"]
