"""Graph(...).stream(): records as numpy views and torch tensors, without copies, bounded, and
stopped cleanly by a consumer that leaves."""
import gc
import json
import sys
import time

import numpy as np
import pytest


def expected_values(count, start=1.0, step=0.5):
    return start + step * np.arange(count)


def test_stream_yields_each_record_as_numpy(ef, graphs, tmp_path):
    g = ef.Graph(graphs / "numbers.yaml", set={"count": 10, "batch": 4}, out=tmp_path)
    batches = list(g.stream("batches.out"))
    assert [b["value"].shape for b in batches] == [(4,), (4,), (2,)]
    values = np.concatenate([b["value"] for b in batches])
    np.testing.assert_array_equal(values, expected_values(10))  # core.range: start + step * i
    np.testing.assert_array_equal(np.concatenate([b["index"] for b in batches]), np.arange(10))
    assert batches[0]["value"].dtype == np.float64 and batches[0]["index"].dtype == np.int64


def test_stream_by_node_name_and_unknown_ports(ef, graphs, tmp_path):
    g = ef.Graph(graphs / "numbers.yaml", set={"count": 3, "batch": 1}, out=tmp_path)
    assert len(list(g.stream("numbers"))) == 3  # one output: the port may be left out
    with pytest.raises(ef.GraphError, match="did you mean 'numbers'") as info:
        g.stream("numbrs.out")
    assert info.value.file.endswith("numbers.yaml")
    with pytest.raises(ef.GraphError, match="has no output 'outt'") as info:
        g.stream("numbers.outt")
    assert info.value.node == "numbers" and (info.value.line, info.value.column) == (6, 3)


def test_arrays_are_read_only_views_whose_base_keeps_the_record_alive(ef, graphs, tmp_path):
    g = ef.Graph(graphs / "numbers.yaml", set={"count": 8, "batch": 4, "payload": 1 << 16}, out=tmp_path)
    stream = g.stream("batches.out")
    first = next(stream)
    value, index, payload = first["value"], first["index"], first["payload"]
    # One record, one owner: every field's base is the same capsule, which holds the record.
    assert value.base is index.base is payload.base
    assert type(value.base).__name__ == "PyCapsule"
    assert not value.flags.writeable and not value.flags.owndata
    with pytest.raises(ValueError):
        value[0] = 3
    # A view of a view shares the buffer (and so the record), no copy.
    assert np.shares_memory(value[1:], value)
    snapshot = value.copy()
    stream.close()
    del stream, g, first
    gc.collect()
    # The graph is gone; the arrays still read the record's memory, unchanged.
    np.testing.assert_array_equal(value, snapshot)
    np.testing.assert_array_equal(value, expected_values(4))
    assert payload.shape == (4, 1 << 16) and not payload.any()


def test_the_capsule_is_the_only_owner(ef, graphs, tmp_path):
    """Each field's array holds one reference to the record's capsule; nothing else does, so
    dropping the arrays frees the record."""
    g = ef.Graph(graphs / "numbers.yaml", set={"count": 2, "batch": 2}, out=tmp_path)
    with g.stream("batches.out") as s:
        record = next(s)
    owner = record["value"].base
    arrays = [v for v in record.values() if isinstance(v, np.ndarray)]
    assert len(arrays) == len(record) >= 2
    del arrays
    assert sys.getrefcount(owner) - 1 == len(record) + 1  # each field's base, and `owner` here
    del record
    assert sys.getrefcount(owner) - 1 == 1


def test_torch_tensors_share_the_record_memory(ef, graphs, tmp_path):
    torch = pytest.importorskip("torch")
    g = ef.Graph(graphs / "numbers.yaml", set={"count": 6, "batch": 3}, out=tmp_path)
    batches = list(g.stream("batches.out", as_torch=True))
    assert all(isinstance(b["value"], torch.Tensor) for b in batches)
    assert batches[0]["value"].dtype == torch.float64 and batches[0]["index"].dtype == torch.int64
    values = torch.cat([b["value"] for b in batches])
    torch.testing.assert_close(values, torch.from_numpy(expected_values(6)))
    # The same record as numpy and as torch: the tensor points at the record's buffer.
    with g.stream("batches.out") as s:
        as_numpy = next(s)["value"]
    del g
    gc.collect()
    assert values.sum().item() == pytest.approx(expected_values(6).sum())
    # DLPack shares memory: the tensor's data pointer is the numpy view's of the same record.
    g2 = ef.Graph(graphs / "numbers.yaml", set={"count": 3, "batch": 3}, out=tmp_path)
    with g2.stream("batches.out", as_torch=True) as s:
        t = next(s)["value"]
    assert t.data_ptr() != 0 and t.is_contiguous()


def _nodes(tmp_path):
    record = json.loads((tmp_path / "run.json").read_text())
    return record, {n["id"]: n for n in record["nodes"]}


def test_breaking_out_of_the_loop_stops_what_fed_only_the_stream(ef, graphs, tmp_path):
    g = ef.Graph(graphs / "branches.yaml", set={"count": 1000000, "batch": 10}, out=tmp_path)
    stream = g.stream("batches.out", capacity=2)
    for i, batch in enumerate(stream):
        if i == 3:
            break
    stream.close()
    assert stream.stopped
    assert stream.result["exit_code"] == 0  # the graph ended cleanly: nothing else wanted the numbers
    record, nodes = _nodes(tmp_path)
    assert record["status"] == "done"
    assert nodes["batches"]["stopped_early"] and nodes["numbers"]["stopped_early"]
    # core.range stops within its in-flight cap of the batches the stream took, not at 10^6
    assert nodes["numbers"]["records_out"] < 2000, nodes["numbers"]["records_out"]


def test_a_branch_still_listening_gets_every_record_after_the_stream_stops(ef, graphs, tmp_path):
    g = ef.Graph(graphs / "branches.yaml", set={"count": 20000, "batch": 10, "branch": True}, out=tmp_path)
    with g.stream("batches.out", capacity=2) as stream:
        taken = [next(stream) for _ in range(3)]
    assert [int(b["value"][0]) for b in taken] == [0, 10, 20]
    assert stream.result["exit_code"] == 0, stream.result["error"]  # `every` expects all 20000
    record, nodes = _nodes(tmp_path)
    assert record["status"] == "done"
    assert nodes["every"]["records_in"] == 20000
    assert nodes["numbers"]["records_out"] == 20000 and not nodes["numbers"]["stopped_early"]
    assert nodes["batches"]["stopped_early"]
    assert nodes["batches"]["records_out"] < 2000


def test_an_exception_in_the_loop_stops_the_stream(ef, graphs, tmp_path):
    g = ef.Graph(graphs / "branches.yaml", set={"count": 1000000, "batch": 10}, out=tmp_path)

    def consume():
        for i, batch in enumerate(g.stream("batches.out")):
            if i == 2:
                raise RuntimeError("the loop failed")

    with pytest.raises(RuntimeError, match="the loop failed"):
        consume()
    gc.collect()
    record, nodes = _nodes(tmp_path)
    assert record["status"] == "done"
    assert nodes["numbers"]["stopped_early"] and nodes["numbers"]["records_out"] < 2000


def test_a_paused_consumer_pauses_the_sources(ef, graphs, tmp_path):
    """Memory stays bounded: with 1 MiB records, a consumer that stops reading holds the source
    at its in-flight cap instead of letting the records pile up."""
    g = ef.Graph(graphs / "stage.yaml", set={"count": 100000, "function": "stages.py:forward", "parallel": False,
                                             "sink": False},
                 out=tmp_path)
    stream = g.stream("stage.out", capacity=2)
    next(stream)
    stage = sys.modules["embedflow_py_stage"]  # the stage's module, loaded by py.map in this interpreter
    time.sleep(0.5)
    paused_at = stage.calls
    time.sleep(1.0)
    assert stage.calls == paused_at  # nothing moves while the consumer does not read
    assert paused_at < 1000
    next(stream)  # reading again resumes the graph
    stream.close()
    record = json.loads((tmp_path / "run.json").read_text())
    produced = {n["id"]: n["records_out"] for n in record["nodes"]}["numbers"]
    # core.range's in_flight cap plus the queue: far fewer than the 100000 records available
    assert produced < 1000, produced


def test_a_node_failure_surfaces_after_the_records_before_it(ef, graphs, tmp_path):
    g = ef.Graph(graphs / "stage.yaml", set={"count": 10, "function": "stages.py:fail_on_third"}, out=tmp_path)
    seen = []
    with pytest.raises(ef.NodeError) as info:
        for r in g.stream("stage.out"):
            seen.append(int(r["index"]))
    # The records before the failing one, in order, as far as they got ahead of the failure (a
    # failure cancels the graph, dropping what was still in flight).
    assert seen == list(range(len(seen))) and len(seen) <= 2
    e = info.value
    assert e.node == "stage" and e.file.endswith("stage.yaml") and e.line == 7
    assert "ValueError: record 2 is not welcome" in str(e)
    assert "Traceback" in str(e) and "stages.py" in str(e)


def test_a_stream_left_open_at_exit_is_closed_cleanly(graphs, build, tmp_path):
    """A program that ends (here by an uncaught exception) in the middle of a loop over a graph
    with a py.map node exits with Python's own status, not a crash or a hang."""
    import os
    import subprocess
    code = ("import embedflow\n"
            f"s = embedflow.Graph({str(graphs / 'stage.yaml')!r}, set={{'count': 100000, 'sink': False}}, out={str(tmp_path)!r})"
            ".stream('stage.out', capacity=1)\n"
            "next(s)\n"
            "raise SystemExit(3)\n")
    env = dict(os.environ, PYTHONPATH=str(build / "python"))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 3, r.stderr
    record = json.loads((tmp_path / "run.json").read_text())
    assert record["status"] == "done"  # the stream's reader left: what fed only it stopped
    assert {n["id"]: n["stopped_early"] for n in record["nodes"]} == {"numbers": True, "stage": True}


def test_ctrl_c_in_the_loop_raises_keyboard_interrupt_and_stops_the_graph(graphs, build, tmp_path):
    """Ctrl-C lands either while next() waits (the stream stops the graph itself) or in the loop's
    Python code (an exception in the loop: leaving the with block stops it); either way the
    program gets KeyboardInterrupt and the run is recorded as interrupted."""
    import os
    import signal
    import subprocess
    code = ("import embedflow, sys\n"
            f"s = embedflow.Graph({str(graphs / 'stage.yaml')!r}, set={{'count': 100000, 'function': 'stages.py:slow'}}, "
            f"out={str(tmp_path)!r}).stream('stage.out')\n"
            "next(s)\n"
            "print('reading', flush=True)\n"
            "try:\n"
            "    with s:\n"
            "        for r in s: pass\n"
            "except KeyboardInterrupt:\n"
            "    print('interrupted', s.stopped, flush=True)\n"
            "    sys.exit(5)\n")
    env = dict(os.environ, PYTHONPATH=str(build / "python"))
    child = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    assert child.stdout.readline().strip() == "reading"
    time.sleep(0.5)
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 5, err
    assert "interrupted True" in out.splitlines()  # beside core.sink's count line
    assert json.loads((tmp_path / "run.json").read_text())["status"] == "interrupted"


def test_memory_stays_bounded_over_a_stream_larger_than_memory_allows(graphs, build, tmp_path):
    """2000 records of 1 MiB each (2 GiB in all) through a stream whose consumer is slower than
    the source: the records alive at once (the source's in-flight cap of 64, their batch copies,
    the queue) add a little over 100 MiB to the process, never the stream's size."""
    import os
    import subprocess
    code = ("import embedflow, resource, time\n"
            f"g = embedflow.Graph({str(graphs / 'numbers.yaml')!r}, set={{'count': 2000, 'payload': 1 << 20, 'batch': 1}}, "
            f"out={str(tmp_path)!r})\n"
            "assert g.validate() == []  # loads the plugins: the baseline includes them\n"
            "base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024\n"
            "n = 0\n"
            "for r in g.stream('batches.out', capacity=4):\n"
            "    n += int(r['payload'].shape[1] == 1 << 20)\n"
            "    if n % 100 == 0: time.sleep(0.01)\n"
            "print(n, base, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)\n")
    # Every 1 MiB block mapped on its own and unmapped when freed, so the peak RSS counts live
    # records only (the runtime's policy, and glibc's default once it adapts, keep freed blocks).
    env = dict(os.environ, PYTHONPATH=str(build / "python"), GLIBC_TUNABLES="glibc.malloc.mmap_threshold=524288")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    count, base_mib, peak_mib = map(int, r.stdout.strip().splitlines()[-1].split())
    assert count == 2000
    assert peak_mib - base_mib < 300, f"peak RSS {peak_mib} MiB, {base_mib} MiB before streaming 2000 MiB"
