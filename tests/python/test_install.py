"""`cmake --install` puts the package under <prefix>/<libdir>/python3/dist-packages, where it
imports with no build tree around and finds the installed plugins."""
import os
import subprocess
import sys


def test_the_installed_module_imports_and_runs(build, graphs, tmp_path):
    prefix = tmp_path / "prefix"
    r = subprocess.run(["cmake", "--install", str(build), "--prefix", str(prefix)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    site = next(prefix.glob("lib*/python3/dist-packages"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "EMBEDFLOW_PLUGIN_PATH", "EMBEDFLOW_BUILD_DIR")}
    env["PYTHONPATH"] = str(site)
    code = ("import embedflow, sys, json\n"
            "print(embedflow.__file__)\n"
            "print(embedflow.PLUGIN_DIR)\n"
            f"r = embedflow.run({str(graphs / 'numbers.yaml')!r}, set={{'count': 5}}, out={str(tmp_path / 'o')!r})\n"
            "print(r['status'], json.dumps([p['file'] for p in r['versions']['plugins'] if p['name'] == 'core']))\n"
            f"print(sum(1 for b in embedflow.Graph({str(graphs / 'stage.yaml')!r}, "
            f"out={str(tmp_path / 's')!r}).stream('stage.out')))\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    module, plugins, status, stage_count = r.stdout.strip().splitlines()[:2] + [l for l in r.stdout.splitlines()[2:] if not l.startswith("count")]
    assert module.startswith(str(site))
    assert plugins.startswith(str(prefix)) and plugins.endswith(os.path.join("embedflow", "plugins"))
    assert status.startswith("done") and str(prefix) in status
    assert stage_count == "20"
