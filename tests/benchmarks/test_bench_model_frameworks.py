"""The model-step adapter benchmark on the CPU with a small mesh: every candidate's step and gradient
agree with meshops's model and adjoint before it is timed, and one that disagrees is reported."""
import json

import numpy as np
import pytest

from benchmarks import bench_model_frameworks as bench
from benchmarks import native_trisk

pytest.importorskip("torch")
pytest.importorskip("jax")


def test_every_candidate_agrees_and_is_timed(tmp_path):
    out = tmp_path / "model.json"
    bench.main(["--backend", "numpy", "--levels", "3", "--reps", "2", "--batch-seconds", "0.001",
                "--cache-dir", str(tmp_path), "--json", str(out)])
    (row,) = json.loads(out.read_text())["rows"]
    assert row["errors"] == {}
    assert set(row["ms"]) == set(bench.CANDIDATES)
    assert all(t[p] > 0 for t in row["ms"].values() for p in bench.PASSES)
    assert "| 3 | float64 | native jax |" in bench.markdown(json.loads(out.read_text()))


def test_a_candidate_that_disagrees_is_reported(tmp_path, monkeypatch):
    original = native_trisk.tendencies

    def wrong_gravity(c, h, u, b, f_vertex, gravity):
        return original(c, h, u, b, f_vertex, gravity * (1 + 1e-6))

    monkeypatch.setattr(native_trisk, "tendencies", wrong_gravity)
    args = bench.parse_args(["--backend", "numpy", "--reps", "1", "--cache-dir", str(tmp_path)])
    mesh = bench.meshes.icosahedral_mesh(3, tmp_path, log=lambda *a: None)
    row = bench.bench_level(mesh, 3, np.float64, np, ["meshops", "torch", "native jax"], args,
                            np.random.default_rng(0))
    assert set(row["ms"]) == {"meshops", "torch"}
    assert "disagree with meshops" in row["errors"]["native jax"]
