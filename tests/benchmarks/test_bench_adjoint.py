"""benchmarks/bench_adjoint.py on the CPU: its table of step ratios and whole gradients runs on a
small mesh, and the adjoint step's traffic floor counts what its module doc says."""
import json

from benchmarks import bench_adjoint
from benchmarks.bench_model import floor_bytes, table_bytes
from grids.icosahedral import generate_icosahedral


def test_adjoint_floor_is_the_recompute_and_four_stages():
    mesh = generate_icosahedral(2)
    C, E, V = mesh.nCells, mesh.nEdges, mesh.nVertices
    for itemsize in (4, 8):
        stage = table_bytes(mesh, itemsize) + itemsize * (
            (C + E + 2 * V + 2 * E) + 2 * (C + E) + 2 * (C + E) + (C + E) + 2 * C)
        assert bench_adjoint.adjoint_floor_bytes(mesh, itemsize) == floor_bytes(mesh, itemsize) + 4 * stage


def test_bench_adjoint_runs_on_numpy(tmp_path, capsys):
    out = tmp_path / "adjoint.json"
    assert bench_adjoint.main(["--backend", "numpy", "--levels", "2", "--reps", "1", "--stored-steps", "2",
                               "--cache-dir", str(tmp_path / "cache"), "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    (step,) = result["steps"]
    assert step["level"] == 2 and step["adj_deterministic_ms"] > 0 and step["adj_atomic_ms"] > 0
    assert [g["schedule"] for g in result["gradients"]] == ["none", "multistage"]
    assert result["gradients"][0]["J"] == result["gradients"][1]["J"]
    assert "| 2 | 162 |" in capsys.readouterr().out
