"""embedflow from Python: run, validate and inspect graphs, and stream a graph's port into a
Python loop (numpy views or torch tensors, without copies).

    import embedflow
    record = embedflow.run("graphs/quickstart.yaml", set={"numbers.count": 100}, seed=7)
    problems = embedflow.validate("G.yaml")              # [] when valid
    schema = embedflow.inspect("core.batch")             # the type's schema as a dict
    for batch in embedflow.Graph("G.yaml", set={...}).stream("join.out", as_torch=True):
        ...                                              # {field: tensor}

The graph runs on the engine's threads, the GIL released while Python waits; the stream holds at
most `capacity` records, so a loop that stops reading pauses the graph's sources. Leaving the
loop (break, an exception, closing the stream or dropping it) stops the graph cleanly.
Errors: GraphError (invalid graph: file, line, column, node, problems), NodeError (a node
failed while running; located the same way).
"""
import atexit
import json
import math
import numbers
import os
import re
import weakref

from . import _embedflow
from ._errors import Error, GraphError, NodeError
from ._paths import PLUGIN_DIR as _PLUGIN_DIR_RELATIVE
from ._paths import CLI as _CLI_RELATIVE

__all__ = ["run", "sweep", "validate", "inspect", "Graph", "Stream", "Error", "GraphError", "NodeError", "set_log_level",
           "version"]
version = _embedflow.version

# The plugins built or installed with this module.
PLUGIN_DIR = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), _PLUGIN_DIR_RELATIVE))


def set_log_level(level):
    """The engine's log lines on stderr: "debug", "info" (the default) or "warning" (only problems)."""
    _embedflow.set_log_level(level)


def _sets(values):
    """{"node.param": value} (or a list of "node.param=value") -> --set assignments. Values are
    written as YAML flow text that reads back as the same Python value: a str stays a string
    (quoted when YAML would read it as something else: "007", "1e3", "null", "yes, no"), an int
    an integer, a float a number (100.0 too), a bool a boolean, None null, lists and dicts keep
    their items' types."""
    return [assignment for assignment, _ in _labelled_sets(values)]


def _labelled_sets(values):
    """(assignment, how the user wrote it) pairs: a problem with an override names it the Python
    way, set={'steps': 'abc'}, rather than as --set steps=abc."""
    if values is None:
        return []
    if isinstance(values, (list, tuple)):
        return [(str(v), f"set=[{str(v)!r}]") for v in values]
    return [(f"{k}={_yaml_value(v)}", f"set={{{k!r}: {v!r}}}") for k, v in values.items()]


# A string is written bare only when it is plain text YAML cannot read as anything else (a word,
# a path, a dotted type name); otherwise double-quoted with JSON's escapes, which YAML shares.
_PLAIN = re.compile(r"[A-Za-z_/][A-Za-z0-9_./-]*\Z")
_RESERVED = {"null", "true", "false", "yes", "no", "on", "off", "y", "n", "inf", "nan"}


def _yaml_string(s):
    if _PLAIN.match(s) and s.lower() not in _RESERVED:
        return s
    return json.dumps(s, ensure_ascii=False)


def _yaml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, numbers.Integral):
        return str(int(v))
    if isinstance(v, numbers.Real):
        f = float(v)
        if math.isnan(f):
            return ".nan"
        if math.isinf(f):
            return ".inf" if f > 0 else "-.inf"
        return repr(f)  # always has a '.', an 'e' or both: read back as a number, not an integer
    if isinstance(v, str):
        return _yaml_string(v)
    if isinstance(v, os.PathLike):
        return _yaml_string(os.fspath(v))
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_yaml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_yaml_string(str(k))}: {_yaml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"set= values are str, int, float, bool, None, lists or dicts of them; got {type(v).__name__} {v!r}")


def _name_sets(problems, labels):
    """Problems located at an override ("--set steps=abc", or several: "--set a=1, --set b=2")
    name it as it was given in Python."""
    out = []
    for p in problems:
        where = p.get("file") or ""
        if where.startswith("--set "):
            named = where
            for origin in sorted(labels, key=len, reverse=True):
                named = named.replace(origin, labels[origin])
            if named != where and p["text"].startswith(where):
                p = dict(p, file=named, text=named + p["text"][len(where):])
        out.append(p)
    return out


def _graph_errors_named(labels):
    """A context manager turning GraphError's override locations into their Python form."""
    return _Renaming(labels)


class _Renaming:
    def __init__(self, labels):
        self.labels = labels

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if isinstance(exc, GraphError) and self.labels:
            raise GraphError(_name_sets(exc.problems, self.labels)) from None
        return False


def _plugin_path(extra):
    """The user's directories, then this module's own plugins (built or installed with it, so
    their ABI matches), then EMBEDFLOW_PLUGIN_PATH (the engine reads that itself)."""
    dirs = [os.fspath(d) for d in (extra or [])]
    if os.path.isdir(PLUGIN_DIR):
        dirs.append(PLUGIN_DIR)
    return dirs


def _seed(seed):
    if seed is not None and (not isinstance(seed, int) or seed < 0):
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    return seed


class Graph:
    """A graph file with its overrides. `set` maps "node.param" (or a variable) to a value,
    like `embedflow run --set`; `seed` overrides the graph's seed; `threads` is --threads (0: every core)."""

    def __init__(self, path, set=None, seed=None, threads=0, plugin_path=None, out=None, cache_dir=None,
                 no_cache=False):
        self.path = os.fspath(path)
        labelled = _labelled_sets(set)
        self.sets = [assignment for assignment, _ in labelled]
        self._set_labels = {f"--set {assignment}": label for assignment, label in labelled}
        self.seed = _seed(seed)
        if not isinstance(threads, int) or threads < 0:
            raise ValueError(f"threads must be a non-negative int, got {threads!r}")
        self.threads = threads
        self.plugin_path = _plugin_path(plugin_path)
        self.out = "" if out is None else os.fspath(out)
        self.cache_dir = "" if cache_dir is None else os.fspath(cache_dir)
        self.no_cache = bool(no_cache)

    def validate(self):
        """Every problem, as dicts (file, line, column, node, message, text); [] when valid."""
        return _name_sets(_embedflow.validate(self.path, self.sets, self.seed, self.plugin_path), self._set_labels)

    def run(self, report=False):
        """Runs the graph to its end; returns its run record (run.json as a dict, with
        "record_dir" added). Raises GraphError when invalid, NodeError when a node fails,
        KeyboardInterrupt when interrupted (the graph is drained first)."""
        with _graph_errors_named(self._set_labels):
            outcome = _embedflow.run(self.path, self.sets, self.seed, self.plugin_path, self.threads, self.out,
                                     self.cache_dir, self.no_cache, report)
        if outcome["exit_code"] == 130:
            raise KeyboardInterrupt
        if outcome["exit_code"] != 0:
            raise NodeError(outcome["error"], outcome["exit_code"], outcome["record_dir"] or None)
        with open(os.path.join(outcome["record_dir"], "run.json")) as f:
            record = json.load(f)
        record["record_dir"] = outcome["record_dir"]
        return record

    def stream(self, output, as_torch=False, capacity=4):
        """Iterates the records emitted on `output` ("node.port", or "node" when it has one
        output) as dicts of read-only numpy views (as_torch=True: torch tensors over the same
        memory, through DLPack), while the graph runs. String fields are str or lists of str.
        At most `capacity` records wait in the queue."""
        with _graph_errors_named(self._set_labels):
            stream = Stream(_embedflow.Stream(self.path, output, self.sets, self.seed, self.plugin_path, capacity,
                                              as_torch, self.threads, self.out, self.cache_dir, self.no_cache))
        _open_streams.add(stream)
        return stream


# Streams still open when the program ends are closed while the interpreter still works: their
# graphs' threads may be inside py.map nodes, which need it to finish.
_open_streams = weakref.WeakSet()


@atexit.register
def _close_open_streams():
    for stream in list(_open_streams):
        stream.close()


class Stream:
    """An iterator over one port's records; a context manager that stops reading on exit.

    The stream is one more consumer of its port: leaving the loop (break, an exception, close(),
    the end of a with block) stops the streamed node and the nodes feeding only it, as when a
    trainer reaches max_steps; what else the graph computes runs to its end. Ctrl-C while
    waiting for a record, or anywhere in a with block over the stream, interrupts the whole
    run."""

    def __init__(self, native):
        self._native = native

    def __iter__(self):
        return self

    def __next__(self):
        return self._native.__next__()

    def close(self, interrupt=False):
        """Stops reading: the streamed node and the nodes feeding only it stop; waits until the
        graph has ended. interrupt=True stops the whole run instead (recorded as interrupted)."""
        self._native.close(interrupt)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        # Ctrl-C anywhere in the block stops the whole run, as it does in the CLI.
        self.close(interrupt=exc_type is not None and issubclass(exc_type, KeyboardInterrupt))
        return False

    def __del__(self):
        native = getattr(self, "_native", None)
        if native is not None:
            native.close()

    @property
    def port(self):
        return self._native.port

    @property
    def result(self):
        """After the end: {exit_code, error, record_dir, seconds, source_records}; None before."""
        return self._native.result

    @property
    def stopped(self):
        """True when the stream was closed before the graph ended (the streamed node then stopped
        early, `stopped_early` in run.json) or the run was interrupted."""
        return self._native.stopped


def run(graph, set=None, seed=None, threads=0, plugin_path=None, out=None, cache_dir=None, no_cache=False,
        report=False):
    """embedflow run: returns the run record (run.json as a dict)."""
    return Graph(graph, set, seed, threads, plugin_path, out, cache_dir, no_cache).run(report=report)


def sweep(graph, grid=None, points=None, seeds=None, jobs=1, threads=0, out=None, set=None, select=None, then=None,
          cache_dir=None, report=True, plugin_path=None, quiet=False, baselines=None, against=None):
    """embedflow sweep: runs `graph` at every point of `grid` ({variable: [values]}, the cross
    product) or of `points` ([{variable: value}]), each with every seed (`seeds`: a count N, the
    graph's seed and the N-1 after it, or a list), `jobs` points at a time, sharing stage caches.
    `select` ("[node/][label/]metric") picks the best variant on a validation metric and runs it
    once more with `then` ({variable: value}). `baselines` (row labels) get paired-test columns in
    table.md; `against` ({metric: row label prefix}, e.g. {"label_precision": "pair set"}) charts
    every metric against that row's metric in the report. Returns sweep.json as a dict; the folder is `out`
    (default out/<graph name>-sweep). Raises GraphError for bad input found before any point
    runs; a point that fails at run time is marked in the result (status "failed")."""
    axes = [f"{k}=" + ",".join(_yaml_value(v) for v in values) for k, values in (grid or {}).items()]
    listed = [";".join(f"{k}={_yaml_value(v)}" for k, v in p.items()) for p in (points or [])]
    if isinstance(seeds, (list, tuple)):
        seeds = ",".join(str(int(s)) for s in seeds)
    cli = os.environ.get("EMBEDFLOW_CLI") or os.path.normpath(
        os.path.join(os.path.dirname(os.path.abspath(__file__)), _CLI_RELATIVE))
    labels = {f"--set {assignment}": label for assignment, label in _labelled_sets(set)}
    with _graph_errors_named(labels):
        text = _embedflow.sweep(os.fspath(graph), axes, listed, "" if seeds is None else str(seeds), int(jobs),
                                int(threads), "" if out is None else os.fspath(out), _sets(set), select or "",
                                _sets(then), os.fspath(cache_dir) if cache_dir else "", bool(report),
                                _plugin_path(plugin_path), cli, bool(quiet), list(baselines or []),
                                [f"{metric}:{row}" for metric, row in (against or {}).items()])
    return json.loads(text)


def validate(graph, set=None, seed=None, plugin_path=None):
    """embedflow validate: the list of problems, [] when the graph is valid."""
    return Graph(graph, set, seed, 0, plugin_path).validate()


def inspect(type=None, plugin_path=None):
    """embedflow inspect --json: one node or component type's schema as a dict, with "name"
    and "kind" ("node" or "component") added (KeyError when there is no such type); with no
    type, {"nodes": {name: schema}, "components": {name: schema}} for every type."""
    doc = json.loads(_embedflow.inspect_json(type or "", _plugin_path(plugin_path)))
    if not type:
        return doc
    for kind in ("nodes", "components"):
        if type in doc.get(kind, {}):
            return {"name": type, "kind": kind[:-1], **doc[kind][type]}
    raise KeyError(type)
