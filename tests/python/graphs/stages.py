"""Python stages for py.map in the tests (graphs/stage.yaml names this file)."""
import threading

import numpy as np

calls = 0
_lock = threading.Lock()


def square(record, field="value"):
    """The record with `field` squared, and its double as a new field."""
    global calls
    with _lock:
        calls += 1
    v = record[field]
    return {**record, field: np.square(v), "twice": v * 2.0}


def keep_even(record, field="value"):
    """Drops odd records, doubles even ones into two records."""
    if int(record["index"]) % 2:
        return None
    return [record, {**record, "copy": np.ones(1, dtype=np.int32)}]


def fail_on_third(record, field="value"):
    if int(record["index"]) == 2:
        raise ValueError(f"record {int(record['index'])} is not welcome")
    return record


def wrong_type(record, field="value"):
    return {**record, "bad": {"nested": 1}}


def wrong_dtype(record, field="value"):
    return {**record, "half": np.zeros(3, dtype=np.float16)}


def forward(record, field="value"):
    global calls
    with _lock:
        calls += 1
    return record


def slow(record, field="value"):
    import time
    time.sleep(0.05)
    return record


def very_slow(record, field="value"):
    import time
    time.sleep(2.0)
    return record
