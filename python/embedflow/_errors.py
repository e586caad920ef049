"""embedflow's exceptions, raised by the compiled module and by the package alike."""
import re

# "G.yaml:12:5: node 'train' (torch.train) failed in process: ..." (runtime.cpp's located message)
_LOCATED = re.compile(r"^(?P<file>[^\n]*?):(?P<line>\d+)(?::(?P<column>\d+))?: node '(?P<node>[^']+)'")


class Error(Exception):
    """Base of embedflow's errors. `file`, `line`, `column` and `node` say where, when known."""

    def __init__(self, message, file=None, line=None, column=None, node=None):
        super().__init__(message)
        self.message = message
        self.file, self.line, self.column, self.node = file, line, column, node


class GraphError(Error):
    """The graph does not load or validate. `problems` lists every one (dicts with file, line,
    column, node, message, text); the location attributes are the first problem's."""

    def __init__(self, problems):
        first = problems[0] if problems else {}
        text = "\n".join(p["text"] for p in problems)
        if len(problems) > 1:
            text += f"\n{len(problems)} problems found"
        super().__init__(text, first.get("file"), first.get("line"), first.get("column"), first.get("node"))
        self.problems = problems


class NodeError(Error):
    """A node failed while the graph ran. The message is the engine's located one (with a
    py.map node, the Python traceback); `exit_code` is the CLI's (1, or 2 for a configuration
    problem found at run time); `record_dir` holds the failed run's run.json."""

    def __init__(self, message, exit_code=1, record_dir=None):
        m = _LOCATED.match(message)
        loc = m.groupdict() if m else {}
        super().__init__(message, loc.get("file"),
                         int(loc["line"]) if loc.get("line") else None,
                         int(loc["column"]) if loc.get("column") else None, loc.get("node"))
        self.exit_code = exit_code
        self.record_dir = record_dir


def graph_error(problems):
    return GraphError(list(problems))


def run_error(outcome):
    return NodeError(outcome["error"], outcome["exit_code"], outcome["record_dir"] or None)
