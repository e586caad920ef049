#!/usr/bin/env python3
"""List functions, classes and source files over the house limits.

Functions over 120 lines, classes/structs over 300 and files over 600, outside tests and the
data generators (tools/gen_*), measured with universal-ctags' start and end lines. Exits 1
when anything is over, so it can gate a change.
"""
import subprocess
import sys

FUNCTION_LIMIT, CLASS_LIMIT, FILE_LIMIT = 120, 300, 600


def sources():
    files = subprocess.run(["git", "ls-files", "*.cpp", "*.hpp", "*.h"], capture_output=True,
                           text=True, check=True).stdout.split()
    return [f for f in files if not f.startswith("tests/") and not f.startswith("tools/gen_")
            and not f.startswith("fuzz/")]


def main():
    files = sources()
    over = []
    for f in files:
        with open(f, encoding="utf-8", errors="replace") as fh:
            n = sum(1 for _ in fh)
        if n > FILE_LIMIT:
            over.append((n, "file", f, ""))
    tags = subprocess.run(["ctags", "--c++-kinds=fcs", "--fields=+nKe", "-o", "-"] + files,
                          capture_output=True, text=True, check=True).stdout
    for row in tags.splitlines():
        cols = row.split("\t")
        fields = dict(c.split(":", 1) for c in cols[3:] if ":" in c)
        if "end" not in fields or "line" not in fields:
            continue
        length = int(fields["end"]) - int(fields["line"]) + 1
        kind = cols[3] if len(cols) > 3 else ""
        limit = FUNCTION_LIMIT if kind.startswith("function") else CLASS_LIMIT
        if length > limit:
            over.append((length, kind, cols[1] + ":" + fields["line"], cols[0]))
    for length, kind, where, name in sorted(over, reverse=True):
        print(f"{length:6d}  {kind:9s} {where}  {name}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
