"""The operator benchmark's measurement machinery on the CPU: byte counting, peer agreement, the run."""
import json

import numpy as np
import pytest

from benchmarks import bench_operators as bench
from benchmarks import common, peers


@pytest.fixture(scope="module")
def ico_mesh():
    from grids.icosahedral import generate_icosahedral

    return generate_icosahedral(3)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_div_e2c_bytes_are_its_arrays_read_once(ico_mesh, dtype, rng):
    from meshops import div_e2c

    m = ico_mesh
    F = rng.standard_normal((m.nEdges, 3)).astype(dtype)
    size = np.dtype(dtype).itemsize
    with common.MeshArrayRecorder() as rec:
        out = div_e2c(m, F)
        div_e2c(m, F)  # a second call reads the same arrays: still counted once
    # both paths read edgesOnCell (int32) and the coefficients cellCoef on it (field dtype)
    expected = 4 * m.nCells * m.maxEdges + size * m.nCells * m.maxEdges
    assert rec.nbytes == expected
    assert common.nbytes_of((F, F, out)) == F.nbytes + out.nbytes


def test_recorder_restores_the_table_lookup(ico_mesh, rng):
    from meshops.device.mesh import DeviceMesh

    original = DeviceMesh.table
    with common.MeshArrayRecorder():
        assert DeviceMesh.table is not original
    assert DeviceMesh.table is original


def test_gpu_bytes_are_the_tables_the_kernels_take(ico_mesh, rng, tmp_path):
    """On the CuPy path (here routed to the host-compiled kernels) a mesh table counts only
    when a kernel takes it: interp_c2e's mean_2e and its gather adjoint take cellsOnEdge and its
    transpose but no coefficients, and each adjoint mode takes its own table only."""
    from meshops import interp_c2e, interp_c2e_adj
    from meshops.device.mesh import for_fields
    from tests.meshops.host_harness import compile_families, host, route_to_host

    with route_to_host(compile_families(tmp_path, ["interpolation"]), ["interpolation"]):
        m = ico_mesh
        phi, g = host(rng.standard_normal((m.nCells, 4))), host(rng.standard_normal((m.nEdges, 4)))
        tables = for_fields(m, g)
        with common.MeshArrayRecorder() as rec:
            interp_c2e(m, phi)
        assert rec.nbytes == tables.table("cellsOnEdge").nbytes == 4 * 2 * m.nEdges
        with common.MeshArrayRecorder() as rec:
            interp_c2e_adj(m, g, mode="deterministic")
        assert rec.nbytes == tables.table("cellsOnEdgeT").nbytes == 4 * m.nCells * m.maxEdges
        with common.MeshArrayRecorder() as rec:
            interp_c2e_adj(m, g, mode="atomic")
        assert rec.nbytes == tables.table("cellsOnEdge").nbytes


def _jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)


@pytest.mark.parametrize("name", ["div_e2c", "flux_div_e2c"])
def test_peer_agrees_and_a_wrong_peer_is_rejected(ico_mesh, rng, name, monkeypatch):
    _jax()
    spec = bench.load_operators()[name]
    args = bench.parse_args(["--backend", "numpy", "--quick"])
    x = bench.random_fields(ico_mesh, spec.domain, 4, np.float64, np, rng)
    g = bench.random_fields(ico_mesh, spec.range, 4, np.float64, np, rng)
    good = bench.bench_peer("jax", spec, ico_mesh, np.float64, np, None, args, x, g, {})
    assert set(good) >= {"fwd", "adj", "fwd_adj"}, good
    original = peers.PEERS[name]

    def wrong(mesh):
        consts, fn = original(mesh)
        coef = consts["s_coef"].copy()
        coef[rng.integers(coef.shape[0]), 0] *= 1.0001
        return dict(consts, s_coef=coef), fn

    monkeypatch.setitem(peers.PEERS, name, wrong)
    assert bench.bench_peer("jax", spec, ico_mesh, np.float64, np, None, args, x, g, {}) == \
        dict(error="disagrees with meshops")


def test_run_writes_rows_for_every_pass(tmp_path):
    out = tmp_path / "rows.json"
    bench.main(["--backend", "numpy", "--levels", "2", "--quick", "--no-peers", "--nlev", "1", "4",
                "--dtypes", "float32", "--ops", "div_e2c", "ke_e2c", "--cache-dir", str(tmp_path),
                "--json", str(out)])
    rows = json.loads(out.read_text())["rows"]
    seen = {(r["op"], r["nlev"], r["pass"]) for r in rows if "error" not in r}
    assert seen == {(op, nlev, p) for nlev in (1, 4) for op, p in
                    [("div_e2c", "fwd"), ("div_e2c", "adj_atomic"), ("div_e2c", "adj_det"),
                     ("ke_e2c", "fwd"), ("ke_e2c", "tl"), ("ke_e2c", "adj_atomic"), ("ke_e2c", "adj_det")]}
    for r in rows:
        assert r["ms"] > 0 and r["bytes"] > 0 and r["gbs"] > 0
        if r["pass"] == "adj_atomic":
            fwd = next(s for s in rows if (s["op"], s["nlev"], s["pass"]) == (r["op"], r["nlev"], "fwd"))
            assert r["adj_over_fwd"] == pytest.approx(r["ms"] / fwd["ms"])
    assert list(tmp_path.glob("icos_l2_lloyd0_morton_*.grid.nc"))     # the package's mesh cache
