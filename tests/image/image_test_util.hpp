// Helpers shared by the image tests: graphs run in the test's process, Python oracles.
#pragma once

#include <string>

#include "harness.hpp"

namespace embedflow::test {

inline const char* kFashion = "/usr/share/datasets/fashion-mnist";

// Runs `yaml` in this process (GraphRunner) on `threads` worker threads (0: every core), with
// --set style `sets` ("seed=22", "read.on_bad_image=skip"); `name` names it in messages.
inline GraphRun run_graph(const std::string& name, const std::string& yaml, int threads = 0,
                          const std::vector<std::string>& sets = {}) {
  return GraphRunner(plugins(), yaml, name).threads(threads).run(sets);
}

// Python prelude: IDX parsing with gzip + numpy, independent of the C++ reader.
inline const char* kIdxPython = R"PY(
import gzip, sys
import numpy as np
import h5py
def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic = int.from_bytes(data[0:4], "big")
    rank = magic & 0xff
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(rank)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)
def fashion(split):
    base = "/usr/share/datasets/fashion-mnist/" + ("train" if split == "train" else "t10k")
    return idx(base + "-images-idx3-ubyte.gz"), idx(base + "-labels-idx1-ubyte.gz").astype(np.int64)
def check(cond, *msg):
    if not cond:
        print("FAIL:", *msg)
        sys.exit(1)
)PY";

// run_graph for a graph that must succeed: a failed run fails the test with its message.
inline GraphRun run_graph_ok(const std::string& name, const std::string& yaml, int threads = 0,
                             const std::vector<std::string>& sets = {}) {
  GraphRun r = run_graph(name, yaml, threads, sets);
  INFO(r.message());
  REQUIRE(r.exit_code == 0);
  return r;
}

// Runs the numpy oracle kIdxPython + `script` (argv[1..] = args); a failed check fails the test
// with the oracle's output, and the test goes on. Returns its result, for tests that read what
// it prints.
inline Result run_numpy_oracle(const std::string& script, const std::vector<std::string>& args) {
  return check_python(std::string(kIdxPython) + script, args);
}

}  // namespace embedflow::test
