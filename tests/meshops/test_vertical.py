"""The vertical operators (meshops/operators/vertical.py) against dense matrices built level by
level, discrete identities and known values, and their CUDA sources run on the host against the
NumPy reference, on columns of the real x1.162 mesh's cells and edges."""
import numpy as np
import pytest

import meshops
from adjoint.verification import tangent_taylor_test
from meshops.modes import ADJOINT_MODES
from meshops.operators.vertical import CP_DRY, P0, R_DRY, sample_pressure
from meshops.registry import OPERATORS

from .conftest import backend_pairs, base_state, random_field
from .host_harness import HostArray, host, host_fixtures

VERTICAL = sorted(n for n, s in OPERATORS.items() if s.vertical)
LINEAR = [n for n in VERTICAL if OPERATORS[n].linear]


def dense(name, N):
    """Operator `name` on one column of N layers as a dense matrix, entry by entry from its rule."""
    if name == "sum_layers_from_top_l2i":
        return np.array([[1.0 if j >= k else 0.0 for j in range(N)] for k in range(N + 1)])
    if name == "sum_layers_from_bottom_l2i":
        return np.array([[1.0 if j < k else 0.0 for j in range(N)] for k in range(N + 1)])
    M = np.zeros((N + 1, N) if name.endswith("l2i") else (N, N + 1))
    for k in range(M.shape[0]):
        if name == "avg_l2i":
            M[k, max(k - 1, 0)] += 0.5
            M[k, min(k, N - 1)] += 0.5
        elif name == "diff_l2i" and 0 < k < N:
            M[k, k - 1], M[k, k] = -1.0, 1.0
        elif name == "avg_i2l":
            M[k, k], M[k, k + 1] = 0.5, 0.5
        elif name == "diff_i2l":
            M[k, k], M[k, k + 1] = -1.0, 1.0
        elif name == "div_vflux_i2l":
            M[k, k] = -1.0 if k > 0 else 0.0
            M[k, k + 1] = 1.0 if k + 1 < N else 0.0
    return M


@pytest.mark.parametrize("N", [1, 2, 5])
@pytest.mark.parametrize("columns", ["cell", "edge"])
@pytest.mark.parametrize("name", LINEAR)
def test_linear_operators_match_dense_columns(name, columns, N, mpas_mesh, rng):
    spec, M = OPERATORS[name], dense(name, N)
    x = random_field(mpas_mesh, spec.domain[0], rng, nlev=N, columns=columns)
    y = random_field(mpas_mesh, spec.range[0], rng, nlev=N, columns=columns)
    np.testing.assert_allclose(spec.forward(mpas_mesh, x), x @ M.T, rtol=0, atol=1e-14 * np.abs(x).sum())
    for mode in ADJOINT_MODES:
        np.testing.assert_allclose(spec.adjoint(mpas_mesh, y, mode=mode), y @ M, rtol=0,
                                   atol=1e-14 * np.abs(y).sum())


def test_column_identities(mpas_mesh, rng):
    """Interface pressure from layer masses: p_top at the top, the column total at the surface,
    decreasing upward; sums from the top and the bottom add to the total; the flux divergence sums
    to 0 in every column and is -diff_l2i^T; differences of averages of a constant vanish."""
    N, g, p_top = 7, 9.80616, 1000.0
    mass = rng.uniform(100.0, 2000.0, (mpas_mesh.nCells, N))
    p_i = p_top + g * meshops.sum_layers_from_top_l2i(mpas_mesh, mass)
    assert np.all(p_i[:, N] == p_top) and np.all(np.diff(p_i, axis=1) < 0)
    np.testing.assert_allclose(p_i[:, 0], p_top + g * mass.sum(axis=1), rtol=1e-14)
    total = meshops.sum_layers_from_top_l2i(mpas_mesh, mass) + meshops.sum_layers_from_bottom_l2i(mpas_mesh, mass)
    np.testing.assert_allclose(total, np.repeat(mass.sum(axis=1, keepdims=True), N + 1, axis=1), rtol=1e-14)
    F = random_field(mpas_mesh, "interface", rng, nlev=N)
    div = meshops.div_vflux_i2l(mpas_mesh, F)
    assert np.all(np.abs(div.sum(axis=1)) <= 1e-14 * np.abs(div).sum(axis=1))
    q = random_field(mpas_mesh, "layer", rng, nlev=N)
    lhs = (div * q).sum()
    assert abs(lhs + (F * meshops.diff_l2i(mpas_mesh, q)).sum()) <= 1e-13 * np.abs(div * q).sum()
    c = np.full((mpas_mesh.nCells, N), rng.uniform(1, 2))
    assert np.all(meshops.diff_i2l(mpas_mesh, meshops.avg_l2i(mpas_mesh, c)) == 0)
    assert np.all(meshops.avg_i2l(mpas_mesh, meshops.avg_l2i(mpas_mesh, c)) == c)


def test_interpolation_is_exact_for_linear_in_log_p_and_clamps(mpas_mesh, rng):
    """x = a + b log p is reproduced at p_level in columns that bracket it; a column wholly above
    p_level takes its lowest layer, one wholly below it its top layer."""
    N = 6
    p = sample_pressure(rng.standard_normal((mpas_mesh.nEdges, N)))
    a, b = rng.standard_normal((2, mpas_mesh.nEdges, 1))
    x = a + b * np.log(p)
    p_level = float(rng.uniform(3e4, 7e4))
    y = meshops.interp_level_l2p(mpas_mesh, p, x, p_level=p_level)
    inside = (p[:, 0] >= p_level) & (p[:, -1] < p_level)
    assert inside.any()
    # round-off relative to the terms a and b log p (their sum may cancel to near 0)
    scale = (np.abs(a) + np.abs(b * np.log(p_level)))[inside, 0]
    np.testing.assert_array_less(np.abs(y[inside] - (a + b * np.log(p_level))[inside, 0]),
                                 1e-12 * scale)
    high = p[:, 0] * 1.01                                   # below the lowest layer: x[0]
    np.testing.assert_array_equal(meshops.interp_level_l2p(mpas_mesh, p, x, p_level=high.max()), x[:, 0])
    np.testing.assert_array_equal(meshops.interp_level_l2p(mpas_mesh, p, x, p_level=p.min() / 2), x[:, -1])


def test_interpolation_taylor_in_pressure(mpas_mesh, rng):
    """The tangent in p (with perturbations of the order of 100 Pa) converges at second order."""
    N = 8
    p = sample_pressure(rng.standard_normal((mpas_mesh.nCells, N)))
    x = random_field(mpas_mesh, "layer", rng, nlev=N)
    dp, dx = 100.0 * rng.standard_normal(p.shape), random_field(mpas_mesh, "layer", rng, nlev=N)
    y = random_field(mpas_mesh, "column", rng)
    result = tangent_taylor_test(lambda *a: meshops.interp_level_l2p(mpas_mesh, *a, p_level=60000.0),
                                 lambda *a: meshops.interp_level_l2p_tl(mpas_mesh, *a, p_level=60000.0),
                                 (p, x), (dp, np.zeros_like(dx)), y)
    assert result.min_rate >= 1.9, result


def test_thermodynamics_known_values(mpas_mesh, rng):
    """exner(p0) = 1; the specific volume is R T / p with T = theta * exner(p) (ideal gas)."""
    p = sample_pressure(random_field(mpas_mesh, "layer", rng, nlev=4))
    theta = rng.uniform(250.0, 400.0, p.shape)
    assert np.all(meshops.exner(mpas_mesh, np.full(p.shape, P0)) == 1.0)
    T = theta * (p / P0) ** (R_DRY / CP_DRY)
    np.testing.assert_allclose(meshops.specific_volume(mpas_mesh, p, theta), R_DRY * T / p, rtol=1e-14)
    np.testing.assert_allclose(meshops.exner(mpas_mesh, p), T / theta, rtol=1e-14)


def test_bad_fields_are_named(mpas_mesh, rng):
    x = random_field(mpas_mesh, "layer", rng, nlev=4)
    with pytest.raises(ValueError, match=r"F: expected a interface field of shape \(n, nVertLevels \+ 1\)"):
        meshops.avg_i2l(mpas_mesh, np.zeros(mpas_mesh.nCells))
    with pytest.raises(ValueError, match=r"x: expected a layer field of shape \(n, 4\), n = 162"):
        meshops.interp_level_l2p(mpas_mesh, x, x[:, :3])
    with pytest.raises(ValueError, match="p_level: expected a positive pressure in Pa, got -5"):
        meshops.interp_level_l2p(mpas_mesh, x, x, p_level=-5)
    with pytest.raises(ValueError, match="n one of nCells=162, nEdges=480, nVertices=320"):
        meshops.sum_layers_from_top_l2i(mpas_mesh, np.zeros((7, 3)))


# -- the CUDA source compiled for the host: launch signatures and results without a GPU ------------

host_kernels, on_host = host_fixtures("vertical")


@pytest.mark.parametrize("nlev", [1, 4, 7])
@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-13), (np.float32, 1e-5)])
@pytest.mark.parametrize("columns", ["cell", "edge"])
@pytest.mark.parametrize("name", VERTICAL)
def test_cuda_sources_on_host(name, columns, dtype, tol, nlev, mpas_mesh, on_host, rng):
    """Forward, tangent and both adjoint modes of the CuPy path, run on the host, equal the NumPy
    reference; the forward restricted to rows [first, last) matches on those rows."""
    spec = OPERATORS[name]
    mesh = mpas_mesh.replace()            # its own DeviceMesh (tables built anew)

    def fields(locs):
        return tuple(random_field(mesh, loc, rng, nlev=nlev, dtype=dtype, columns=columns) for loc in locs)

    x, y = base_state(spec, fields(spec.domain)), fields(spec.range)
    dx = () if spec.linear else fields(spec.domain)
    dev = lambda arrays: tuple(host(a) for a in arrays)  # noqa: E731
    for ref, res in backend_pairs(spec, mesh, dev, x, y, base=() if spec.linear else x, dx=dx):
        assert isinstance(res, HostArray), name
        assert np.abs(np.asarray(res, np.float64) - ref).max() <= tol * np.abs(ref).max(), name
    full = spec.forward(mesh, *x)
    first, last = full.shape[0] // 3, 2 * full.shape[0] // 3
    part = np.asarray(spec.forward(mesh, *dev(x), rows=(first, last)))[first:last]
    assert np.abs(part - full[first:last]).max() <= tol * np.abs(full).max(), name
    assert set(on_host["vertical"]) <= set(meshops.operators.vertical._KERNELS.names)
