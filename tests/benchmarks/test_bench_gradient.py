"""benchmarks/bench_gradient.py at the smoke size on the CPU (a subprocess: dinosaur turns on JAX's
float64 for its process): positive times and finite gradients on both sides, or the dinosaur side
skipped, saying so, where jax or dinosaur is missing."""
import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_gradient.py"


@pytest.mark.slow
def test_bench_gradient_smoke(tmp_path):
    out = tmp_path / "gradient.json"
    env = dict(os.environ, MESHOPS_NO_MPI="1", MESHOPS_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, str(SCRIPT), "--backend", "numpy", "--level", "3",
                           "--dt", "1440", "--days", "0.25", "--truncation", "21", "--json", str(out)],
                          capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    m = result["meshops"]
    assert m["cells"] == 642 and m["levels"] == 26 and m["steps"] == 15 and m["dt"] == 1440.0
    assert m["forward_s"] > 0 and m["gradient_s"] > 0 and m["ratio"] > 0
    assert math.isfinite(m["gradient_norm"]) and m["gradient_norm"] > 0
    assert "| meshops L3 numpy float64 |" in done.stdout
    d = result["dinosaur"]
    if "skipped" in d:
        assert importlib.util.find_spec("jax") is None or importlib.util.find_spec("dinosaur") is None \
            or "No module named" in d["skipped"], d["skipped"]
        assert "dinosaur side skipped" in done.stdout
        return
    assert d["steps"] == 12 and d["forward_s"] > 0 and d["forward_compile_s"] > 0
    assert d["plain"]["gradient_s"] > 0
    assert math.isfinite(d["plain"]["gradient_norm"]) and d["plain"]["gradient_norm"] > 0
    assert "| dinosaur jax.grad plain | T21 (64x32) x 26 |" in done.stdout


@pytest.mark.parametrize("argv, message", [
    (["--days", "0"], "argument --days: '0': expected a number above 0"),
    (["--snapshots", "many"], "argument --snapshots: 'many': expected auto or a count"),
    (["--days", "0.3", "--truncation", "21"], "--days 0.3 with --truncation 21: dinosaur's dt"),
])
def test_bad_options_are_refused_before_any_run(argv, message):
    done = subprocess.run([sys.executable, str(SCRIPT), "--backend", "numpy", *argv],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and message in done.stderr, done.stderr[-2000:]
