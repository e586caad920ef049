"""Shared fixtures: the package under test comes from the build tree (PYTHONPATH=build/python,
set by ctest), the graphs from tests/python/graphs."""
import os
import pathlib

import pytest

HERE = pathlib.Path(__file__).resolve().parent
SOURCE = HERE.parents[1]
GRAPHS = HERE / "graphs"
BUILD = pathlib.Path(os.environ.get("EMBEDFLOW_BUILD_DIR", SOURCE / "build"))


@pytest.fixture(scope="session")
def ef():
    import embedflow
    return embedflow


@pytest.fixture
def graphs():
    return GRAPHS


@pytest.fixture
def build():
    return BUILD


@pytest.fixture
def source():
    return SOURCE


@pytest.fixture(scope="session")
def stage_cache(tmp_path_factory):
    """One stage cache for the tests that run the geo pairs loader: the pairs are sampled once."""
    return tmp_path_factory.mktemp("cache")
