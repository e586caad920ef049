"""tools/examples/train_geo_pairs.py: a PyTorch loop fed by the geo pairs graph, a few steps."""
import os
import subprocess
import sys

import pytest


def test_the_example_trains_a_few_steps(source, build, tmp_path, stage_cache):
    env = dict(os.environ, PYTHONPATH=str(build / "python"), EMBEDFLOW_CACHE_DIR=str(stage_cache))
    script = source / "tools" / "examples" / "train_geo_pairs.py"
    r = subprocess.run([sys.executable, str(script), "--steps", "12", "--batch", "32", "--log-every", "4",
                        "--threads", "1", "--graph-threads", "2", "--out", str(tmp_path / "run"),
                        "--save", str(tmp_path / "model.pt")],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert [l.split(":")[0] for l in r.stdout.splitlines() if l.startswith("step ")] == ["step 4", "step 8", "step 12"]
    assert "12 steps of 32 pairs" in r.stdout
    # The loader graph ran as a recorded run, stopped when the loop had what it wanted.
    assert (tmp_path / "run" / "run.json").exists()
    torch = pytest.importorskip("torch")
    state = torch.load(tmp_path / "model.pt")
    assert state["head.2.weight"].shape == (64, 128)


def test_the_batches_are_what_the_model_expects(ef, source, tmp_path, stage_cache):
    """The loader's batches: two f32 image tensors [B,1,28,28], normalized, and 0/1 pair labels."""
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(source / "tools" / "examples"))
    try:
        from train_geo_pairs import embedflow_batches
    finally:
        sys.path.pop(0)
    with embedflow_batches(ef, batch=16, cache_dir=stage_cache, out=tmp_path / "run") as batches:
        batch = next(batches)
    assert batch["a_image"].shape == batch["b_image"].shape == (16, 1, 28, 28)
    assert batch["a_image"].dtype == torch.float32 and batch["pair_label"].dtype == torch.float32
    assert set(batch["pair_label"].tolist()) <= {0.0, 1.0}
    # normalized with Fashion-MNIST's mean and std: a black pixel is -0.286 / 0.353
    assert batch["a_image"].min().item() == pytest.approx(-0.2860 / 0.3530, abs=1e-4)
    assert set(batch["a_id"].tolist()) and batch["a_id"].dtype == torch.int64


def test_a_port_the_cache_plan_skips_cannot_be_streamed(ef, source, tmp_path, stage_cache):
    """With the pairs cached, the geotag node upstream of them does not run; streaming it says so
    instead of yielding nothing, and no_cache runs it."""
    graph = source / "tools" / "examples" / "geo_pairs_loader.yaml"
    with pytest.raises(ef.GraphError, match="node 'tags' would not run"):
        next(ef.Graph(graph, cache_dir=stage_cache, out=tmp_path / "a").stream("tags.out"))
    with ef.Graph(graph, no_cache=True, out=tmp_path / "b").stream("tags.out") as s:
        tags = next(s)
    assert {"id", "lat", "lon", "user"} <= set(tags)
    assert tags["lat"].dtype.name == "float64" and isinstance(tags["user"], list) and isinstance(tags["user"][0], str)
